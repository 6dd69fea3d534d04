/**
 * Memory per connected minion (issue 17): a brine master process with N brine-swarm minions signed in and
 * connected (1,000; `--full`: 1,000 and 5,000), its resident memory per minion and where it is, by owner.
 *
 * - The master is warmed first (100 minions sign in, get their pillar and leave), so thread start-up, JIT code
 *   and the request workers' first allocations are not counted per minion; per minion = (RSS with N connected
 *   − RSS warmed, with none connected) / N, read with `salt-run brine.memory` (src/runners/brine.ts).
 * - By owner: each thread's V8 heap (v8.getHeapStatistics in every thread, committed and used), each LMDB
 *   environment's resident pages, the brk heap (glibc's main arena: the main thread's native allocations)
 *   and the other anonymous mappings (glibc's per-thread arenas: libzmq's I/O thread, OpenSSL in the request
 *   workers; V8's heaps are anonymous too and are subtracted).
 * - The master runs with node's --expose-gc and every thread collects its garbage before each reading, so the
 *   V8 figures are live objects, not the collector's timing.
 * - libzmq's share is measured by subtraction: a bare ZeroMQ ROUTER + PUB in a process of its own
 *   (zmq-floor-server.ts), N DEALER + SUB peers connected, one request answered and three publishes received
 *   per peer, with libzmq's default batch buffers and with the master's `brine_zmq_batch_bytes`.
 * - A last reading after the fleet has stayed connected and idle `BRINE_BENCH_FLEET_QUIET_S` (30 s): V8 gives a
 *   busy thread's young generation back only at a collection made once its allocation rate has been low a while.
 *   The idle reading is taken as long after the warm-up, so the quiet reading and it are like for like.
 * - `BRINE_BENCH_FLEET_SIZES=1000,5000` chooses the sizes; `BRINE_BENCH_DEBUG=1` prints the raw readings.
 * - `BRINE_BENCH_ZMQ_BATCH_BYTES=N` runs the master (and the second libzmq floor) with another `brine_zmq_batch_bytes`.
 * - `BRINE_BENCH_MALLOC_ARENA_MAX=N` starts the master with glibc's MALLOC_ARENA_MAX (fewer per-thread arenas);
 *   `BRINE_BENCH_MASTER_GLIBC_TUNABLES=…` with that GLIBC_TUNABLES, `BRINE_BENCH_MASTER_NODE_ARGS` with those node
 *   options (swarm.ts's startBrineMaster; both named in the rows' notes).
 * - `BRINE_BENCH_MALLOC_TRIM=1` (a diagnostic; needs gdb and ptrace rights): after the reading with N connected, gdb
 *   calls glibc's `malloc_trim(0)` in the master (every arena's free pages given back) and the RSS is read again:
 *   what the difference shows is memory glibc held free after the sign-in storm, not memory in use (the reading
 *   after the test.ping is then taken after the trim).
 * - `BRINE_BENCH_MINION_TRANSPORT=libzmq,native` measures the master with each minion-facing transport
 *   (`brine_minion_transport`; figures of the native one are marked `[native]`); the libzmq floor is measured
 *   when libzmq is one of them.
 *
 * The minions share 100 pool keys (swarm.ts's poolKeySlots): the master does the same work per id either way,
 * but every parsed key a thread keeps is then one of 100. `BRINE_BENCH_FLEET_KEYS=each` gives each measured minion
 * a key of its own, as a real fleet has (a pool of its own, `var/swarm-keys-each`, generated once and reused:
 * RSA key generation takes a second or so per key on this box); the warm-up minions keep the shared pool.
 */
import { execFileSync, fork } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import * as zmq from "zeromq";
import { benchTransports, poolKeySlots, startBrineMaster, type BenchMaster } from "./swarm.js";
import { fleetOn, ping } from "./syndic.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { controlCall } from "../src/lib/client/control-client.js";
import { DEFAULT_KEY_POOL_DIR, ensureKeyPool } from "../src/lib/minion/keys.js";
import { masterDefaults } from "../src/shared/config/defaults.js";
import { freePort } from "../tools/free-port.js";
import { summarizeSmaps } from "../src/shared/smaps.js";

