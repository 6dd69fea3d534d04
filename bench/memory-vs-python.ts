/**
 * Memory per connected minion against the Python master, in one run (issue 17: every figure also as a ratio against
 * the Python master where it can do the same work). The same brine-swarm fleet signs in to brine's master, then to
 * Salt's 3007 master from source (the real-salt harness, as cpu-per-op starts it: worker_threads 5, auto_accept),
 * each master pinned to CPU 0 and the swarm to CPU 1 where the box can pin.
 *
 * Per minion is a slope, not a total over a start: the master's memory with `first` minions connected and with
 * `first + more` connected (each reading after a test.ping every connected minion answered, and a settle), the
 * difference over `more`. What a master spends to start (threads, JIT, its workers' first allocations) is in both
 * readings and drops out, for both masters alike.
 *
 * Memory is the **PSS** of the master's whole process tree (`/proc/<pid>/smaps_rollup`, summed): Python's master is
 * a process tree (its MWorkers and the publisher are forks that share pages, which RSS would count once per
 * process); brine's is one process, whose PSS is its RSS. The RSS sum is in the notes.
 *
 * Each reading follows `BRINE_BENCH_MEMPY_QUIET_S` (20) s of the fleet connected and idle; brine's master runs with
 * node --expose-gc and every thread collects its garbage just before (startBrineForMemory).
 *
 * Sizes: `BRINE_BENCH_MEMPY_SIZES=first,more` (default 300,600; `--full` 1000,2000). Skipped for Python, with the
 * reason, without SALT_GIT_DIR or the harness (../shared/real-salt/README.md); brine's rows are printed either way.
 */
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import { masterAndSwarmCpus, pin, pythonAvailable, startPythonMaster, type Target } from "./cpu-per-op.js";
import { poolKeySlots, poolMinionSettings, startBrineMaster } from "./swarm.js";
import { controlCall } from "../src/lib/client/control-client.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { Fleet } from "../tools/swarm/fleet.js";
import { PublishClient, readRootKey } from "../tools/swarm/publish-client.js";
import { DEFAULT_KEY_POOL_DIR, ensureKeyPool } from "../src/lib/minion/keys.js";

