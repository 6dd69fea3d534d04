/**
 * The job cache at scale (issues 13 and 17), each call timed end to end as `salt-run` sees it: control socket
 * request → runner thread (LMDB reads, the answer) → reply frame → decoded by the client; an in-process master on
 * its own temporary root, jobs written into its LMDB as the request workers write them (JobCache).
 * - quick: a runner call that reads nothing; `jobs.list_jobs` at 100,000 jobs (target < 1 s, issue 13);
 *   `jobs.lookup_jid` of one return of 100,000 keys.
 * - `--full` adds issue 17's figures on a second master: 1,000,000 returns over 10,000 jobs (100 each): disk
 *   bytes per return, `jobs.list_jobs` (≤ 200 ms), `jobs.lookup_jid` of a job with 100 returns (≤ 5 ms), and
 *   keep_jobs pruning of the older half (500,000 returns) in a request worker's thread while that thread stores
 *   returns (durable before the reply), on the disk (os.tmpdir()) and again on /dev/shm where fsync costs nothing:
 *   see pruneRounds and job-cache-prune.ts for the rounds, the figures and the verdicts.
 *   `BRINE_BENCH_JOBS_PRUNE_ONLY=1` runs only the fills and the prune (no master, no list or lookup figures; with
 *   `BRINE_BENCH_JOBS_MEDIA=disk` or `tmpfs` on that one only), and
 *   `BRINE_BENCH_JOBS_RECLAIM=32,16,16,32` makes the prune rounds alternate those deletes per return instead, one
 *   slice of the older half each (continuous writer). Diagnosis: `BRINE_BENCH_JOBS_SETTLE=writeback` or `=<seconds>`
 *   waits after each fill (settle), `BRINE_BENCH_JOBS_INTERLEAVE_MS=500` makes the returns carry the prune's deletes
 *   only in every other 500 ms window (the prune rows then compare the returns that carried deletes with those that
 *   did not, in the same minutes of the same disk), `BRINE_BENCH_JOBS_TRACE=<path>` writes each round's times for a
 *   `perf record -k mono` trace (job-cache-prune-thread.ts).
 * Each figure prints its CPU (this process: every thread of the master, and the client's decode).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../src/shared/config/defaults.js";
import { MasterServer } from "../src/main.js";
import { configureLogging } from "../src/shared/log.js";
import { freePort } from "../tools/free-port.js";
import { lmdbDir, openStore } from "../src/lib/store/lmdb-env.js";
import { JobCache, reclaimAlongMax } from "../src/lib/store/job-cache.js";
import { formatJid, jidToTime } from "../src/shared/protocol/jid.js";
import { pingReturn, pruneInThread, roundRows, verdictRows } from "./job-cache-prune.js";
import type { ThreadAnswer, ThreadAsk } from "./job-cache-prune-thread.js";
import { controlCall } from "../src/lib/client/control-client.js";
import type { BenchOptions, BenchRow } from "./types.js";

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;

/**
 * Median wall time and CPU time of `calls` calls after a warm-up call, and the warm-up's wall time (`first`). The CPU figure is this process's (every thread
 * of the in-process master, and the client's decode), from `process.cpuUsage`: on a shared box it is the one that
 * other agents' load does not inflate much, where wall time grows with the load average.
 */