interface Memory {
  fds: number;
  rss_kb: number;
  rss_anon_kb: number;
  resident_kb: Record<string, number>;
  heaps: { thread: string; used_kb: number; total_kb: number; malloced_kb: number; external_kb: number; young_kb?: number }[];
}

/**
 * Minions starting at once per swarm process (BRINE_BENCH_FLEET_START_IN_FLIGHT; unset: all at once). At load 17–29
 * a storm of 5,000 or 9,500 minions all at once did not sign in within 600 s (9,500: 2,196 signed in; 400,000 request
 * attempts timed out, and each REQ attempt that times out, 5 s, closes its socket and connects anew: the master closed
 * ~35,000 connections that had not finished their ZMTP handshake within 30 s).
 */
const startInFlight = process.env.BRINE_BENCH_FLEET_START_IN_FLIGHT ? Number(process.env.BRINE_BENCH_FLEET_START_IN_FLIGHT) : undefined;

/** How long the fleet stays connected and idle before the last reading, s (BRINE_BENCH_FLEET_QUIET_S; 30 by default). */
const quietS = Number(process.env.BRINE_BENCH_FLEET_QUIET_S ?? 30);

/** Most peer pairs the libzmq floor connects from this process (count; 4 fds a pair, see run()). */
const floorPeersMax = 3000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * One reading: `brine.memory gc=True` (every thread collects its garbage and reports its heap), then, once the
 * runner thread of that call is gone (the control server keeps one spare loaded, in every reading alike), the
 * process's RSS and smaps read from here. Runner threads live per call, not per minion: left out of the heaps.
 */
async function memoryOf(m: BenchMaster): Promise<Memory> {
  const r = await controlCall(m.sockDir, { op: "run", fun: "brine.memory", arg: [], kwarg: { gc: true } });
  if (r.type !== "return") throw new Error(`brine.memory: ${JSON.stringify(r).slice(0, 300)}`);
  const heaps = (r.ret as Memory).heaps.filter((h) => h.thread !== "runner");
  await sleep(3000);
  const status = readFileSync(`/proc/${m.pid}/status`, "utf8");
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  return { fds: readdirSync(`/proc/${m.pid}/fd`).length, rss_kb: kb("VmRSS"), rss_anon_kb: kb("RssAnon"), resident_kb: summarizeSmaps(readFileSync(`/proc/${m.pid}/smaps`, "utf8")).residentKb, heaps };
}

/**
 * Diagnostic: glibc's malloc_trim(0) called in the process by gdb (all threads stopped meanwhile), then its RSS, KB;
 * undefined when gdb cannot attach.
 */
function rssAfterMallocTrim(pid: number): number | undefined {
  try {
    execFileSync("gdb", ["-p", String(pid), "-batch", "-ex", "call (int)malloc_trim(0)"], { stdio: "ignore", timeout: 60_000 });
  } catch {
    return undefined;
  }
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN);
}

/** Sum of a heap figure over the threads, grouped by thread name. */
function heapsBy(m: Memory, f: "used_kb" | "total_kb" | "external_kb" | "young_kb"): Map<string, number> {
  const out = new Map<string, number>();
  for (const h of m.heaps) out.set(h.thread, (out.get(h.thread) ?? 0) + (h[f] ?? 0));
  return out;
}

/** smaps categories (src/shared/smaps.ts) that hold the process's heap memory, native and V8, and what is in each */
const nativeCategories: Record<string, string> = {
  anonymous: "V8 heaps, SharedArrayBuffers, large malloc chunks mapped on their own",
  "malloc arenas": "glibc's per-thread arenas (the request threads' OpenSSL, the worker threads' native allocations)",
  "brk heap": "glibc's main arena (main-thread native allocations)",
};

