/**
 * CPU per operation against the Python master (issue 17): the SAME brine-swarm run against a brine master and
 * against Python's salt-master 3007 (from Salt's source, `SALT_GIT_DIR`; without it the Python side is
 * skipped and said so), one after the other in one bench run, and the master's CPU per operation from /proc
 * (utime + stime of every thread of brine's process; of every process of Python's master tree):
 *
 * The minions start 8 at a time per swarm process (a storm paced by the master's answers: 1,000 at once kept
 * Python's master busy with retries for minutes). Then, per phase:
 * - auth: every minion signs in again (`_auth` only: a returning minion with a pinned master key), 4 in
 *   flight per swarm process so neither master is flooded into retries, twice;
 * - publish: `test.ping` to every minion, the minions holding their returns (so the phase is the publish and
 *   its delivery only), per publish and per targeted minion; and the same to one minion (a publish's fixed
 *   cost);
 * - durable return: the minions then send the returns they held (a real return for a real job, as they would
 *   have gone), 32 minions in flight per swarm process; brine acknowledges a return once it is in fsync'd
 *   LMDB, Python once its local_cache file is written.
 *
 * CPU sets: with 2+ CPUs and `taskset`, the master runs on CPU 0 and this process and its swarm workers on
 * CPU 1 (BRINE_BENCH_MASTER_CPUS / BRINE_BENCH_SWARM_CPUS to change), so the swarm does not take the
 * master's core; the swarm's own CPU per operation is printed too. Each phase's master CPU has the master's
 * idle rate (measured over 5 s before the phases, the same way) times the phase's length taken off.
 * The RSA bound of a sign-in (one OAEP-SHA1 private decrypt + one PKCS#1 v1.5 SHA-1 sign with the master's
 * 2048-bit key + one OAEP-SHA1 encrypt to a minion's key) is measured in this process's CPU time on the master's
 * CPU (this process moved there for it), just before and just after the sign-in phase: on a shared box the same
 * RSA work costs more CPU time on a busier core. Before the phases, untimed: one round of sign-ins and two jobs with their
 * returns (a master that has run a while: JIT-compiled, caches warm). Sizes: 200 minions, 10 jobs (`--full`:
 * 1,000 minions).
 */
import { spawnSync } from "node:child_process";
import { constants, generateKeyPairSync, privateDecrypt, publicEncrypt, sign } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { benchTransports, poolKeySlots, poolMinionSettings, startBrineMaster } from "./swarm.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { Fleet } from "../tools/swarm/fleet.js";
import type { JobTrack } from "../tools/swarm/collector.js";
import { PublishClient, readRootKey } from "../tools/swarm/publish-client.js";
import { cpuSecondsOf, sampleTree } from "../tools/swarm/proc-stats.js";
import { threadCpuByName } from "./thread-cpu.js";
import { DEFAULT_KEY_POOL_DIR, ensureKeyPool } from "../src/lib/minion/keys.js";
import { freePort } from "../tools/free-port.js";

const signInTimeoutMs = 600_000;
const phaseTimeoutMs = 300_000;
/** how long after a phase's last acknowledgement its trailing work (events, fsync) is still counted, ms */
const settleMs = 1_000;
const idleWindowMs = 5_000;
const authInFlightPerProc = 4;
const startInFlightPerProc = 8;
const returnsInFlightPerProc = 32;
const procs = 2;
/** measured rounds of sign-ins (every minion once a round) and untimed jobs before the phases */
const authRounds = 2;
/**
 * BRINE_BENCH_CPO_AUTH_ROUNDS: measured sign-in rounds (default authRounds). Two rounds of 200 measure a master whose
 * per-request code V8 has not yet optimized (most of it still runs as baseline code: bench/RESULTS.md, session 11);
 * ten measure one nearer its steady state.
 */
function authRoundsToRun(): number {
  const v = process.env.BRINE_BENCH_CPO_AUTH_ROUNDS;
  if (v === undefined) return authRounds;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1 || n > 100) throw new Error(`BRINE_BENCH_CPO_AUTH_ROUNDS: a whole number of rounds from 1 to 100, not ${JSON.stringify(v)}`);
  return n;
}
const warmJobs = 2;
/** sign-ins' worth of RSA work per measure of the bound */
const boundRounds = 150;
/** the same, measured before each sign-in round */
const boundRoundsEach = 60;
export const HARNESS = fileURLToPath(new URL("../../../shared/real-salt", import.meta.url));

