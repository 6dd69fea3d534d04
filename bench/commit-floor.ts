/**
 * The floor of a replicated commit on this machine, with no brine code in the path: what the Raft commit
 * figures of bench/cluster.ts would be if every layer above the OS cost nothing. Three processes on this
 * box, as the cluster bench runs three masters: this one (the leader) and two followers
 * (commit-floor-follower.ts). Per entry, one at a time: the leader sends 128 bytes to both followers over
 * ZeroMQ (DEALER → ROUTER on loopback), writes its own copy in one synchronous LMDB transaction meanwhile,
 * and counts the entry committed at its own write plus the first follower's answer (a quorum of 2 of 3);
 * each follower writes the entry in one synchronous transaction before it answers. LMDB opened as the Raft
 * environment is (overlappingSync off: a commit returns after its fsync). Once on this disk, once on tmpfs.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { once } from "node:events";
import net from "node:net";
import { open } from "lmdb";
import * as zmq from "zeromq";
import { freePort } from "../tools/free-port.js";
import type { BenchOptions, BenchRow } from "./types.js";

const TMPFS = "/dev/shm";
const ENTRY_BYTES = 128;
const WARM_ENTRIES = 50;

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** How the floor's processes talk: ZeroMQ DEALER → ROUTER (as the peer channel), or plain TCP (node:net). */
export type FloorWire = "zmq" | "net";

async function startFollower(port: number, dir: string, wire: FloorWire): Promise<ChildProcess> {
  const child = spawn(process.execPath, [new URL("./commit-floor-follower.js", import.meta.url).pathname, String(port), dir, wire], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout!.setEncoding("utf8");
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (d: string) => {
      out += d;
      if (out.includes("ready")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`commit-floor follower exited (${code})`)));
  });
  return child;
}

/** A floor run: latencies, and what each process spent per entry (µs on a CPU; the followers' mean). */
export interface FloorRun {
  /** commit latencies, ms, sorted */
  lat: number[];
  leaderRunUs: number;
  followerRunUs: number;
  /** bytes each process sent to the block layer per measured entry (/proc/<pid>/io; 0 without it) */
  leaderDiskBytes: number;
  followerDiskBytes: number;
  /** the leader's own LMDB transaction (fsync included), p50, ms */
  leaderTxnP50Ms: number;
}

/** /proc/<pid>/io's write_bytes (bytes this process caused to be sent to the block layer), undefined without it. */
export function diskWriteBytes(pid: number | "self" = "self"): number | undefined {
  try {
    const m = /^write_bytes: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, "utf8"));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}


/** Sum of /proc/<pid>/task/<tid>/schedstat's time on a CPU over the threads of `pid`, ns (0 without /proc). */
function runNsOf(pid: number | "self"): number {
  let ns = 0;
  try {
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]) || 0;
      } catch {
        // the thread ended meanwhile
      }
    }
  } catch {
    // no /proc
  }
  return ns;
}

/** Commit latencies (ms, sorted) of `n` entries one at a time, with every LMDB directory under `base`. */
export async function floor(base: string, n: number, wire: FloorWire = "zmq"): Promise<number[]> {
  return (await floorRun(base, n, wire)).lat;
}

/** One connection to a follower: send a frame, receive the next answer. */
interface FloorLink {
  send(b: Buffer): Promise<unknown>;
  receive(): Promise<unknown>;
  close(): void;
}

async function zmqLink(port: number): Promise<FloorLink> {
  const s = new zmq.Dealer({ linger: 0 });
  s.connect(`tcp://127.0.0.1:${port}`);
  return { send: (b) => s.send(b), receive: () => s.receive(), close: () => s.close() };
}

/** Plain TCP, 4-byte length-prefixed frames: the socket is written and read on this thread, no I/O thread. */
async function netLink(port: number): Promise<FloorLink> {
  const sock = net.connect(port, "127.0.0.1");
  sock.setNoDelay(true);
  await once(sock, "connect");
  const waiting: ((b: Buffer) => void)[] = [];
  const ready: Buffer[] = [];
  let buf: Buffer = Buffer.alloc(0);
  sock.on("data", (d: Buffer) => {
    buf = buf.length === 0 ? d : Buffer.concat([buf, d]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
      const body = buf.subarray(4, 4 + buf.readUInt32BE(0));
      buf = buf.subarray(4 + body.length);
      const w = waiting.shift();
      if (w) w(body);
      else ready.push(body);
    }
  });
  return {
    send: (b) => {
      const head = Buffer.alloc(4);
      head.writeUInt32BE(b.length, 0);
      sock.write(Buffer.concat([head, b]));
      return Promise.resolve();
    },
    receive: () => (ready.length > 0 ? Promise.resolve(ready.shift()) : new Promise<Buffer>((r) => waiting.push(r))),
    close: () => sock.destroy(),
  };
}

