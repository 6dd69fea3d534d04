/**
 * The keep_jobs prune of bench/job-cache-scale.ts, run where the master runs it: in a worker thread, as a request
 * worker of the request lane runs its `cleanup` task (src/workers/req-handler/worker.ts: `JobCache.prune` on the
 * thread's own JobCache) while the same thread stores durable returns (`_return`, `saveReturn`). This thread's
 * heap holds only its own work; the 1,000,000-return fill was made by the bench's main thread.
 * Each write is timed end to end (issued → durable) and taken apart:
 * - the prune's work inside the return's own turn: the time `reclaimAlong` (the deletes it carries) takes;
 * - this thread's garbage collection during the write (a PerformanceObserver of "gc": this isolate's pauses only);
 * - this thread's wait for a CPU during the write (/proc/thread-self/schedstat, its run-queue time);
 * what is left of a slow write is LMDB's commit and fsync (their own threads) and the disk.
 * The parent asks for one round at a time (ThreadAsk), so rounds of different deletes-per-return alternate on one fill.
 */
import { closeSync, openSync, readFileSync, readlinkSync, readSync, statSync, writeFileSync } from "node:fs";
import { PerformanceObserver } from "node:perf_hooks";
import { parentPort, workerData } from "node:worker_threads";
import path from "node:path";
import { lmdbDir, openStore, type StoreConfig } from "../src/lib/store/lmdb-env.js";
import { JobCache } from "../src/lib/store/job-cache.js";
import { formatJid } from "../src/shared/protocol/jid.js";
import { configureLogging } from "../src/shared/log.js";
import { pingReturn, slowMs } from "./job-cache-prune.js";

export interface PruneThreadData {
  store: StoreConfig;
  /** the fill's "now" (ms since the epoch): the jids written here are of jobs at that time */
  now: number;
}
/**
 * One round: `keepSeconds` is the prune's keep_jobs_seconds at `now`; `reclaimMax` the deletes a return carries;
 * `writer`: "continuous" stores returns one after another (each durable before the next), "trickle" one every
 * trickleMs (so the prune's own passes run between them); `quietMs`: the no-prune window before the prune (and
 * after it for the rest of its length, so both windows are as long).
 */
export interface ThreadAsk {
  keepSeconds: number;
  reclaimMax: number;
  writer: "continuous" | "trickle";
  trickleMs: number;
  quietMs: number;
}
/** A stretch of this thread's time and what was in it, ms. */
export interface Hold {
  ms: number;
  gcMs: number;
  cpuWaitMs: number;
  /** this thread on a CPU (GC included) */
  onCpuMs: number;
  /** page faults of this thread that read the disk (major faults) */
  majorFaults: number;
  /** times this thread went to sleep (voluntary context switches): 0 with ms ≫ onCpuMs + cpuWaitMs is the host's steal */
  sleeps: number;
}
/** A write over slowMs and what its time was spent on, ms. */
export interface SlowWrite {
  ms: number;
  during: boolean;
  /** the prune's deletes issued in its turn */
  reclaimMs: number;
  /** this thread's GC pauses overlapping it */
  gcMs: number;
  /** this thread runnable but waiting for a CPU */
  cpuWaitMs: number;
}
export interface ThreadAnswer {
  /** write latencies with no prune, and during it, ms */
  quiet: number[];
  during: number[];
  pruneMs: number;
  result: { removed: number; passes: number; alongside: number };
  /** the prune's deletes in each return's turn during the prune: sum and largest, µs; returns that carried any */
  reclaimUsSum: number;
  reclaimUsMax: number;
  reclaimCalls: number;
  /** writes during the prune whose return carried deletes, and those of them over slowMs; the same for those that carried none */
  carrying: [number, number];
  plain: [number, number];
  /** the prune's own passes: start to commit, and the part in this thread's event loop (choosing, issuing), ms */
  passMs: number[];
  passHoldMs: number[];
  /** the longest of the prune's turns in this thread (a return's deletes, a pass's issue) and what was in it */
  worstTurn: Hold;
  /** the longest of them less this thread's GC and its wait for a CPU in it: the prune's own hold, ms */
  worstOwnMs: number;
  slow: SlowWrite[];
  /** this thread's GC during the round: pauses and their longest, ms */
  gcCount: number;
  gcMaxMs: number;
  /** this thread's CPU time over the round (schedstat), s */
  cpuS: number;
  /** raw records still older than the cutoff after the prune said done (must be 0) */
  left: number;
  /** data.mdb's size before and after the prune, bytes */
  fileBytes: [number, number];
}