export interface Target {
  name: string;
  pid: number;
  retPort: number;
  /** the publish port (Python's: set; brine's here: not needed by cpu-per-op) */
  publishPort?: number;
  rootKeyFile: string;
  /** every thread of the process (brine) or the whole process tree (Python) */
  stop(): Promise<void>;
}

interface PhaseCpu {
  masterS: number;
  swarmS: number;
  wallS: number;
}

interface Figures {
  name: string;
  idleCpuPerS: number;
  start: PhaseCpu & { minions: number };
  /** rsaBoundS: the RSA work of one sign-in on the master's CPUs, measured just before and after the phase */
  /** roundsUs: each round's master CPU per sign-in, µs (the phase's trailing settle not counted) */
  auth: PhaseCpu & { accepted: number; attempts: number; rsaBoundS: number; roundsUs: number[]; roundBoundsUs: number[] };
  publishAll: PhaseCpu & { publishes: number; delivered: number };
  publishOne: PhaseCpu & { publishes: number; delivered: number };
  returns: PhaseCpu & { returns: number };
  errors: number;
  errorKinds: string;
  /** brine only: the share of the phases' CPU on the main thread */
  mainThreadShare?: number;
  /** brine only: per phase, the threads that used its CPU (by thread name) */
  threads?: Record<string, string>;
  /** swarm errors counted in each phase */
  phaseErrors: Record<string, number>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const us = (s: number, n: number) => (n > 0 ? (s / n) * 1e6 : NaN);
/** The mean of the last half of `xs` (at least one value). */
export const median = (xs: number[]) => {
  const a = [...xs].sort((x, y) => x - y);
  return a.length % 2 ? a[a.length >> 1]! : (a[a.length / 2 - 1]! + a[a.length / 2]!) / 2;
};
const lastHalfMean = (xs: number[]) => {
  const tail = xs.slice(Math.floor(xs.length / 2));
  return tail.reduce((s, x) => s + x, 0) / tail.length;
};

function canPin(): boolean {
  return os.cpus().length >= 2 && spawnSync("taskset", ["-V"], { stdio: "ignore" }).status === 0;
}

/**
 * The CPUs the master and the swarm run on (BRINE_BENCH_MASTER_CPUS, default 0; BRINE_BENCH_SWARM_CPUS, default 1),
 * neither where the box cannot pin; `all` to give this process back every CPU.
 */
export function masterAndSwarmCpus(): { master?: string; swarm?: string; all: string } {
  const all = `0-${os.cpus().length - 1}`;
  if (!canPin()) return { all };
  return { master: process.env.BRINE_BENCH_MASTER_CPUS ?? "0", swarm: process.env.BRINE_BENCH_SWARM_CPUS ?? "1", all };
}

/** Pin every thread of `pid` to `cpus` (taskset -a -p -c). */
export function pin(pid: number, cpus: string): void {
  const r = spawnSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { stdio: "ignore" });
  if (r.status !== 0) throw new Error(`taskset could not pin ${pid} to CPUs ${cpus}`);
}

/** CPU seconds of the RSA work of one sign-in, per sign-in, in this thread's CPU time. */
function rsaBoundS(rounds: number): number {
  const master = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const minion = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const oaep = { padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: "sha1" };
  const token = publicEncrypt({ key: master.publicKey, ...oaep }, Buffer.alloc(32, 7));
  const aes = Buffer.alloc(76, 3);
  const once = () => {
    privateDecrypt({ key: master.privateKey, ...oaep }, token);
    sign("sha1", aes, master.privateKey);
    publicEncrypt({ key: minion.publicKey, ...oaep }, aes);
  };
  for (let i = 0; i < 20; i++) once();
  const u0 = process.cpuUsage();
  for (let i = 0; i < rounds; i++) once();
  const u = process.cpuUsage(u0);
  return (u.user + u.system) / 1e6 / rounds;
}