/** floor(), with the CPU each process spent per measured entry; `warm` entries first, not measured. */
export async function floorRun(base: string, n: number, wire: FloorWire = "zmq", warm = WARM_ENTRIES): Promise<FloorRun> {
  const f = await openFloor(base, wire);
  try {
    await f.segment(warm);
    return await f.segment(n);
  } finally {
    await f.close();
  }
}

/**
 * The floor's three processes, kept running between segments: each segment(n) commits n more entries one at a
 * time and reports them alone (latencies, CPU and disk per entry), so that the floor can be measured in turns
 * with another cluster on the same box (bench/commit-floor-pairs.ts), each turn seeing the same moment of it.
 */
export interface OpenFloor {
  segment(n: number): Promise<FloorRun>;
  close(): Promise<void>;
}

export async function openFloor(base: string, wire: FloorWire = "zmq"): Promise<OpenFloor> {
  const root = mkdtempSync(path.join(base, "brine-commit-floor-"));
  const followers: ChildProcess[] = [];
  const socks: FloorLink[] = [];
  const env = open({ path: path.join(root, "leader"), overlappingSync: false, compression: false });
  const log = env.openDB({ name: "log" });
  const close = async () => {
    for (const s of socks) s.close();
    for (const f of followers) {
      f.kill("SIGTERM");
      if (f.exitCode === null) await once(f, "exit");
    }
    await env.close();
    rmSync(root, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      followers.push(await startFollower(port, path.join(root, `follower${i}`), wire));
      socks.push(await (wire === "net" ? netLink(port) : zmqLink(port)));
    }
  } catch (e) {
    await close();
    throw e;
  }
  const entry = Buffer.alloc(ENTRY_BYTES, 0x61);
  let next = 0;
  const cpuNow = () => [runNsOf("self"), ...followers.map((f) => runNsOf(f.pid!))];
  const diskNow = () => ["self" as const, ...followers.map((f) => f.pid!)].map((p) => diskWriteBytes(p) ?? 0);
  const segment = async (n: number): Promise<FloorRun> => {
    const lat: number[] = [];
    const txn: number[] = [];
    const cpu0 = cpuNow();
    const disk0 = diskNow();
    for (let k = 0; k < n; k++) {
      const i = next++;
      entry.writeUInt32BE(i, 0);
      const t0 = performance.now();
      for (const s of socks) await s.send(entry);
      const t1 = performance.now();
      env.transactionSync(() => log.putSync(i % 4096, entry));
      txn.push(performance.now() - t1);
      // the first answer makes the quorum; the other is read afterwards so it never counts for the next entry
      const answers = socks.map((s) => s.receive());
      await Promise.race(answers);
      lat.push(performance.now() - t0);
      await Promise.all(answers);
    }
    const used = cpuNow().map((x, k) => (x - cpu0[k]!) / 1000 / Math.max(1, n));
    const wrote = diskNow().map((x, k) => (x - disk0[k]!) / Math.max(1, n));
    return { lat: lat.sort((a, b) => a - b), leaderRunUs: used[0]!, followerRunUs: (used[1]! + used[2]!) / 2, leaderDiskBytes: wrote[0]!, followerDiskBytes: (wrote[1]! + wrote[2]!) / 2, leaderTxnP50Ms: n > 0 ? pct(txn.sort((a, b) => a - b), 50) : NaN };
  };
  return { segment, close };
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const n = opts.full ? 2000 : 500;
  const load = () => `load ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`;
  const rows: BenchRow[] = [];
  const disk = await floor(os.tmpdir(), n);
  rows.push({ figure: "commit floor, 3 processes: ZeroMQ + fsync'd LMDB only, p50", value: pct(disk, 50), unit: "ms", better: "lower", note: `p99 ${pct(disk, 99).toFixed(2)} ms; ${n} entries one at a time, no brine code: what bench/cluster's Raft commit p50 would be if everything above the OS cost nothing; ${load()}` });
  if (existsSync(TMPFS)) {
    const mem = await floor(TMPFS, n);
    rows.push({ figure: "commit floor, the same on tmpfs (fsync free), p50", value: pct(mem, 50), unit: "ms", better: "lower", note: `p99 ${pct(mem, 99).toFixed(2)} ms; ${load()}` });
  }
  // what libzmq's I/O threads add: the same exchange over plain TCP, each socket read and written by its process's
  // own thread (two thread wake-ups fewer per leg)
  const netDisk = await floor(os.tmpdir(), n, "net");
  rows.push({ figure: "commit floor over plain TCP (node:net, no libzmq), p50", value: pct(netDisk, 50), unit: "ms", better: "lower", note: `p99 ${pct(netDisk, 99).toFixed(2)} ms; on disk as the first row; ${load()}` });
  if (existsSync(TMPFS)) {
    const netMem = await floor(TMPFS, n, "net");
    rows.push({ figure: "commit floor over plain TCP on tmpfs, p50", value: pct(netMem, 50), unit: "ms", better: "lower", note: `p99 ${pct(netMem, 99).toFixed(2)} ms; ${load()}` });
  }
  return rows;
}
