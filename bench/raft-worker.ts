/**
 * Raft worker figures (reference-points.md B7: commit p50 <= 2 ms, >= 10k entries/s/node batched): commit
 * throughput and latency of a one-voter cluster group through the real worker thread, its messages (api.ts)
 * and LMDB with group commit (one fsync per pump iteration, whatever it carries). Also the raw durable LMDB
 * commit of this disk, the floor under every commit latency, and the caller's hop to the worker (issue 17:
 * ≤ 0.2 ms): a commit timed by the caller against the worker's own timing of the same commits, and the round
 * trip of calls that do no Raft work (`status`, a stale read of the routing table). `npm run bench` prints these rows;
 * `node dist/bench/raft-worker.js` prints them alone.
 *
 * The machine's load average is in the notes: on a shared 2-core box the figures move with it.
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { open } from "lmdb";
import type { ClusterEntry } from "../src/workers/raft/state-machines/entries.js";
import { createRingBuffer } from "../src/shared/sab-ring/layout.js";
import { RaftClient } from "../src/workers/raft/client.js";
import type { RaftWorkerInit } from "../src/workers/raft/worker.js";
import type { BenchOptions, BenchRow } from "./types.js";

const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d;
const pct = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
const load = (): string => `load ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`;

/** Small ROUTE entries over 8 data types: each applies (routing table) and republishes routes if changed. */
function entry(i: number): ClusterEntry {
  return { kind: "ROUTE", value: { data_type: `bench${i % 8}`, ring_id: i % 16 < 8 ? null : "cluster" } };
}

/**
 * Keeps `inFlight` calls running until `total` entries committed; each call takes the next `step` entries.
 * Returns entries/s and per-call latencies (ms, sorted).
 */
async function closedLoop(
  total: number,
  inFlight: number,
  step: number,
  call: (first: number, n: number) => Promise<void>,
): Promise<{ rate: number; lat: number[] }> {
  let claimed = 0;
  const lat: number[] = [];
  const t0 = performance.now();
  const lane = async () => {
    while (claimed < total) {
      const first = claimed;
      const n = Math.min(step, total - first);
      claimed += n; // claimed before the await: every lane takes distinct entries
      const t = performance.now();
      await call(first, n);
      lat.push(performance.now() - t);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  const s = (performance.now() - t0) / 1000;
  return { rate: total / s, lat: lat.sort((a, b) => a - b) };
}

/** p50 of one small durable LMDB transaction on this disk, ms (overlappingSync off, as the Raft env). */
export async function rawLmdbCommitMs(dir: string, n: number): Promise<number> {
  const db = open({ path: path.join(dir, "raw"), overlappingSync: false, compression: false });
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await db.put(i % 64, { i, pad: "x".repeat(40) });
    lat.push(performance.now() - t);
  }
  await db.close();
  return pct(lat.sort((a, b) => a - b), 0.5);
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-bench-raft-"));
  const init: RaftWorkerInit = {
    nodeId: "bench-node",
    ringBuffer: createRingBuffer(),
    dir: path.join(dir, "raft"),
    founders: ["bench-node"],
    log: { level: "warning", file: null, fileLevel: null },
  };
  const worker = new Worker(new URL("../src/workers/raft/worker.js", import.meta.url), { workerData: init });
  const raft = new RaftClient(worker);
  try {
    await raft.ready();
    const total = opts.full ? 200_000 : 40_000;
    const one = async (i: number) => void (await raft.propose("cluster", entry(i)));
    // warm-up: JIT, LMDB map growth
    await closedLoop(4_000, 256, 1, one);

    // one at a time, 256 of them: the worker's latency window (its last 256) then holds exactly these
    const seq = await closedLoop(256, 1, 1, one);
    const inWorker = (await raft.status()).groups[0]!.commitLatency;
    const hops = opts.full ? 5_000 : 2_000;
    const statusRt = await closedLoop(hops, 1, 1, async () => void (await raft.status()));
    const staleRt = await closedLoop(hops, 1, 1, async () => void (await raft.read("cluster", "routing", { stale: true })));
    const single = await closedLoop(total, 512, 1, one);
    const BATCH = 256;
    const before = await raft.status();
    const batched = await closedLoop(total, 8, BATCH, async (first, n) => {
      const res = await raft.proposeMany("cluster", Array.from({ length: n }, (_, k) => entry(first + k)));
      if (res.some((r) => r instanceof Error)) throw new Error("a batched proposal failed");
    });
    const status = await raft.status();
    const g = status.groups[0]!;
    const perCommit = (status.entriesWritten - before.entriesWritten) / Math.max(1, status.commits - before.commits);
    const fsync = await rawLmdbCommitMs(dir, opts.full ? 500 : 100);
    const note = load();
    return [
      {
        figure: "raft worker commit p50, 1 in flight (LMDB fsync)",
        value: round(pct(seq.lat, 0.5)),
        unit: "ms",
        target: 2,
        better: "lower",
        note: `p99 ${round(pct(seq.lat, 0.99))} ms; ${note}`,
      },
      {
        figure: "  of which: inside the worker, p50",
        value: round(inWorker?.p50Ms ?? NaN, 3),
        unit: "ms",
        better: "lower",
        note: `the worker's own timing of the same ${inWorker?.samples ?? 0} commits (proposal taken → durable, applied, answered); with the fsync's spread the difference of the two p50s is not the hop: the round trips below are`,
      },
      {
        figure: "caller's hop: a status call's round trip, p50",
        value: round(pct(statusRt.lat, 0.5), 3),
        unit: "ms",
        target: 0.2,
        better: "lower",
        note: `${hops} calls one at a time, no Raft work; p99 ${round(pct(statusRt.lat, 0.99), 3)} ms`,
      },
      {
        figure: "caller's hop: a stale read's round trip, p50",
        value: round(pct(staleRt.lat, 0.5), 3),
        unit: "ms",
        target: 0.2,
        better: "lower",
        note: `${hops} reads of the routing table one at a time (committed state, no ReadIndex round); p99 ${round(pct(staleRt.lat, 0.99), 3)} ms`,
      },
      {
        figure: "raft worker entries/s, 512 propose() calls in flight",
        value: Math.round(single.rate),
        unit: "entries/s",
        target: 10_000,
        better: "higher",
        note: `calls coalesced per event-loop turn, group commit; call p50 ${round(pct(single.lat, 0.5))} ms; ${note}`,
      },
      {
        figure: `raft worker entries/s, proposeMany x${BATCH}, 8 in flight`,
        value: Math.round(batched.rate),
        unit: "entries/s",
        target: 10_000,
        better: "higher",
        note: `each entry its own log entry; ${Math.round(perCommit)} entries per fsync; call p50 ${round(pct(batched.lat, 0.5))} ms; ${note}`,
      },
      {
        figure: "LMDB durable commit p50 (1 small put, this disk)",
        value: round(fsync, 3),
        unit: "ms",
        better: "lower",
        note: `the floor under commit latency; snapshots taken up to index ${g.snapshotIndex} of ${g.commit}`,
      },
    ];
  } finally {
    try {
      await raft.close();
    } finally {
      raft.dispose();
      await worker.terminate();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await run({ full: process.argv.includes("--full") });
  for (const r of rows) {
    const target = r.target === undefined ? "" : `  (target ${r.better === "higher" ? ">=" : "<="} ${r.target} ${r.unit})`;
    console.log(`${r.figure.padEnd(56)} ${String(r.value).padStart(9)} ${r.unit}${target}${r.note ? `  ${r.note}` : ""}`);
  }
}