export function startPythonMaster(cpus: string | undefined, seed?: (pkiDir: string) => void): Promise<Target> {
  return (async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "cpo-py-"));
    // seed: files the master finds in its pki directory when it starts (the harness keeps what is there)
    if (seed) {
      mkdirSync(path.join(dir, "master", "pki", "master"), { recursive: true });
      seed(path.join(dir, "master", "pki", "master"));
    }
    const pub = await freePort();
    const ret = await freePort();
    const env = { ...process.env, SALT_LOG_LEVEL: "warning", SALT_WORKER_THREADS: "5", SALT_WAIT: "120" };
    const cmd = path.join(HARNESS, "start-master.sh");
    const args = ["--dir", dir, String(pub), String(ret)];
    const r = cpus ? spawnSync("taskset", ["-c", cpus, cmd, ...args], { env, encoding: "utf8" }) : spawnSync(cmd, args, { env, encoding: "utf8" });
    if (r.status !== 0) throw new Error(`the Python master did not start: ${(r.stderr || r.stdout).trim().slice(-400)}`);
    const pid = Number(readFileSync(path.join(dir, "master", "run", "launcher.pid"), "utf8").trim());
    const cache = path.join(dir, "master", "cache");
    const deadline = Date.now() + 60_000;
    let key: string | undefined;
    while (!(key = readdirSync(cache).find((n) => /^\..+_key$/.test(n))) && Date.now() < deadline) await sleep(200);
    if (!key) throw new Error("the Python master wrote no root key within 60 s");
    return {
      name: "Python 3007",
      pid,
      retPort: ret,
      publishPort: pub,
      rootKeyFile: path.join(cache, key),
      stop: async () => {
        spawnSync(path.join(HARNESS, "stop-all.sh"), ["--dir", dir], { stdio: "ignore", env: { ...process.env, SALT_STOP_WAIT: "10" } });
        rmSync(dir, { recursive: true, force: true });
      },
    };
  })();
}

async function startBrine(cpus: string | undefined): Promise<Target> {
  const m = await startBrineMaster({}, { cpus });
  return { name: "brine", pid: m.pid, retPort: m.retPort, rootKeyFile: m.rootKeyFile, stop: () => m.stop() };
}

export function pythonAvailable(): string | undefined {
  if (!process.env.SALT_GIT_DIR) return "SALT_GIT_DIR is not set";
  if (!existsSync(path.join(HARNESS, "check.sh"))) return `no real-salt harness at ${HARNESS}`;
  const r = spawnSync(path.join(HARNESS, "check.sh"), ["3007.x"], { stdio: "ignore" });
  return r.status === 0 ? undefined : "the real-salt harness's check.sh failed";
}

/** CPU seconds of the brine master's main thread (tid = pid). */
function mainThreadS(pid: number): number {
  return cpuSecondsOf(`/proc/${pid}/task/${pid}/stat`) ?? 0;
}

/** "name 12 %, …" of the CPU between two per-thread samples, the largest first. */
function threadShares(a: Map<string, number>, b: Map<string, number>): string {
  const d = [...b].map(([k, v]) => [k, v - (a.get(k) ?? 0)] as const).filter(([, v]) => v > 0);
  const total = d.reduce((s, [, v]) => s + v, 0);
  return d
    .sort((x, y) => y[1] - x[1])
    .slice(0, 5)
    .map(([k, v]) => `${k} ${Math.round((100 * v) / total)} %`)
    .join(", ");
}

/** The RSA bound on the master's CPUs (this process moved there for the measure, then back), or where it runs. */
export function boundOnMasterCpus(cpus: { master?: string; swarm?: string }, rounds: number): number {
  if (cpus.master) pin(process.pid, cpus.master);
  try {
    return rsaBoundS(rounds);
  } finally {
    if (cpus.swarm) pin(process.pid, cpus.swarm);
  }
}