export async function timed(server: MasterServer, sockDir: string, fun: string, arg: unknown[], check: (ret: unknown) => void, calls = 3, backToBack = false): Promise<{ wall: number; cpu: number; first: number }> {
  let first = 0;
  const times: number[] = [];
  const cpus: number[] = [];
  for (let i = 0; i <= calls; i++) {
    const t = performance.now();
    const c = process.cpuUsage();
    const r = await controlCall(sockDir, { op: "run", fun, arg, kwarg: {} });
    const used = process.cpuUsage(c);
    const ms = performance.now() - t;
    if (r.type !== "return") throw new Error(`${fun}: ${r.message}`);
    check(r.ret);
    if (i === 0) first = ms;
    else {
      times.push(ms);
      cpus.push((used.user + used.system) / 1000);
    }
    // the spare runner thread (started once a call is answered) is loaded before the next call, and the call just
    // answered is over (its job record committed, its thread back), as between two salt-runs a person types; its
    // start is not in the next call's CPU figure. `backToBack`: the next call comes at once, as a script's loop
    // sends them (it then waits for the last call's record: control-server.ts warmHandoffWaitMs)
    await spareLoaded(server);
    if (!backToBack) await callsOver(server);
  }
  return { wall: median(times), cpu: median(cpus), first };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits until the master's next spare runner thread says it has loaded and warmed up (ControlServer.spareLoaded),
 * or for spareWaitMsMax: a fixed pause (1.5 s) was too short at load 20 and more, and those calls measured a
 * thread's start instead of a call.
 */
async function spareLoaded(server: MasterServer): Promise<void> {
  const control = (server as unknown as { control: { spareLoaded: boolean } }).control;
  for (const end = performance.now() + spareWaitMsMax; !control.spareLoaded && performance.now() < end; ) await sleep(20);
}
/** Waits until no runner call is running (the last one's job record committed), or for spareWaitMsMax. */
async function callsOver(server: MasterServer): Promise<void> {
  const control = (server as unknown as { control: { callsRunning: number } }).control;
  for (const end = performance.now() + spareWaitMsMax; control.callsRunning > 0 && performance.now() < end; ) await sleep(1);
}
/** The longest wait for the spare runner thread between two timed calls, ms. */
const spareWaitMsMax = 15_000;

export async function masterOn(root: string): Promise<{ cfg: MasterConfig; server: MasterServer }> {
  const cfg: MasterConfig = {
    ...masterDefaults(),
    id: "bench_master",
    interface: "127.0.0.1",
    root_dir: root,
    pki_dir: path.join(root, "pki"),
    cachedir: path.join(root, "cache"),
    sock_dir: path.join(root, "sock"),
    worker_threads: 1,
    loop_interval: 3600,
    keep_jobs_seconds: 0,
    ret_port: await freePort(),
    publish_port: await freePort(),
  };
  const server = new MasterServer(cfg);
  await server.start();
  return { cfg, server };
}

const cpuRow = (t: { cpu: number }): BenchRow => ({ figure: "  the same, CPU of master and client", value: t.cpu, unit: "ms", better: "lower" });

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  configureLogging({ level: "quiet" });
  if (process.env.BRINE_BENCH_JOBS_PRUNE_ONLY === "1") return pruneOnly();
  const rows: BenchRow[] = [];
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-bench-jobs-"));
  const { cfg, server } = await masterOn(root);
  const store = openStore(cfg);
  const jobs = new JobCache(store);
  try {
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 100_000; i++) {
      const jid = `2026112512${String(i).padStart(10, "0")}`;
      writes.push(jobs.saveLoad(jid, { fun: "test.ping", arg: [], tgt: "*", tgt_type: "glob", user: "root", jid }, ["m1"]));
    }
    await Promise.all(writes);
    // what any runner call costs here (the spare thread's hand-off, the call, its job record), for scale
    const idle = await timed(server, cfg.sock_dir, "jobs.lookup_jid", ["20000101000000000000"], () => undefined, 9);
    rows.push({ figure: "a runner call that reads nothing (median of 9)", value: idle.wall, unit: "ms", better: "lower" }, cpuRow(idle));
    const loop = await timed(server, cfg.sock_dir, "jobs.lookup_jid", ["20000101000000000000"], () => undefined, 9, true);
    rows.push({ figure: "  the same, back to back (a script's loop: each waits for the last one's job record)", value: loop.wall, unit: "ms", better: "lower" }, cpuRow(loop));
    const t = await timed(server, cfg.sock_dir, "jobs.list_jobs", [], (ret) => {
      if (Object.keys(ret as object).length < 100_000) throw new Error("list_jobs: jobs missing"); // runner calls are jobs too
    });
    rows.push({ figure: "jobs.list_jobs, 100,000 jobs (salt-run's round trip)", value: t.wall, unit: "ms", target: 1000, better: "lower" }, cpuRow(t));
    const ret: Record<string, number> = {};
    for (let i = 0; i < 100_000; i++) ret[`key${i}`] = i;
    const jid = "20261125130000000000";
    await jobs.saveLoad(jid, { fun: "test.big", jid });
    await jobs.saveReturn(jid, "m1", { return: ret }, false);
    const big = await timed(server, cfg.sock_dir, "jobs.lookup_jid", [jid], (r) => {
      if (Object.keys((r as Record<string, object>).m1!).length !== 100_000) throw new Error("lookup_jid: wrong count");
    });
    rows.push({ figure: "jobs.lookup_jid, one return of 100,000 keys", value: big.wall, unit: "ms", better: "lower" }, cpuRow(big));
  } finally {
    await store.close();
    await server.stop();
    rmSync(root, { recursive: true, force: true });
  }
  if (opts.full) rows.push(...(await millionReturns()));
  return rows;
}

const JOBS = 10_000;
const RETURNS_PER_JOB = 100;