const { store: storeCfg, now } = workerData as PruneThreadData;
configureLogging({ level: "quiet" });
const store = openStore(storeCfg);

const gcs: { start: number; end: number }[] = [];
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) gcs.push({ start: e.startTime, end: e.startTime + e.duration });
}).observe({ entryTypes: ["gc"] });

// opened from this thread, so thread-self is this thread for as long as the descriptor lives
const schedFd = openSync("/proc/thread-self/schedstat", "r");
const schedBuf = Buffer.alloc(128);
const statFd = openSync("/proc/thread-self/stat", "r");
const statBuf = Buffer.alloc(1024);
/** this thread's major page faults so far (/proc/thread-self/stat, the 12th field) */
function majorFaults(): number {
  const n = readSync(statFd, statBuf, 0, statBuf.length, 0);
  const text = statBuf.toString("latin1", 0, n);
  return Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[9]);
}
const dataFile = path.join(lmdbDir(storeCfg), "data.mdb");

const statusFd = openSync("/proc/thread-self/status", "r");
const statusBuf = Buffer.alloc(4096);
/** this thread's voluntary context switches so far (it went to sleep: a lock, a futex, I/O) */
function sleepsSoFar(): number {
  const n = readSync(statusFd, statusBuf, 0, statusBuf.length, 0);
  return Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(statusBuf.toString("latin1", 0, n))?.[1] ?? 0);
}
/** the whole VM's steal time so far (/proc/stat, its vCPUs not run by the host), ms */
function stealMsSoFar(): number {
  const line = readFileSync("/proc/stat", "latin1").slice(0, 200).split("\n")[0]!.trim().split(/\s+/);
  return Number(line[8]) * 10; // USER_HZ ticks
}

/** [ns on a CPU, ns runnable waiting for one] of this thread */
function sched(): [number, number] {
  const n = readSync(schedFd, schedBuf, 0, schedBuf.length, 0);
  const [run, wait] = schedBuf.toString("latin1", 0, n).split(" ");
  return [Number(run), Number(wait)];
}

/**
 * BRINE_BENCH_JOBS_TRACE=<path>: each round writes <path>.<thread id>.<round>.json, this thread's id and the times
 * (CLOCK_MONOTONIC ns, as `perf record -k mono` stamps its events) of the prune's start and end, each write over
 * slowMs [start, ms, during the prune] and each of the prune's turns over turnKeptMs [start, ms]: to find them in a
 * trace of the threads (`perf record -k mono -e sched:sched_switch -g -a`: where this thread waited, and why).
 */
const traced = { tid: Number(readlinkSync("/proc/thread-self").split("/").pop()), prune: [] as number[], slow: [] as number[][], turns: [] as number[][], steal: [] as number[][] };
let traceRound = 0;
/** performance.now() as CLOCK_MONOTONIC ns (performance's time origin is on that clock) */
const monoAt = Number(process.hrtime.bigint()) - performance.now() * 1e6;
const monoNs = (t: number) => Math.round(monoAt + t * 1e6);

/** With BRINE_BENCH_JOBS_TRACE, the VM's steal time is sampled this often, ms. */
const stealSampleMs = 250;
/** BRINE_BENCH_JOBS_INTERLEAVE_MS (see reclaimAlong's wrapper in `round`), ms; 0: off */
const interleaveMs = Number(process.env.BRINE_BENCH_JOBS_INTERLEAVE_MS ?? 0) || 0;

let n = 0;
/** A turn of the prune's shorter than this is not kept for the verdict (it cannot decide it), ms. */
const turnKeptMs = 1;