async function measure(t: Target, n: number, jobs: number, cpus: { master?: string; swarm?: string }): Promise<Figures> {
  const fleet = new Fleet({ settings: poolMinionSettings(t.retPort, "cpo-", n, signInTimeoutMs), minions: n, procs });
  const col = fleet.collector;
  const swarmPids = () => [...new Set([process.pid, ...fleet.pids()])];
  const snap = () => ({
    at: performance.now(),
    mono: process.hrtime.bigint() / 1000n,
    master: sampleTree(t.pid)?.cpuS ?? NaN,
    main: t.name === "brine" ? mainThreadS(t.pid) : 0,
    swarm: swarmPids().reduce((s, p) => s + (cpuSecondsOf(`/proc/${p}/stat`) ?? 0), 0),
    threads: t.name === "brine" ? threadCpuByName(t.pid) : new Map<string, number>(),
    errors: col.errorCount,
  });
  const threads: Record<string, string> = {};
  const phaseErrors: Record<string, number> = {};
  const note = (phase: string, a: Snap, b: Snap) => {
    // BRINE_BENCH_CPO_TRACE: each phase's window on the monotonic clock (µs), as a --cpu-prof profile counts time
    if (process.env.BRINE_BENCH_CPO_TRACE) console.error(`cpu-per-op phase ${t.name} ${phase} ${a.mono} ${b.mono}`);
    if (t.name === "brine") threads[phase] = threadShares(a.threads, b.threads);
    phaseErrors[phase] = b.errors - a.errors;
  };
  type Snap = ReturnType<typeof snap>;
  let idle = 0;
  let mainS = 0;
  let phasesS = 0;
  const cpu = (a: Snap, b: Snap, countMain = true): PhaseCpu => {
    const wallS = (b.at - a.at) / 1000;
    const masterS = Math.max(0, b.master - a.master - idle * wallS);
    if (countMain) {
      mainS += b.main - a.main;
      phasesS += b.master - a.master;
    }
    return { masterS, swarmS: b.swarm - a.swarm, wallS };
  };
  const accepted = () => col.authResults.get("accepted") ?? 0;
  const attempts = () => [...col.authResults.values()].reduce((s, v) => s + v, 0);
  const returned = (js: JobTrack[]) => js.reduce((s, j) => s + j.returned.size + j.extra.size, 0);
  const { key, user } = readRootKey(t.rootKeyFile);
  const pc = new PublishClient({ host: "127.0.0.1", port: t.retPort, key, user, timeoutMs: 30_000, tries: 1 });
  const ids = (i: number) => `cpo-${String(i).padStart(Math.max(5, String(n - 1).length), "0")}`;
  const publish = async (tgt: string, tgtType: string, expected: number[]): Promise<JobTrack> => {
    const at = Date.now();
    const reply = await pc.publish({ tgt, tgt_type: tgtType, fun: "test.ping", arg: [] });
    return col.addJob(reply.jid, "test.ping", at, expected);
  };
  try {
    await fleet.init();
    // the minions start (sign-in, SUB connect, _pillar, two events), 8 at a time per swarm process: a storm
    // paced by the master's answers (an unpaced one of 1,000 left Python's master with 79 started after 8 min)
    let a = snap();
    fleet.startPaced(startInFlightPerProc);
    await col.waitFor(() => col.settledCount() >= n, signInTimeoutMs);
    let b = snap();
    const up = col.upIndices();
    if (up.length < n) throw new Error(`${t.name}: only ${up.length} of ${n} minions started (${col.errorCount} errors: ${[...col.errorKinds].map(([k, v]) => `${k} ${v}`).join(", ")})`);
    const start = { ...cpu(a, b, false), minions: n };
    note("start", a, b);
    await sleep(2_000);
    // the master's idle rate
    a = snap();
    await sleep(idleWindowMs);
    b = snap();
    idle = (b.master - a.master) / ((b.at - a.at) / 1000);
    start.masterS = Math.max(0, start.masterS - idle * start.wallS);

    // warm-up, not counted: a round of sign-ins and two jobs with their returns (JIT, caches: a master that ran a while)
    await fleet.reauthAll(authInFlightPerProc);
    for (let j = 0; j < warmJobs; j++) {
      const job = await publish("cpo-*", "glob", up);
      await col.waitFor(() => job.returned.size + job.failed.size >= up.length, phaseTimeoutMs);
    }
    await sleep(settleMs);

    // auth: every minion signs in again, authRounds times (BRINE_BENCH_CPO_AUTH_ROUNDS)
    const acc0 = accepted();
    const att0 = attempts();
    const boundBefore = boundOnMasterCpus(cpus, boundRounds);
    a = snap();
    // each round's own CPU per sign-in too (idle taken off the same way): the first rounds pay V8's tier-up of the
    // request path (bench/RESULTS.md, session 12), the last ones come nearer a master that has run a while
    // and the bound again before each round, so that each round has a ratio of its own to a bound measured
    // seconds from it (on this shared box a bound taken minutes away differed from it by a fifth: session 17);
    // that measure's time (on the master's CPU, the master idle) is left out of the round
    const roundsUs: number[] = [];
    const roundBoundsUs: number[] = [];
    for (let r = 0, rounds = authRoundsToRun(); r < rounds; r++) {
      roundBoundsUs.push(boundOnMasterCpus(cpus, boundRoundsEach) * 1e6);
      const ra = snap();
      const acc = accepted();
      await fleet.reauthAll(authInFlightPerProc);
      const rb = snap();
      roundsUs.push(us(Math.max(0, rb.master - ra.master - idle * ((rb.at - ra.at) / 1000)), accepted() - acc));
    }
    await sleep(settleMs);
    b = snap();
    const auth = { ...cpu(a, b), accepted: accepted() - acc0, attempts: attempts() - att0, rsaBoundS: (boundBefore + boundOnMasterCpus(cpus, boundRounds)) / 2, roundsUs, roundBoundsUs };
    note("auth", a, b);

    // publishes, returns held: to every minion, then to one minion
    fleet.holdReturns(true);
    await sleep(500);
    const all: JobTrack[] = [];
    a = snap();
    for (let j = 0; j < jobs; j++) {
      const job = await publish("cpo-*", "glob", up);
      all.push(job);
      await col.waitFor(() => job.received.size >= up.length, phaseTimeoutMs);
    }
    await sleep(settleMs);
    b = snap();
    const publishAll = { ...cpu(a, b), publishes: jobs, delivered: all.reduce((s, j) => s + j.received.size, 0) };
    note("publish", a, b);
    const one: JobTrack[] = [];
    a = snap();
    for (let j = 0; j < jobs; j++) {
      const job = await publish(ids(up[0]!), "list", [up[0]!]);
      one.push(job);
      await col.waitFor(() => job.received.size >= 1, phaseTimeoutMs);
    }
    await sleep(settleMs);
    b = snap();
    const publishOne = { ...cpu(a, b), publishes: jobs, delivered: one.reduce((s, j) => s + j.received.size, 0) };
    note("publish-one", a, b);

    // durable returns: the held ones
    fleet.holdReturns(false);
    await sleep(500);
    const jobsAll = [...all, ...one];
    const expectedReturns = jobsAll.reduce((s, j) => s + j.received.size, 0);
    const r0 = returned(jobsAll);
    a = snap();
    await fleet.sendHeldReturns(returnsInFlightPerProc);
    await col.waitFor(() => returned(jobsAll) >= expectedReturns, phaseTimeoutMs);
    await sleep(settleMs);
    b = snap();
    const returns = { ...cpu(a, b), returns: returned(jobsAll) - r0 };
    note("returns", a, b);
    return {
      name: t.name,
      idleCpuPerS: idle,
      start,
      auth,
      publishAll,
      publishOne,
      returns,
      errors: col.errorCount,
      errorKinds: [...col.errorKinds].map(([k, v]) => `${k} ${v}`).join(", "),
      mainThreadShare: t.name === "brine" && phasesS > 0 ? mainS / phasesS : undefined,
      ...(t.name === "brine" ? { threads } : {}),
      phaseErrors,
    };
  } finally {
    pc.close();
    await fleet.shutdown();
  }
}

