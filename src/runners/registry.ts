/**
 * Every runner brine serves, by Salt name. A runner thread runs one call, so it loads only the module of
 * the runner it runs (importing every runner module took ~330 ms of each thread's start: the pillar
 * compiler, the fileserver, the survey's diff…). `RUNNER_MODULES` says which module serves which Salt
 * module names (a test checks each module's exports against it); `RUNNERS` holds runners registered
 * in code at run time (tests' fault injection), looked at first.
 */
import type { RunnerFn } from "./context.js";

type RunnerTable = Record<string, RunnerFn>;

export const RUNNER_MODULES: readonly { prefixes: readonly string[]; load: () => Promise<RunnerTable> }[] = [
  { prefixes: ["jobs"], load: async () => (await import("./jobs.js")).jobsRunners },
  { prefixes: ["manage"], load: async () => (await import("./manage.js")).manageRunners },
  { prefixes: ["state"], load: async () => (await import("./state.js")).stateRunners },
  { prefixes: ["cluster"], load: async () => ({ ...(await import("./cluster.js")).clusterRunners, ...(await import("./cluster-sync.js")).stateSyncRunners, ...(await import("./cluster-recover.js")).recoverRunners }) },
  { prefixes: ["reactor", "schedule"], load: async () => (await import("./reactor.js")).reactorRunners },
  { prefixes: ["test"], load: async () => (await import("./test.js")).testRunners },
  { prefixes: ["cache"], load: async () => (await import("./cache.js")).cacheRunners },
  { prefixes: ["mine"], load: async () => (await import("./mine.js")).mineRunners },
  { prefixes: ["pillar"], load: async () => (await import("./pillar.js")).pillarRunners },
  { prefixes: ["fileserver", "git_pillar"], load: async () => (await import("./fileserver.js")).fileserverRunners },
  { prefixes: ["survey"], load: async () => (await import("./survey.js")).surveyRunners },
  { prefixes: ["saltutil"], load: async () => (await import("./custom.js")).saltutilRunners },
  { prefixes: ["brine"], load: async () => (await import("./brine.js")).brineRunners },
  { prefixes: ["pki"], load: async () => (await import("./pki.js")).pkiRunners },
];

/** Runners registered in code at run time; consulted before the modules. */
export const RUNNERS: RunnerTable = {};

/** The runner for a Salt name (`jobs.list_jobs`), loading only its module; undefined when brine has none. */
export async function findRunner(name: string): Promise<RunnerFn | undefined> {
  if (Object.hasOwn(RUNNERS, name)) return RUNNERS[name];
  const prefix = name.split(".")[0]!;
  for (const m of RUNNER_MODULES) {
    if (!m.prefixes.includes(prefix)) continue;
    const table = await m.load();
    if (Object.hasOwn(table, name)) return table[name];
  }
  return undefined;
}

/** Every runner name brine serves (loads every module: for listings and tests, not for a call). */
export async function allRunnerNames(): Promise<string[]> {
  const names = new Set(Object.keys(RUNNERS));
  for (const m of RUNNER_MODULES) for (const k of Object.keys(await m.load())) names.add(k);
  return [...names].sort();
}