const sum = (xs: Iterable<number>) => [...xs].reduce((a, b) => a + b, 0);
const kbPer = (a: number, b: number, n: number) => Math.round(((b - a) / n) * 10) / 10;

/** libzmq's RSS per connected ROUTER+PUB peer pair, KB, in a bare process (no brine code). */
export async function libzmqFloorKb(n: number, batchBytes: number): Promise<number> {
  const retPort = await freePort();
  const pubPort = await freePort();
  const entry = fileURLToPath(new URL("./zmq-floor-server.js", import.meta.url));
  const srv = fork(entry, [String(retPort), String(pubPort), String(batchBytes)], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const next = (t: string) =>
    new Promise<Record<string, number>>((res, rej) => {
      const f = (msg: { t: string }) => {
        if (msg.t === t) (srv.off("message", f), res(msg as unknown as Record<string, number>));
      };
      srv.on("message", f);
      srv.once("exit", (c) => rej(new Error(`the libzmq floor process exited (${c})`)));
    });
  const ctx = new zmq.Context({ maxSockets: 2 * n + 64 });
  const dealers: zmq.Dealer[] = [];
  const subs: zmq.Subscriber[] = [];
  try {
    await next("ready");
    await sleep(1000);
    srv.send({ t: "rss" });
    const before = (await next("rss")).rssKb!;
    for (let i = 0; i < n; i++) {
      const d = new zmq.Dealer({ context: ctx, linger: 0 });
      d.connect(`tcp://127.0.0.1:${retPort}`);
      const s = new zmq.Subscriber({ context: ctx, linger: 0 });
      s.connect(`tcp://127.0.0.1:${pubPort}`);
      s.subscribe("");
      dealers.push(d);
      subs.push(s);
    }
    await sleep(3000);
    for (const d of dealers) await d.send(Buffer.alloc(600)); // a sign-in's size
    for (const d of dealers) await d.receive();
    for (let k = 0; k < 3; k++) {
      srv.send({ t: "publish" });
      await next("published");
    }
    // a SUB whose subscription the PUB had not yet taken misses a publish: wait for what comes, bounded
    await Promise.all(
      subs.map(async (s) => {
        s.receiveTimeout = 5000;
        for (let k = 0; k < 3; k++) await s.receive().catch(() => undefined);
      }),
    );
    await sleep(1000);
    srv.send({ t: "rss" });
    const after = (await next("rss")).rssKb!;
    return kbPer(before, after, n);
  } finally {
    for (const s of [...dealers, ...subs]) s.close();
    srv.kill("SIGKILL");
  }
}

/** BRINE_BENCH_FLEET_KEYS=each: a key per measured minion, from a pool of their own */
const eachKeys = process.env.BRINE_BENCH_FLEET_KEYS === "each";
const eachKeysDir = path.join("var", "swarm-keys-each");

async function masterAt(n: number, batchBytes: number, transport: "libzmq" | "native"): Promise<BenchRow[]> {
  await ensureKeyPool(poolKeySlots, { dir: DEFAULT_KEY_POOL_DIR });
  if (eachKeys) await ensureKeyPool(n, { dir: eachKeysDir });
  const arenas = process.env.BRINE_BENCH_MALLOC_ARENA_MAX;
  const saved = process.env.MALLOC_ARENA_MAX;
  if (arenas) process.env.MALLOC_ARENA_MAX = arenas;
  // --expose-gc: brine.memory gc=True collects every thread's garbage before it reads the heaps
  const savedArgs = process.env.BRINE_BENCH_MASTER_NODE_ARGS;
  process.env.BRINE_BENCH_MASTER_NODE_ARGS = `${savedArgs ?? ""} --expose-gc`;
  const m = await startBrineMaster({ id: "bench-fleet-memory", brine_zmq_batch_bytes: batchBytes, brine_minion_transport: transport }).finally(() => {
    if (savedArgs === undefined) delete process.env.BRINE_BENCH_MASTER_NODE_ARGS;
    else process.env.BRINE_BENCH_MASTER_NODE_ARGS = savedArgs;
  });
  if (arenas) saved === undefined ? delete process.env.MALLOC_ARENA_MAX : (process.env.MALLOC_ARENA_MAX = saved);
  const procs = Math.max(2, Math.ceil(n / 1500));
  try {
    const warm = await fleetOn(m, "warm-", 100, 1);
    await sleep(2000);
    await warm.shutdown();
    // the baseline as quiet as the last reading: read 5 s after the warm-up, a thread's young generation was still
    // what the warm-up grew it to in one build and given back in another (20 against 5 MiB in the request threads,
    // session 11), and the per-minion figures took the difference for memory per minion
    await sleep(Math.max(5, quietS) * 1000);
    const idle = await memoryOf(m);
    const t0 = performance.now();
    const fleet = await fleetOn(m, "mem-", n, procs, eachKeys ? { dir: eachKeysDir } : undefined, startInFlight);
    const signInS = (performance.now() - t0) / 1000;
    try {
      await sleep(5000);
      const up = await memoryOf(m);
      const trimmedKb = process.env.BRINE_BENCH_MALLOC_TRIM ? rssAfterMallocTrim(m.pid) : undefined;
      const r = await ping(m, n, (id) => id.startsWith("mem-"));
      await sleep(2000);
      const pinged = await memoryOf(m);
      // V8 gives a thread's young generation back at a collection only once its allocation rate has been low for
      // a while (~10 s in a bare process): the readings above, seconds after the storm, still hold what it grew to
      await sleep(quietS * 1000);
      const quiet = await memoryOf(m);
      const load = os.loadavg()[0]!.toFixed(1);
      const note = `brine_minion_transport ${transport}, ${n} minions on ${eachKeys ? "a key each" : `${poolKeySlots} pool keys`}, ${procs} swarm procs${startInFlight ? `, ${startInFlight} starting at once per proc` : ", all started at once"}, signed in within ${signInS.toFixed(1)} s, load ${load}${arenas ? `, MALLOC_ARENA_MAX=${arenas}` : ""}${process.env.BRINE_BENCH_MASTER_GLIBC_TUNABLES ? `, GLIBC_TUNABLES=${process.env.BRINE_BENCH_MASTER_GLIBC_TUNABLES}` : ""}${process.env.BRINE_BENCH_MASTER_NODE_ARGS ? `, node ${process.env.BRINE_BENCH_MASTER_NODE_ARGS.trim()}` : ""}${process.env.BRINE_BENCH_MASTER_DIST ? `, master from ${process.env.BRINE_BENCH_MASTER_DIST}` : ""}`;
      const rows: BenchRow[] = [
        { figure: `${n} connected: master RSS per minion`, value: kbPer(idle.rss_kb, up.rss_kb, n), unit: "KB", target: 32, better: "lower", note: `${Math.round(idle.rss_kb / 1024)} -> ${Math.round(up.rss_kb / 1024)} MB, ${((up.fds - idle.fds) / n).toFixed(2)} fds per minion; ${note}` },
        { figure: `${n} connected, after one test.ping to all: RSS per minion`, value: kbPer(idle.rss_kb, pinged.rss_kb, n), unit: "KB", target: 32, better: "lower", note: `${r.returns}/${r.expected} returns, last at ${r.lastReturnMs} ms` },
        { figure: `${n} connected, then ${quietS} s quiet: RSS per minion`, value: kbPer(idle.rss_kb, quiet.rss_kb, n), unit: "KB", target: 32, better: "lower", note: `${Math.round(quiet.rss_kb / 1024)} MB, ${((quiet.fds - idle.fds) / n).toFixed(2)} fds per minion (2.00 while every minion holds its REQ and SUB connections); ${quiet.heaps.length} of ${idle.heaps.length} threads answered the heap probe; young generations, all threads: ${Math.round(sum(heapsBy(idle, "young_kb").values()) / 1024)} MB idle, ${Math.round(sum(heapsBy(up, "young_kb").values()) / 1024)} MB connected, ${Math.round(sum(heapsBy(quiet, "young_kb").values()) / 1024)} MB after the quiet (${[...heapsBy(quiet, "young_kb")].map(([t, kb]) => `${t} ${Math.round(kb / 1024)}`).join(", ")}); V8 committed ${kbPer(sum(heapsBy(idle, "total_kb").values()), sum(heapsBy(quiet, "total_kb").values()), n)} KB per minion` },
      ];
      {
        // the quiet reading against the idle one by owner: both taken as long after a burst (like for like)
        const owners: string[] = [];
        for (const t of [...heapsBy(idle, "total_kb").keys()].sort()) {
          owners.push(`${t} V8 used ${kbPer(heapsBy(idle, "used_kb").get(t) ?? 0, heapsBy(quiet, "used_kb").get(t) ?? 0, n)} / committed ${kbPer(heapsBy(idle, "total_kb").get(t) ?? 0, heapsBy(quiet, "total_kb").get(t) ?? 0, n)}`);
        }
        owners.push(`Buffers ${kbPer(sum(heapsBy(idle, "external_kb").values()), sum(heapsBy(quiet, "external_kb").values()), n)}`);
        for (const cat of Object.keys(nativeCategories)) owners.push(`${cat} ${kbPer(idle.resident_kb[cat] ?? 0, quiet.resident_kb[cat] ?? 0, n)}`);
        const missing = quiet.heaps.length !== idle.heaps.length ? ` (INVALID: ${quiet.heaps.length} of ${idle.heaps.length} threads answered the heap probe)` : "";
        rows.push({ figure: `${n} connected, then ${quietS} s quiet: V8 heaps' live objects per minion, all threads${missing}`, value: kbPer(sum(heapsBy(idle, "used_kb").values()), sum(heapsBy(quiet, "used_kb").values()), n), unit: "KB", better: "lower", note: `by owner, KB per minion: ${owners.join("; ")}` });
      }
      if (process.env.BRINE_BENCH_MALLOC_TRIM) {
        rows.push(
          trimmedKb === undefined
            ? { figure: `${n} connected: RSS per minion after malloc_trim (INVALID: gdb could not attach)`, value: NaN, unit: "KB" }
            : { figure: `${n} connected: RSS per minion after malloc_trim(0) (diagnostic, gdb)`, value: kbPer(idle.rss_kb, trimmedKb, n), unit: "KB", better: "lower", note: `glibc gave back ${Math.round((up.rss_kb - trimmedKb) / 1024)} MB of free pages: ${kbPer(trimmedKb, up.rss_kb, n)} KB per minion held free by malloc after the sign-ins` },
        );
      }
      if (process.env.BRINE_BENCH_DEBUG) console.log(JSON.stringify({ idle, up, pinged, quiet, trimmedKb }));
      // brine.memory hears only the threads that answer within its 1 s window: on a loaded box a busy thread can
      // miss it, and a reading without it would count its whole heap as a saving
      const heapsMissing = idle.heaps.length !== up.heaps.length ? ` (INVALID: ${up.heaps.length} of ${idle.heaps.length} threads answered the heap probe)` : "";
      const idleHeaps = heapsBy(idle, "total_kb");
      const upHeaps = heapsBy(up, "total_kb");
      const idleUsed = heapsBy(idle, "used_kb");
      const upUsed = heapsBy(up, "used_kb");
      const idleYoung = heapsBy(idle, "young_kb");
      const upYoung = heapsBy(up, "young_kb");
      for (const t of [...new Set([...idleHeaps.keys(), ...upHeaps.keys()])].sort()) {
        rows.push({ figure: `${n} connected: V8 heap per minion, ${t} thread(s)${heapsMissing}`, value: kbPer(idleHeaps.get(t) ?? 0, upHeaps.get(t) ?? 0, n), unit: "KB", better: "lower", note: `committed; used ${kbPer(idleUsed.get(t) ?? 0, upUsed.get(t) ?? 0, n)} KB per minion; young generation ${kbPer(idleYoung.get(t) ?? 0, upYoung.get(t) ?? 0, n)} KB per minion (${Math.round((idleYoung.get(t) ?? 0) / 1024)} -> ${Math.round((upYoung.get(t) ?? 0) / 1024)} MB)` });
      }
      const ext = kbPer(sum(heapsBy(idle, "external_kb").values()), sum(heapsBy(up, "external_kb").values()), n);
      rows.push({ figure: `${n} connected: Buffers/ArrayBuffers per minion, all threads${heapsMissing}`, value: ext, unit: "KB", better: "lower", note: "external memory V8 reports (in the anonymous mappings or the brk heap)" });
      for (const cat of [...new Set([...Object.keys(idle.resident_kb), ...Object.keys(up.resident_kb)])].sort()) {
        const v = kbPer(idle.resident_kb[cat] ?? 0, up.resident_kb[cat] ?? 0, n);
        if (cat.startsWith("lmdb ")) rows.push({ figure: `${n} connected: LMDB pages resident per minion (${cat.split("/").pop()})`, value: v, unit: "KB", better: "lower" });
        else if (cat in nativeCategories) rows.push({ figure: `${n} connected: ${cat} resident per minion`, value: v, unit: "KB", better: "lower", note: nativeCategories[cat] });
      }
      const v8Total = kbPer(sum(idleHeaps.values()), sum(upHeaps.values()), n);
      const nativeOf = (m: Memory) => sum(Object.keys(nativeCategories).map((c) => m.resident_kb[c] ?? 0));
      const anonAll = kbPer(nativeOf(idle), nativeOf(up), n);
      rows.push({ figure: `${n} connected: native memory per minion outside V8 heaps${heapsMissing}`, value: Math.round((anonAll - v8Total) * 10) / 10, unit: "KB", better: "lower", note: "anonymous + malloc arenas + brk growth − V8 committed growth: libzmq, Buffers, OpenSSL, malloc slack" });
      return transport === "native" ? rows.map((r) => ({ ...r, figure: `[native] ${r.figure}` })) : rows;
    } finally {
      await fleet.shutdown();
    }
  } finally {
    await m.stop();
  }
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const batch = Number(process.env.BRINE_BENCH_ZMQ_BATCH_BYTES ?? masterDefaults().brine_zmq_batch_bytes);
  const sizes = process.env.BRINE_BENCH_FLEET_SIZES ? process.env.BRINE_BENCH_FLEET_SIZES.split(",").map(Number) : opts.full ? [1000, 5000] : [1000];
  const out: BenchRow[] = [];
  for (const n of sizes) {
    // the peers live in this process: each ZeroMQ socket also holds a mailbox fd, so 2 fds per socket and 4
    // per peer pair; past ~4,900 pairs the box's RLIMIT_NOFILE (20,000) is reached. The floor is per connection.
    const peers = Math.min(n, floorPeersMax);
    const transports = benchTransports();
    if (transports.includes("libzmq")) {
      const libDefault = await libzmqFloorKb(peers, 0);
      const libBrine = await libzmqFloorKb(peers, batch);
      out.push(
        { figure: `${peers} peers: libzmq floor per connected ROUTER+PUB pair, default batch (8 KiB)`, value: libDefault, unit: "KB", better: "lower", note: "bare zeromq.js process, no brine code" },
        { figure: `${peers} peers: libzmq floor per connected ROUTER+PUB pair, batch ${batch} B`, value: libBrine, unit: "KB", better: "lower", note: "brine_zmq_batch_bytes" },
      );
    }
    for (const t of transports) out.push(...(await masterAt(n, batch, t)));
  }
  return out;
}
