/**
 * brine-swarm: N simulated Salt minions against any master (brine or the Python salt-master), and the
 * figures that come out of it.
 *
 * Every run: check the descriptor budget, make sure the key pool holds N keys (generated once, cached on
 * disk), load the minions into `procs` workers, then start them all at once (the auth storm: sign-in,
 * SUB connect, `_pillar`, start events) and wait until each is up or has failed. Then, by scenario:
 * - `auth-storm`: nothing more;
 * - `ping`: publish `test.ping` (`--count` times, one after the other) with the master's root key and wait
 *   for every return;
 * - `steady`: publish a job every `interval` seconds for `duration` seconds, then wait for the returns;
 * - `churn`: every `interval` seconds for `duration` seconds, a fraction of the minions disconnect and come
 *   back after Salt's randomized reconnect delay; after each round every minion is pinged.
 * Timeouts, refused sign-ins, "bad load" replies, dropped publishes and missing returns are counted and
 * listed in the report, never hidden.
 */
import { nowMs } from "../../src/shared/coarse-timer.js";
import { syntheticGrains } from "../../src/lib/minion/grains.js";
import { DEFAULT_KEY_POOL_DIR, ensureKeyPool, type KeyPoolInfo } from "../../src/lib/minion/keys.js";
import type { Protocol } from "../../src/lib/minion/sign-in.js";
import { minionMatches } from "../../src/lib/targeting/index.js";
import { BrineError } from "../../src/shared/errors.js";
import { checkFdLimit } from "./fd-limit.js";
import { Fleet } from "./fleet.js";
import { minionId, sourceIpOf, type MinionSettings, type WorkerUsage } from "./events.js";
import { ProcMonitor, type MasterUsage } from "./proc-stats.js";
import { Progress } from "./progress.js";
import { PublishClient, readRootKey, type PublishReply } from "./publish-client.js";
import { buildReport, type SwarmReport } from "./report.js";
import type { JobTrack } from "./collector.js";
import { openFds } from "./worker.js";

export const SCENARIOS = ["auth-storm", "ping", "steady", "churn"] as const;
export type Scenario = (typeof SCENARIOS)[number];

export interface SwarmOptions {
  scenario: Scenario;
  master: string;
  retPort?: number;
  /** override the publish port from the auth reply */
  publishPort?: number;
  minions: number;
  procs?: number;
  /** the master's root key file (.root_key); needed to publish */
  rootKeyFile?: string;
  /** or the key text itself (tests) */
  rootKey?: string;
  /** the user the key belongs to (default: from the file name, else root) */
  user?: string;
  protocol?: Protocol;
  keyDir?: string;
  idPrefix?: string;
  /** Salt minion settings (ms) */
  acceptanceWaitMs?: number;
  acceptanceWaitMaxMs?: number;
  authTimeoutMs?: number;
  authTries?: number;
  requestTimeoutMs?: number;
  requestTries?: number;
  randomReauthDelayMs?: number;
  reconDefaultMs?: number;
  reconMaxMs?: number;
  pubMonitor?: boolean;
  sourceIps?: number;
  cmdRunOutput?: string;
  /** how long the storm may take before the stragglers count as failed (ms) */
  startTimeoutMs?: number;
  /** random_startup_delay (ms): each minion starts after a random delay up to this; 0 = all at once */
  startupDelayMs?: number;
  /** how long to wait for a job's returns (ms) */
  jobTimeoutMs?: number;
  fun?: string;
  arg?: unknown[];
  target?: string;
  tgtType?: string;
  /** ping: jobs one after the other */
  count?: number;
  /** steady/churn: seconds between jobs/rounds */
  intervalS?: number;
  /** steady/churn: seconds to run */
  durationS?: number;
  /** churn: fraction of the minions cycled per round */
  churnFraction?: number;
  /** a local master pid whose RSS/CPU to report */
  masterPid?: number;
  progress?: boolean;
  /** run the minions in this process even with procs = 1 (default) or force forked workers */
  inProcess?: boolean;
  ioThreads?: number;
  /** stop early (Ctrl-C): the scenario ends, the minions stop, the report covers what happened */
  signal?: AbortSignal;
}