/** Issue 17's job cache figures: 1,000,000 returns over 10,000 jobs, then the prune on tmpfs (pruneOnTmpfs). */
async function millionReturns(): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-bench-1m-"));
  const { cfg, server } = await masterOn(root);
  const store = openStore(cfg);
  const jobs = new JobCache(store);
  const dataFile = path.join(lmdbDir(cfg), "data.mdb");
  const now = Date.now();
  let disk: ThreadAnswer[];
  try {
    const before = statSync(dataFile).size;
    const fillS = await fill(jobs, now);
    const bytes = statSync(dataFile).size - before;
    rows.push({ figure: `job cache: ${(JOBS * RETURNS_PER_JOB).toLocaleString("en-US")} test.ping returns over ${JOBS.toLocaleString("en-US")} jobs, disk bytes per return (loads, expected minions, end times, list entries included)`, value: bytes / (JOBS * RETURNS_PER_JOB), unit: "B", better: "lower", note: `data.mdb grew ${(bytes / 2 ** 20).toFixed(0)} MiB; filled in ${fillS.toFixed(0)} s` });
    const list = await timed(server, cfg.sock_dir, "jobs.list_jobs", [], (r) => {
      if (Object.keys(r as object).length < JOBS) throw new Error("list_jobs: jobs missing");
    });
    rows.push({ figure: `jobs.list_jobs, ${JOBS.toLocaleString("en-US")} jobs of 100 returns`, value: list.wall, unit: "ms", target: 200, better: "lower" }, cpuRow(list));
    // not the newest job: a spare runner thread reads the newest jobs once before its call (jobs.ts warmJobReads),
    // so the figure is of a job the warm-up did not read
    const one = jidAt(now, Math.floor((JOBS * 3) / 4));
    const lookup = await timed(server, cfg.sock_dir, "jobs.lookup_jid", [one], (r) => {
      if (Object.keys(r as object).length !== RETURNS_PER_JOB) throw new Error("lookup_jid: returns missing");
    }, 9);
    rows.push({ figure: "jobs.lookup_jid, a job with 100 returns (median of 9)", value: lookup.wall, unit: "ms", target: 5, better: "lower", note: `first call ${lookup.first.toFixed(2)} ms` }, cpuRow(lookup));
    disk = await pruneInThread(cfg, now, pruneAsks());
  } finally {
    await store.close();
    await server.stop();
    rmSync(root, { recursive: true, force: true });
  }
  const shm = await pruneOnTmpfs();
  rows.push(...pruneRoundRows("disk", disk), ...pruneRoundRows("tmpfs", shm));
  return rows;
}

/** The older half three days old (what keep_jobs_seconds of a day prunes), the newer half of the last hour. */
const jidAt = (now: number, j: number) => formatJid(j < JOBS / 2 ? now - 3 * 86_400_000 + j * 1000 : now - 3_600_000 + j * 100, j % 1000);
const minions = Array.from({ length: RETURNS_PER_JOB }, (_, m) => `minion-${String(m).padStart(4, "0")}.example.org`);

/** Stores JOBS jobs of RETURNS_PER_JOB test.ping returns each, as the request workers store them; resolves with the seconds it took. */
async function fill(jobs: JobCache, now: number): Promise<number> {
  const fillStart = performance.now();
  for (let j = 0; j < JOBS; j += 100) {
    const writes: Promise<unknown>[] = [];
    for (let k = j; k < j + 100; k++) {
      const jid = jidAt(now, k);
      writes.push(jobs.saveLoad(jid, { fun: "test.ping", arg: [], tgt: "*", tgt_type: "glob", user: "root", jid, ret: "" }, minions));
      for (const id of minions) writes.push(jobs.addReturn(jid, id, pingReturn));
      writes.push(jobs.setEndtime(jid, jidToTime(jid)));
    }
    await Promise.all(writes);
  }
  await jobs.flush();
  return (performance.now() - fillStart) / 1000;
}

/** The same fill and prune with the job cache on /dev/shm, where an fsync costs nothing: what is left is the prune's. */
async function pruneOnTmpfs(): Promise<ThreadAnswer[]> {
  return await filledAndPruned("/dev/shm");
}

/**
 * BRINE_BENCH_JOBS_SETTLE: "writeback" waits after the fill until the kernel has no dirty page cache left to write
 * (/proc/meminfo Dirty ≤ settleDirtyKb and Writeback 0, after a `sync`), a number waits that many seconds; either
 * way the prune then starts on a disk that is not writing the fill out. Prints what it waited to stderr.
 */