/** One master's figures on stderr as soon as they are measured (a later failure or timeout keeps them). */
function printPartial(f: Figures): void {
  const r = (x: number) => Math.round(x);
  console.error(
    `cpu-per-op ${f.name}: auth ${r(us(f.auth.masterS, f.auth.accepted))} µs (RSA bound ${r(f.auth.rsaBoundS * 1e6)}), return ${r(us(f.returns.masterS, f.returns.returns))} µs, ` +
      `publish to all ${r(us(f.publishAll.masterS, f.publishAll.publishes))} µs (${r(us(f.publishAll.masterS, f.publishAll.delivered))} per minion), to one ${r(us(f.publishOne.masterS, f.publishOne.publishes))} µs, ` +
      `start ${r(us(f.start.masterS, f.start.minions))} µs; auth by round ${f.auth.roundsUs.map(r).join(" ")} µs; idle ${(f.idleCpuPerS * 1000).toFixed(1)} ms/s; errors ${JSON.stringify(f.phaseErrors)}; load ${os.loadavg()[0]!.toFixed(1)}`,
  );
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const n = opts.full ? 1000 : 200;
  const jobs = 10;
  await ensureKeyPool(poolKeySlots, { dir: DEFAULT_KEY_POOL_DIR });
  const { master: masterCpus, swarm: swarmCpus, all: allCpus } = masterAndSwarmCpus();
  if (swarmCpus) pin(process.pid, swarmCpus);
  const cpuNote = masterCpus ? `master on CPU ${masterCpus}, swarm + bench on CPU ${swarmCpus} (taskset)` : "NOT pinned (one CPU or no taskset): master and swarm share the CPUs";
  const load0 = os.loadavg()[0]!.toFixed(1);
  const results: Figures[] = [];
  const cpus = { master: masterCpus, swarm: swarmCpus };
  let pythonSkip: string | undefined;
  try {
    const brine = await startBrine(masterCpus);
    try {
      results.push(await measure(brine, n, jobs, cpus));
      printPartial(results.at(-1)!);
    } finally {
      await brine.stop();
    }
    pythonSkip = process.env.BRINE_BENCH_CPO_BRINE_ONLY ? "BRINE_BENCH_CPO_BRINE_ONLY is set" : pythonAvailable();
    if (!pythonSkip) {
      const py = await startPythonMaster(masterCpus);
      try {
        results.push(await measure(py, n, jobs, cpus));
        printPartial(results.at(-1)!);
      } finally {
        await py.stop();
      }
    }
  } finally {
    if (swarmCpus) pin(process.pid, allCpus);
  }
  const bound = results[0]!.auth.rsaBoundS;
  const load1 = os.loadavg()[0]!.toFixed(1);
  const [br, py] = results as [Figures, Figures | undefined];
  const rows: BenchRow[] = [];
  const per = (f: Figures) => ({
    auth: us(f.auth.masterS, f.auth.accepted),
    publish: us(f.publishAll.masterS, f.publishAll.publishes),
    perTarget: us(f.publishAll.masterS, f.publishAll.delivered),
    publishOne: us(f.publishOne.masterS, f.publishOne.publishes),
    // what one more targeted minion adds to a publish: (to all − to one) per further minion
    marginal: us(f.publishAll.masterS / f.publishAll.publishes - f.publishOne.masterS / f.publishOne.publishes, f.publishAll.delivered / f.publishAll.publishes - 1),
    ret: us(f.returns.masterS, f.returns.returns),
    start: us(f.start.masterS, f.start.minions),
  });
  const b = per(br);
  const p = py ? per(py) : undefined;
  const vs = (mine: number, theirs: number | undefined) => (theirs === undefined ? (pythonSkip ? `Python skipped: ${pythonSkip}` : "") : `Python ${Math.round(theirs)} µs, brine/Python ${(mine / theirs).toFixed(3)}`);
  const swarmUs = (f: Figures) => `swarm ${Math.round(us(f.returns.swarmS, f.returns.returns))} µs/return, ${Math.round(us(f.auth.swarmS, f.auth.accepted))} µs/auth`;
  const head = `${n} minions, ${jobs} jobs, brine_minion_transport ${benchTransports()[0]}, ${cpuNote}, load ${load0}→${load1}`;
  rows.push({ figure: "cpu/op: brine master CPU per auth (re-sign-in)", value: b.auth, unit: "µs", target: bound * 1.25e6, better: "lower", note: `RSA bound ${Math.round(bound * 1e6)} µs on the master's CPU (goal 1.25×, ratio ${(b.auth / (bound * 1e6)).toFixed(2)}); ${br.auth.accepted} accepted of ${br.auth.attempts} attempts; ${vs(b.auth, p?.auth)}` });
  const tail = lastHalfMean(br.auth.roundsUs);
  rows.push({ figure: "cpu/op: brine master CPU per auth, last half of the rounds", value: tail, unit: "µs", target: bound * 1.25e6, better: "lower", note: `ratio ${(tail / (bound * 1e6)).toFixed(2)} to the RSA bound; by round ${br.auth.roundsUs.map((x) => Math.round(x)).join(" ")} µs${py ? `; Python's by round ${py.auth.roundsUs.map((x) => Math.round(x)).join(" ")} µs` : ""}` });
  const roundRatios = br.auth.roundsUs.map((u, i) => u / br.auth.roundBoundsUs[i]!);
  rows.push({ figure: "cpu/op: brine sign-in / RSA bound, round by round", value: Math.round(median(roundRatios) * 100) / 100, unit: "×", target: 1.25, better: "lower", note: `median of the rounds, each over the bound measured just before it: ${roundRatios.map((x) => x.toFixed(2)).join(" ")} (bounds ${br.auth.roundBoundsUs.map((x) => Math.round(x)).join(" ")} µs); bench signin-floor gives the design's floor the same way` });
  rows.push({ figure: "cpu/op: brine master CPU per durable return", value: b.ret, unit: "µs", target: p ? p.ret / 10 : undefined, better: "lower", note: `${br.returns.returns} returns; goal ≤ 1/10 of Python's; ${vs(b.ret, p?.ret)}` });
  rows.push({ figure: "cpu/op: brine master CPU per publish to all", value: b.publish, unit: "µs", better: "lower", note: `${br.publishAll.delivered} deliveries; ${vs(b.publish, p?.publish)}` });
  rows.push({ figure: "cpu/op: brine master CPU per targeted minion", value: b.perTarget, unit: "µs", better: "lower", note: `the publish to all over its minions; ${vs(b.perTarget, p?.perTarget)}` });
  rows.push({ figure: "cpu/op: brine master CPU per further targeted minion", value: b.marginal, unit: "µs", better: "lower", note: `(to all − to one) per further minion; ${vs(b.marginal, p?.marginal)}` });
  rows.push({ figure: "cpu/op: brine master CPU per publish to one minion", value: b.publishOne, unit: "µs", better: "lower", note: vs(b.publishOne, p?.publishOne) });
  rows.push({ figure: "cpu/op: brine master CPU per minion start (auth, SUB, _pillar, 2 events)", value: b.start, unit: "µs", better: "lower", note: vs(b.start, p?.start) });
  rows.push({ figure: "cpu/op: brine master idle CPU (subtracted)", value: br.idleCpuPerS * 1000, unit: "ms/s", note: `${py ? `Python ${(py.idleCpuPerS * 1000).toFixed(1)} ms/s; ` : ""}main thread ${(100 * (br.mainThreadShare ?? 0)).toFixed(0)} % of brine's phase CPU; ${swarmUs(br)}${py ? `; Python run: ${swarmUs(py)}` : ""}` });
  const perPhase = (f: Figures) => Object.entries(f.phaseErrors).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${v}`).join(", ") || "none";
  rows.push({ figure: "cpu/op: run", value: br.errors + (py?.errors ?? 0), unit: "errors", note: `${head}; brine errors by phase: ${perPhase(br)}${br.errors ? ` (${br.errorKinds})` : ""}${py ? `; Python errors by phase: ${perPhase(py)}${py.errors ? ` (${py.errorKinds})` : ""}` : ""}` });
  for (const [phase, shares] of Object.entries(br.threads ?? {})) rows.push({ figure: `cpu/op: brine threads, ${phase} phase`, value: NaN, unit: "", note: shares });
  if (p && py) {
    rows.push({ figure: "cpu/op: Python master CPU per auth", value: p.auth, unit: "µs", note: `${py.auth.accepted} accepted of ${py.auth.attempts} attempts; RSA bound ${Math.round(py.auth.rsaBoundS * 1e6)} µs in its run` });
    rows.push({ figure: "cpu/op: Python master CPU per durable return", value: p.ret, unit: "µs", note: `${py.returns.returns} returns (local_cache files, not fsync'd)` });
    rows.push({ figure: "cpu/op: Python master CPU per publish to all", value: p.publish, unit: "µs", note: `${py.publishAll.delivered} deliveries` });
  }
  return rows;
}