function resolved(o: SwarmOptions) {
  const minions = o.minions;
  if (!Number.isInteger(minions) || minions < 1) throw new BrineError("SWARM_OPTIONS", "--minions must be a positive integer");
  if (!SCENARIOS.includes(o.scenario)) throw new BrineError("SWARM_OPTIONS", `unknown scenario ${JSON.stringify(o.scenario)} (one of ${SCENARIOS.join(", ")})`);
  const procs = Math.max(1, Math.min(o.procs ?? 1, minions));
  const idPrefix = o.idPrefix ?? "swarm-";
  const settings: MinionSettings = {
    master: o.master,
    retPort: o.retPort ?? 4506,
    publishPort: o.publishPort,
    protocol: o.protocol ?? "v3",
    keyDir: o.keyDir ?? DEFAULT_KEY_POOL_DIR,
    idPrefix,
    idWidth: Math.max(5, String(minions - 1).length),
    acceptanceWaitMs: o.acceptanceWaitMs ?? 10_000,
    acceptanceWaitMaxMs: o.acceptanceWaitMaxMs ?? 0,
    authDeadlineMs: o.startTimeoutMs ?? Math.max(120_000, minions * 40),
    authTimeoutMs: o.authTimeoutMs ?? 5_000,
    authTries: o.authTries ?? 7,
    requestTimeoutMs: o.requestTimeoutMs ?? 60_000,
    requestTries: o.requestTries ?? 3,
    randomReauthDelayMs: o.randomReauthDelayMs ?? 10_000,
    reconDefaultMs: o.reconDefaultMs ?? 1_000,
    reconMaxMs: o.reconMaxMs ?? 10_000,
    pubMonitor: o.pubMonitor ?? true,
    sourceIps: o.sourceIps ?? 0,
    cmdRunOutput: o.cmdRunOutput,
  };
  return {
    ...o,
    minions,
    procs,
    settings,
    startupDelayMs: Math.max(0, o.startupDelayMs ?? 0),
    startTimeoutMs: settings.authDeadlineMs + 30_000 + Math.max(0, o.startupDelayMs ?? 0),
    jobTimeoutMs: o.jobTimeoutMs ?? 30_000,
    fun: o.fun ?? "test.ping",
    arg: o.arg ?? [],
    target: o.target ?? `${idPrefix}*`,
    tgtType: o.tgtType ?? "glob",
    count: Math.max(1, o.count ?? 1),
    intervalS: o.intervalS ?? 10,
    durationS: o.durationS ?? 60,
    churnFraction: Math.min(1, Math.max(0, o.churnFraction ?? 0.1)),
  };
}

type Resolved = ReturnType<typeof resolved>;

export interface SwarmHooks {
  /** called with each phase name as the run goes */
  onPhase?(phase: string): void;
}