async function settle(): Promise<void> {
  const how = process.env.BRINE_BENCH_JOBS_SETTLE;
  if (!how) return;
  const t0 = performance.now();
  const meminfo = () => Object.fromEntries([...readFileSync("/proc/meminfo", "latin1").matchAll(/^(\w+):\s+(\d+)/gm)].map((m) => [m[1], Number(m[2])]));
  const at0 = meminfo();
  if (how === "writeback") {
    execFileSync("sync");
    while (meminfo().Dirty! > settleDirtyKb || meminfo().Writeback! > 0) await new Promise((r) => setTimeout(r, 100));
  } else await new Promise((r) => setTimeout(r, Number(how) * 1000));
  const at1 = meminfo();
  console.error(`settle (${how}): ${((performance.now() - t0) / 1000).toFixed(1)} s, Dirty ${at0.Dirty} → ${at1.Dirty} kB, Writeback ${at0.Writeback} → ${at1.Writeback} kB`);
}
/** What "no dirty page cache left" allows of other processes' writes, kB. */
const settleDirtyKb = 8_192;

/** A job cache alone (no master) under `dir`, filled, then pruned in rounds (pruneAsks). */
async function filledAndPruned(dir: string): Promise<ThreadAnswer[]> {
  const root = mkdtempSync(path.join(dir, "brine-bench-1m-"));
  const cfg = { ...masterDefaults(), cachedir: root };
  const store = openStore(cfg);
  const jobs = new JobCache(store);
  const now = Date.now();
  try {
    await fill(jobs, now);
    await settle();
    return await pruneInThread(cfg, now, pruneAsks());
  } finally {
    await store.close();
    rmSync(root, { recursive: true, force: true });
  }
}

/** BRINE_BENCH_JOBS_PRUNE_ONLY: the fills and the prune rounds, on the disk and on tmpfs. */
async function pruneOnly(): Promise<BenchRow[]> {
  const media = process.env.BRINE_BENCH_JOBS_MEDIA ?? "disk,tmpfs";
  const rows: BenchRow[] = [];
  if (media.includes("disk")) rows.push(...pruneRoundRows("disk", await filledAndPruned(os.tmpdir())));
  if (media.includes("tmpfs")) rows.push(...pruneRoundRows("tmpfs", await pruneOnTmpfs()));
  return rows;
}

/** The no-prune window before each prune (and after it, for the rest of the prune's length), ms. */
const quietMs = 5_000;
/** The trickle round's writer: one return this often, ms (the prune's own passes run between them). */
const trickleMs = 100;
/** The jobs of the older half the continuous round prunes; the trickle round prunes the rest. */
const continuousJobs = 4_500;
/** keep_jobs_seconds that prunes the older jobs j < `jobs` of jidAt (each a second apart, three days old). */
const keepBefore = (jobs: number) => 3 * 86_400 - jobs + 0.5;

/**
 * The prune rounds on one fill, in the request-worker-like thread: by default, the older 4,500 jobs (450,000
 * returns) with returns stored one after another (the prune's deletes ride on them; no pass of its own), then the
 * last 500 older jobs (50,000 returns) with a return every trickleMs (its own passes run between them). With
 * BRINE_BENCH_JOBS_RECLAIM, one continuous round per deletes-per-return value listed, each an equal slice.
 */
function pruneAsks(): ThreadAsk[] {
  const list = process.env.BRINE_BENCH_JOBS_RECLAIM;
  if (list) {
    const values = list.split(",").map(Number);
    if (values.some((v) => !Number.isInteger(v) || v < 1)) throw new Error(`BRINE_BENCH_JOBS_RECLAIM: ${list}: not a list of positive integers`);
    const slice = JOBS / 2 / values.length;
    return values.map((reclaimMax, i) => ({ keepSeconds: keepBefore(Math.round(slice * (i + 1))), reclaimMax, writer: "continuous", trickleMs, quietMs }));
  }
  return [
    { keepSeconds: keepBefore(continuousJobs), reclaimMax: reclaimAlongMax, writer: "continuous", trickleMs, quietMs },
    { keepSeconds: keepBefore(JOBS / 2), reclaimMax: reclaimAlongMax, writer: "trickle", trickleMs, quietMs },
  ];
}

function pruneRoundRows(medium: string, answers: ThreadAnswer[]): BenchRow[] {
  const asks = pruneAsks();
  const rows: BenchRow[] = [];
  let from = 0;
  answers.forEach((a, i) => {
    const ask = asks[i]!;
    const to = Math.round(3 * 86_400 - ask.keepSeconds + 0.5);
    const label = `${medium}, ${ask.writer} writes, ${ask.reclaimMax} deletes a return`;
    rows.push(...roundRows(label, `${((to - from) * RETURNS_PER_JOB).toLocaleString("en-US")} returns (${(to - from).toLocaleString("en-US")} jobs)`, ask.reclaimMax, a), ...verdictRows(label, a));
    from = to;
  });
  return rows;
}