/** a fleet's sign-ins (paced: 8 at a time per swarm process), ms */
const startTimeoutMs = 600_000;
/** a test.ping's returns from every connected minion, ms */
const pingTimeoutMs = 120_000;
/** after the ping, before the reading (the returns' writes, the collector's pace), ms */
const settleMs = 3_000;
const startInFlightPerProc = 8;
/** how long the fleet stays connected and idle before each reading, s (BRINE_BENCH_MEMPY_QUIET_S) */
const quietS = Number(process.env.BRINE_BENCH_MEMPY_QUIET_S ?? 20);
const procs = 2;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The pids of `root` and every process under it (by /proc/<pid>/stat's parent). */
function processTree(root: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // the fields after the command, which is in parentheses and may hold spaces
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      parent.set(Number(name), Number(rest[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const todo = [root];
  while (todo.length > 0) {
    const p = todo.pop()!;
    out.push(p);
    for (const [child, pp] of parent) if (pp === p) todo.push(child);
  }
  return out;
}

/** PSS and RSS of the tree under `root`, KiB (smaps_rollup), and how many processes. */
function treeMemory(root: number): { pssKb: number; rssKb: number; processes: number } {
  let pssKb = 0;
  let rssKb = 0;
  let processes = 0;
  for (const pid of processTree(root)) {
    let text: string;
    try {
      text = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
    } catch {
      continue;
    }
    processes++;
    pssKb += Number(/^Pss:\s+(\d+) kB/m.exec(text)?.[1] ?? 0);
    rssKb += Number(/^Rss:\s+(\d+) kB/m.exec(text)?.[1] ?? 0);
  }
  return { pssKb, rssKb, processes };
}

interface Reading {
  connected: number;
  /** returns of the test.ping before the reading */
  returned: number;
  pssKb: number;
  rssKb: number;
  processes: number;
}

interface Measured {
  name: string;
  readings: Reading[];
  /** KiB of PSS per minion between the two readings */
  perMinionKb: number;
  signInS: number[];
}

/**
 * brine's master with node --expose-gc: before each reading `brine.memory gc=True` has every thread collect its
 * garbage (as fleet-memory reads it), so that a reading is live memory and not how far the collector lags after a
 * sign-in storm (without it, brine's PSS read 240 MiB with 300 minions and 170 MiB with 900, the first reading
 * seconds after the storm). Python's master has no such call; the quiet period before each reading is the same.
 */
async function startBrineForMemory(cpus: string | undefined): Promise<Target & { beforeReading: () => Promise<void> }> {
  const saved = process.env.BRINE_BENCH_MASTER_NODE_ARGS;
  process.env.BRINE_BENCH_MASTER_NODE_ARGS = `${saved ?? ""} --expose-gc`;
  const m = await startBrineMaster({ id: "bench-memory-vs-python" }, { cpus }).finally(() => {
    if (saved === undefined) delete process.env.BRINE_BENCH_MASTER_NODE_ARGS;
    else process.env.BRINE_BENCH_MASTER_NODE_ARGS = saved;
  });
  return {
    name: "brine",
    pid: m.pid,
    retPort: m.retPort,
    rootKeyFile: m.rootKeyFile,
    stop: () => m.stop(),
    beforeReading: async () => {
      const r = await controlCall(m.sockDir, { op: "run", fun: "brine.memory", arg: [], kwarg: { gc: true } });
      if (r.type !== "return") throw new Error(`brine.memory: ${JSON.stringify(r).slice(0, 300)}`);
      await sleep(3000); // the call's runner thread gone, as fleet-memory waits
    },
  };
}

async function measure(t: Target & { beforeReading?: () => Promise<void> }, first: number, more: number): Promise<Measured> {
  const { key, user } = readRootKey(t.rootKeyFile);
  const pc = new PublishClient({ host: "127.0.0.1", port: t.retPort, key, user, timeoutMs: 30_000, tries: 1 });
  const fleets: Fleet[] = [];
  const readings: Reading[] = [];
  const signInS: number[] = [];
  try {
    for (const [prefix, n] of [["mempy-a-", first], ["mempy-b-", more]] as const) {
      const fleet = new Fleet({ settings: poolMinionSettings(t.retPort, prefix, n, startTimeoutMs), minions: n, procs });
      fleets.push(fleet);
      await fleet.init();
      const at = performance.now();
      fleet.startPaced(startInFlightPerProc);
      await fleet.collector.waitFor(() => fleet.collector.settledCount() >= n, startTimeoutMs);
      signInS.push((performance.now() - at) / 1000);
      const up = fleet.collector.upIndices().length;
      if (up < n) throw new Error(`${t.name}: only ${up} of ${n} ${prefix}* minions started (${fleet.collector.errorCount} errors)`);
      // every connected minion answers a test.ping: each has done what a minion in use does once
      const jobAt = Date.now();
      const reply = await pc.publish({ tgt: "mempy-*", tgt_type: "glob", fun: "test.ping", arg: [] });
      const jobs = fleets.map((f) => f.collector.addJob(reply.jid, "test.ping", jobAt, f.collector.upIndices()));
      const answered = () => jobs.every((j, i) => j.returned.size >= fleets[i]!.collector.upIndices().length);
      for (const f of fleets) await f.collector.waitFor(answered, pingTimeoutMs);
      const connected = fleets.reduce((s, f) => s + f.collector.upIndices().length, 0);
      const returned = jobs.reduce((s, j) => s + j.returned.size, 0);
      // a master that lost a few returns is still measured (they are counted in the notes); one that lost many is not
      if (returned < 0.9 * connected) throw new Error(`${t.name}: the test.ping to ${connected} minions got ${returned} returns within ${pingTimeoutMs / 1000} s`);
      await sleep(settleMs + quietS * 1000);
      await t.beforeReading?.();
      readings.push({ connected, returned, ...treeMemory(t.pid) });
      console.error(`memory-vs-python ${t.name}: ${connected} connected, ${returned} answered the ping, PSS ${(readings.at(-1)!.pssKb / 1024).toFixed(1)} MiB (load ${os.loadavg()[0]!.toFixed(1)})`);
    }
  } finally {
    pc.close();
    for (const f of fleets) await f.shutdown();
  }
  const [a, b] = readings as [Reading, Reading];
  return { name: t.name, readings, perMinionKb: (b.pssKb - a.pssKb) / (b.connected - a.connected), signInS };
}

function sizes(opts: BenchOptions): [number, number] {
  const v = process.env.BRINE_BENCH_MEMPY_SIZES;
  if (v === undefined) return opts.full ? [1000, 2000] : [300, 600];
  const [first, more] = v.split(",").map(Number);
  if (!Number.isInteger(first) || !Number.isInteger(more) || first! < 1 || more! < 1 || first! + more! > 20_000) {
    throw new Error(`BRINE_BENCH_MEMPY_SIZES: two whole numbers "first,more", at least 1 each and 20,000 together, not ${JSON.stringify(v)}`);
  }
  return [first!, more!];
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const [first, more] = sizes(opts);
  await ensureKeyPool(poolKeySlots, { dir: DEFAULT_KEY_POOL_DIR });
  const { master: masterCpus, swarm: swarmCpus, all } = masterAndSwarmCpus();
  if (swarmCpus) pin(process.pid, swarmCpus);
  const load0 = os.loadavg()[0]!.toFixed(1);
  const results: Measured[] = [];
  const pythonSkip = pythonAvailable();
  try {
    const brine = await startBrineForMemory(masterCpus);
    try {
      results.push(await measure(brine, first, more));
    } finally {
      await brine.stop();
    }
    if (!pythonSkip) {
      const py = await startPythonMaster(masterCpus);
      try {
        results.push(await measure(py, first, more));
      } finally {
        await py.stop();
      }
    }
  } finally {
    if (swarmCpus) pin(process.pid, all);
  }
  const [br, py] = results as [Measured, Measured | undefined];
  const mb = (kb: number) => `${(kb / 1024).toFixed(1)} MiB`;
  const told = (m: Measured) =>
    `${m.readings.map((r) => `${r.connected} connected (${r.returned} answered the ping): PSS ${mb(r.pssKb)}, RSS ${mb(r.rssKb)} (${r.processes} process${r.processes === 1 ? "" : "es"})`).join("; ")}; sign-ins ${m.signInS.map((s) => `${s.toFixed(1)} s`).join(" + ")}`;
  const where = `${masterCpus ? `master on CPU ${masterCpus}, swarm on CPU ${swarmCpus}` : "not pinned"}, load ${load0}→${os.loadavg()[0]!.toFixed(1)}`;
  const rows: BenchRow[] = [
    {
      figure: `memory vs Python: brine PSS per connected minion (${first} → ${first + more})`,
      value: Math.round(br.perMinionKb * 10) / 10,
      unit: "KiB",
      target: 32,
      better: "lower",
      note: `${told(br)}; ${py ? `Python ${py.perMinionKb.toFixed(1)} KiB, brine/Python ${(br.perMinionKb / py.perMinionKb).toFixed(3)}` : `Python skipped: ${pythonSkip}`}; ${where}`,
    },
  ];
  if (py) rows.push({ figure: `memory vs Python: Python 3007 PSS per connected minion (${first} → ${first + more})`, value: Math.round(py.perMinionKb * 10) / 10, unit: "KiB", note: `${told(py)}; worker_threads 5` });
  return rows;
}