/** Run one scenario and return its report. */
export async function runSwarm(options: SwarmOptions, hooks: SwarmHooks = {}): Promise<SwarmReport> {
  const o = resolved(options);
  const startedAt = new Date();
  const progress = new Progress(o.progress ?? !!process.stderr.isTTY);
  const needsPublish = o.scenario !== "auth-storm";
  let rootKey = o.rootKey;
  let user = o.user;
  if (needsPublish && rootKey === undefined) {
    if (!o.rootKeyFile) throw new BrineError("SWARM_OPTIONS", `the ${o.scenario} scenario publishes jobs: give the master's root key (--root-key FILE)`);
    const rk = readRootKey(o.rootKeyFile);
    rootKey = rk.key;
    user ??= rk.user;
  }
  const inProcess = o.inProcess ?? o.procs === 1;
  const fdPlan = checkFdLimit(o.minions, o.procs, o.settings.pubMonitor, inProcess ? openFds() : 0);

  hooks.onPhase?.("keys");
  let keyBar = false;
  const keyPool: KeyPoolInfo = await ensureKeyPool(o.minions, {
    dir: o.settings.keyDir,
    onProgress: (done, total) => {
      if (!keyBar) {
        keyBar = true;
        progress.phase("keys", total);
      }
      progress.update(done);
    },
  });
  progress.stop();
  o.settings.keyDir = keyPool.dir;

  hooks.onPhase?.("load");
  const fleet = new Fleet({ settings: o.settings, minions: o.minions, procs: o.procs, inProcess, ioThreads: o.ioThreads });
  const col = fleet.collector;
  const monitor = o.masterPid ? new ProcMonitor(o.masterPid) : undefined;
  const monitorOk = monitor?.start() ?? false;
  let masterUsage: MasterUsage | null = null;
  let workers: WorkerUsage[] = [];
  const pc = needsPublish ? new PublishClient({ host: o.master, port: o.settings.retPort, key: rootKey!, user: user ?? "root", timeoutMs: 5_000, tries: 3 }) : undefined;
  const jobs: JobTrack[] = [];
  const publishErrors: string[] = [];
  let stormStart = 0;
  let churnRounds = 0;
  try {
    await fleet.init();
    const aborted = () => !!o.signal?.aborted;
    o.signal?.addEventListener("abort", () => col.emit("change"), { once: true });
    const sleep = (ms: number) =>
      new Promise<void>((r) => {
        if (aborted()) return r();
        const t = setTimeout(r, ms);
        o.signal?.addEventListener("abort", () => (clearTimeout(t), r()), { once: true });
      });

    hooks.onPhase?.("auth");
    progress.phase("auth", o.minions);
    const onChange = () => progress.update(col.settledCount(), col.failedCount ? `failed ${col.failedCount}` : "");
    col.on("change", onChange);
    stormStart = nowMs();
    fleet.startAll(o.startupDelayMs);
    await col.waitFor(() => aborted() || col.settledCount() >= o.minions, o.startTimeoutMs);
    col.off("change", onChange);
    progress.stop();

    const expectedFor = (tgt: string, tgtType: string): number[] => {
      const out: number[] = [];
      for (const i of col.upIndices()) {
        const id = minionId(o.settings, i);
        const self = { id, grains: syntheticGrains(id, { index: i, ip: sourceIpOf(o.settings, i), saltversion: o.settings.protocol === "v3" ? "3007.8" : "3006.8" }), pillar: {} };
        if (minionMatches({ tgt, tgt_type: tgtType }, self)) out.push(i);
      }
      return out;
    };

    const publish = async (fun: string, arg: unknown[]): Promise<JobTrack | undefined> => {
      const expected = expectedFor(o.target, o.tgtType);
      const at = nowMs();
      let reply: PublishReply;
      try {
        reply = await pc!.publish({ tgt: o.target, tgt_type: o.tgtType, fun, arg });
      } catch (e) {
        publishErrors.push((e as Error).message);
        col.error(null, "publish_failed", (e as Error).message, Date.now());
        return undefined;
      }
      const job = col.addJob(reply.jid, fun, at, expected);
      jobs.push(job);
      const listed = new Set(reply.minions);
      for (const i of expected) {
        const id = minionId(o.settings, i);
        if (!listed.has(id)) col.error(i, "not_targeted", `the master did not list ${id} for ${reply.jid}`, Date.now());
      }
      return job;
    };
    const settled = (j: JobTrack) => () => {
      if (aborted()) return true;
      for (const i of j.expected) if (!j.returned.has(i) && !j.failed.has(i)) return false;
      return true;
    };
    const waitJob = async (j: JobTrack | undefined, label: string) => {
      if (!j) return;
      progress.phase(label, j.expected.size);
      const onChange = () => progress.update(j.returned.size, j.failed.size ? `failed ${j.failed.size}` : "");
      col.on("change", onChange);
      await col.waitFor(settled(j), o.jobTimeoutMs);
      col.off("change", onChange);
      progress.stop();
    };

    if (o.scenario === "ping") {
      for (let k = 0; k < o.count && !aborted(); k++) {
        hooks.onPhase?.(`ping ${k + 1}`);
        await waitJob(await publish(o.fun, o.arg), "returns");
      }
    } else if (o.scenario === "steady") {
      hooks.onPhase?.("steady");
      const end = Date.now() + o.durationS * 1000;
      const pending: Promise<unknown>[] = [];
      progress.phase("steady", Math.max(1, Math.floor(o.durationS / o.intervalS)));
      let n = 0;
      while (Date.now() < end && !aborted()) {
        const j = await publish(o.fun, o.arg);
        if (j) pending.push(col.waitFor(settled(j), o.jobTimeoutMs));
        progress.update(++n);
        const wait = Math.min(o.intervalS * 1000, end - Date.now());
        if (wait > 0) await sleep(wait);
      }
      progress.stop();
      await Promise.all(pending);
    } else if (o.scenario === "churn") {
      const end = Date.now() + o.durationS * 1000;
      while (Date.now() < end && !aborted()) {
        churnRounds++;
        hooks.onPhase?.(`churn ${churnRounds}`);
        const up = col.upIndices();
        const k = Math.max(1, Math.round(up.length * o.churnFraction));
        const pick = up.sort(() => Math.random() - 0.5).slice(0, k);
        const roundStart = Date.now();
        col.markDown(pick, nowMs());
        fleet.churn(pick, o.settings.reconDefaultMs, o.settings.reconDefaultMs + o.settings.reconMaxMs);
        // wait for the cycled minions to be back (or failed), then ping everyone who is up
        await col.waitFor(() => aborted() || pick.every((i) => col.state[i] === "up" || col.state[i] === "failed"), Math.max(o.intervalS * 1000, o.settings.reconDefaultMs + o.settings.reconMaxMs + 30_000));
        await waitJob(await publish("test.ping", []), "returns");
        const rest = o.intervalS * 1000 - (Date.now() - roundStart);
        if (rest > 0 && Date.now() + rest < end) await sleep(rest);
      }
    }
  } finally {
    progress.stop();
    hooks.onPhase?.("shutdown");
    pc?.close();
    workers = await fleet.shutdown();
    masterUsage = monitor && monitorOk ? monitor.stop() : null;
  }
  return buildReport({
    options: o as Resolved,
    collector: col,
    stormStart,
    jobs,
    keyPool,
    masterUsage,
    masterPidGiven: o.masterPid,
    workers,
    workerErrors: fleet.workerErrors,
    publishErrors,
    churnRounds,
    fdPlan,
    startedAt,
  });
}

export type { Resolved as ResolvedSwarmOptions };