async function round(ask: ThreadAsk): Promise<ThreadAnswer> {
  for (const xs of [traced.prune, traced.slow, traced.turns, traced.steal]) xs.length = 0;
  // with a trace asked for: the VM's steal time every stealSampleMs [monotonic ns, steal ms so far]
  const stealSampler = process.env.BRINE_BENCH_JOBS_TRACE ? setInterval(() => traced.steal.push([monoNs(performance.now()), stealMsSoFar()]), stealSampleMs) : undefined;
  const jobs = new JobCache(store, undefined, undefined, ask.reclaimMax);
  // the prune's work in each return's turn: JobCache's private reclaimAlong, timed in place
  const inner = jobs as unknown as { reclaimAlong(): void; reclaimAt: unknown };
  const reclaimAlong = inner.reclaimAlong.bind(jobs);
  let lastReclaimUs = 0;
  /** the prune's turns over turnKeptMs, to take their GC out once the observer has reported it */
  const turns: { ms: number; t0: number; t1: number; cpuWaitMs: number; onCpuMs: number; majorFaults: number; sleeps: number }[] = [];
  const turn = <T>(fn: () => T): [T, number] => {
    const f0 = majorFaults();
    const v0 = sleepsSoFar();
    const [c0, w0] = sched();
    const t0 = performance.now();
    const r = fn();
    const t1 = performance.now();
    if (t1 - t0 > turnKeptMs) {
      const [c1, w1] = sched();
      traced.turns.push([monoNs(t0), t1 - t0]);
      turns.push({ ms: t1 - t0, t0, t1, cpuWaitMs: (w1 - w0) / 1e6, onCpuMs: (c1 - c0) / 1e6, majorFaults: majorFaults() - f0, sleeps: sleepsSoFar() - v0 });
    }
    return [r, t1 - t0];
  };
  let lastCarried = false;
  let pruneFrom = 0;
  let firstReclaim = true;
  inner.reclaimAlong = () => {
    const at = inner.reclaimAt;
    // BRINE_BENCH_JOBS_INTERLEAVE_MS: in every other window of that length the returns carry nothing (the first one
    // still stores the cutoff), so the disk's own slow spells fall on carrying and plain returns alike
    if (pruning && interleaveMs > 0 && !firstReclaim && Math.floor((performance.now() - pruneFrom) / interleaveMs) % 2 === 1) return;
    if (pruning) firstReclaim = false;
    lastReclaimUs = turn(reclaimAlong)[1] * 1000;
    // a batch of deletes moves the thread's place in the banks (JobCache.reclaimAt)
    lastCarried = inner.reclaimAt !== at && inner.reclaimAt !== undefined;
  };
  const carrying: [number, number] = [0, 0];
  const plain: [number, number] = [0, 0];
  let pruning = false;
  let reclaimUsSum = 0;
  let reclaimUsMax = 0;
  let reclaimCalls = 0;
  const slow: SlowWrite[] = [];
  const gcFrom = gcs.length;
  const write = async (): Promise<number> => {
    const jid = formatJid(now, 500 + (n % 400));
    const [, w0] = sched();
    const t0 = performance.now();
    lastReclaimUs = 0;
    lastCarried = false;
    const stored = jobs.saveReturn(jid, `late-${n++}`, pingReturn, false);
    const reclaimUs = lastReclaimUs;
    const carried = lastCarried;
    await stored;
    const t1 = performance.now();
    const [, w1] = sched();
    if (pruning) {
      reclaimUsSum += reclaimUs;
      reclaimUsMax = Math.max(reclaimUsMax, reclaimUs);
      reclaimCalls++;
      const kind = carried ? carrying : plain;
      kind[0]++;
      if (t1 - t0 > slowMs) kind[1]++;
    }
    const ms = t1 - t0;
    if (ms > slowMs) traced.slow.push([monoNs(t0), ms, pruning ? 1 : 0]);
    if (ms > slowMs) slow.push({ ms, during: pruning, reclaimMs: reclaimUs / 1000, gcMs: 0, cpuWaitMs: (w1 - w0) / 1e6, t0, t1 } as SlowWrite);
    return ms;
  };
  const writer = async (until: () => boolean): Promise<number[]> => {
    const lat: number[] = [];
    for (let next = performance.now(); !until(); ) {
      lat.push(await write());
      if (ask.writer === "trickle") {
        next += ask.trickleMs;
        const wait = next - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    }
    return lat;
  };
  const passMs: number[] = [];
  const passHoldMs: number[] = [];
  const cleanup = jobs.cleanup.bind(jobs);
  jobs.cleanup = (...a) => {
    const t = performance.now();
    const [p, hold] = turn(() => cleanup(...a));
    passHoldMs.push(hold);
    return p.then((removed) => (passMs.push(performance.now() - t), removed));
  };
  const [cpu0] = sched();
  const quietEnd = performance.now() + ask.quietMs;
  const quiet = await writer(() => performance.now() > quietEnd);
  const sizeBefore = statSync(dataFile).size;
  const pruneStart = performance.now();
  pruneFrom = pruneStart;
  traced.prune.push(monoNs(pruneStart));
  pruning = true;
  let result = { removed: 0, passes: 0, alongside: 0 };
  const prune = jobs.prune(ask.keepSeconds, now).then((r) => {
    result = r;
    pruning = false;
  });
  const during = await writer(() => !pruning);
  await prune;
  const pruneMs = performance.now() - pruneStart;
  traced.prune.push(monoNs(pruneStart + pruneMs));
  clearInterval(stealSampler);
  if (process.env.BRINE_BENCH_JOBS_TRACE) writeFileSync(`${process.env.BRINE_BENCH_JOBS_TRACE}.${traced.tid}.${traceRound++}.json`, JSON.stringify(traced));
  const sizeAfter = statSync(dataFile).size;
  const afterEnd = performance.now() + Math.max(0, pruneMs - ask.quietMs);
  quiet.push(...(await writer(() => performance.now() > afterEnd)));
  const [cpu1] = sched();
  await new Promise((r) => setTimeout(r, 50)); // the observer's last entries
  const roundGcs = gcs.slice(gcFrom);
  const gcIn = (t0: number, t1: number) => roundGcs.reduce((sum, g) => sum + Math.max(0, Math.min(g.end, t1) - Math.max(g.start, t0)), 0);
  for (const s of slow as (SlowWrite & { t0: number; t1: number })[]) {
    s.gcMs = gcIn(s.t0, s.t1);
    delete (s as Partial<typeof s>).t0;
    delete (s as Partial<typeof s>).t1;
  }
  const end = formatJid(now - ask.keepSeconds * 1000, 0);
  let left = 0;
  for (const db of [store.returns, store.loads, store.minions, store.endtimes, store.listed]) for (const _ of db.getKeys({ end })) left++;
  return {
    quiet, during, pruneMs, result, reclaimUsSum, reclaimUsMax, reclaimCalls, carrying, plain, passMs, passHoldMs, slow,
    worstTurn: turns.reduce((w, x) => (x.ms > w.ms ? { ms: x.ms, gcMs: gcIn(x.t0, x.t1), cpuWaitMs: x.cpuWaitMs, onCpuMs: x.onCpuMs, majorFaults: x.majorFaults, sleeps: x.sleeps } : w), { ms: 0, gcMs: 0, cpuWaitMs: 0, onCpuMs: 0, majorFaults: 0, sleeps: 0 }),
    worstOwnMs: Math.max(0, ...turns.map((x) => x.ms - x.cpuWaitMs - gcIn(x.t0, x.t1))),
    gcCount: roundGcs.length, gcMaxMs: Math.max(0, ...roundGcs.map((g) => g.end - g.start)), cpuS: (cpu1 - cpu0) / 1e9, left, fileBytes: [sizeBefore, sizeAfter],
  };
}

parentPort!.on("message", (ask: ThreadAsk | "close") => {
  if (ask === "close") {
    closeSync(schedFd);
    closeSync(statFd);
    closeSync(statusFd);
    void store.close().then(() => parentPort!.postMessage("closed"));
    return;
  }
  round(ask).then(
    (a) => parentPort!.postMessage(a),
    (e: Error) => parentPort!.postMessage({ error: e.message }),
  );
});
