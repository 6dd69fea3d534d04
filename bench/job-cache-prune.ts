/**
 * The keep_jobs prune's share of bench/job-cache-scale.ts (issue 17: "no stall over 10 ms on the return path"): the
 * prune and the durable return writes it could hold run in a worker thread as a request worker runs them
 * (job-cache-prune-thread.ts), on a job cache the bench's main thread filled; this side asks for the rounds and
 * turns the answers into rows and verdicts.
 */
import { Worker } from "node:worker_threads";
import type { StoreConfig } from "../src/lib/store/lmdb-env.js";
import { prunePassRecordsMax } from "../src/lib/store/job-cache.js";
import type { PruneThreadData, ThreadAnswer, ThreadAsk } from "./job-cache-prune-thread.js";
import type { BenchRow } from "./types.js";

/** A write longer than this is a stall (the goal's), and is taken apart (job-cache-prune-thread.ts), ms. */
export const slowMs = 10;

/** What a test.ping return stores (the record a request worker writes for `_return`). */
export const pingReturn = { return: true, retcode: 0, success: true, fun: "test.ping", fun_args: [] };

/** Runs `asks` one after another in one request-worker-like thread on the store at `store`; their answers. */
export async function pruneInThread(store: StoreConfig, now: number, asks: readonly ThreadAsk[]): Promise<ThreadAnswer[]> {
  const thread = new Worker(new URL("./job-cache-prune-thread.js", import.meta.url), { workerData: { store, now } satisfies PruneThreadData });
  const ask = <T>(q: ThreadAsk | "close") =>
    new Promise<T>((resolve, reject) => {
      thread.once("message", (m: T | { error: string }) => (m && typeof m === "object" && "error" in m ? reject(new Error(`prune thread: ${m.error}`)) : resolve(m as T)));
      thread.once("error", reject);
      thread.postMessage(q);
    }).finally(() => thread.removeAllListeners("error"));
  try {
    const out: ThreadAnswer[] = [];
    for (const q of asks) {
      const a = await ask<ThreadAnswer>(q);
      if (a.left !== 0) throw new Error(`prune: ${a.left} records older than the cutoff left after it said done`);
      out.push(a);
    }
    await ask<string>("close");
    return out;
  } finally {
    await thread.terminate();
  }
}

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * q))]!;
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
const over = (xs: number[]) => xs.filter((x) => x > slowMs).length;
const spread = (xs: number[]) => `p50 ${quantile(xs, 0.5).toFixed(2)}, p99 ${quantile(xs, 0.99).toFixed(1)}, p99.9 ${quantile(xs, 0.999).toFixed(1)}, max ${Math.max(...xs).toFixed(1)} ms; ${over(xs)} of ${xs.length} over ${slowMs} ms`;

/**
 * Each write over slowMs put down to one cause: "GC" when this thread's GC during it is what took it over slowMs
 * (it is ≤ slowMs without the pause), else "CPU wait" when its wait for a CPU is, else "prune" when the deletes its
 * turn issued are, else "LMDB/disk" (the commit's and fsync's own threads and the disk: what the thread does not see).
 */
export function causes(a: ThreadAnswer, during: boolean): string {
  const c = { GC: 0, "CPU wait": 0, prune: 0, "LMDB/disk": 0 };
  for (const s of a.slow.filter((x) => x.during === during)) {
    const excess = s.ms - slowMs;
    if (s.gcMs >= excess) c.GC++;
    else if (s.cpuWaitMs >= excess) c["CPU wait"]++;
    else if (s.reclaimMs >= excess) c.prune++;
    else c["LMDB/disk"]++;
  }
  return Object.entries(c).map(([k, v]) => `${k} ${v}`).join(", ");
}

/**
 * The count of writes over slowMs the prune may have without being said to add to them: the no-prune window's
 * count scaled to the writes made during the prune, plus three standard deviations of a Poisson count of that
 * mean (at least 1): rare stalls come and go with the box, and a verdict that fails on one more of them says nothing.
 */
export function overAllowed(quietOver: number, quietWrites: number, duringWrites: number): number {
  const expected = quietWrites > 0 ? (quietOver * duringWrites) / quietWrites : 0;
  return expected + 3 * Math.sqrt(Math.max(expected, 1));
}

/** The rows of one round (`label`: the medium and the writer). */
export function roundRows(label: string, recordsLabel: string, reclaimMax: number, a: ThreadAnswer): BenchRow[] {
  const passes = a.passMs.length ? `; ${a.passMs.length} passes of its own (≤ ${prunePassRecordsMax} records), longest ${Math.max(...a.passMs).toFixed(1)} ms to its commit, ${Math.max(...a.passHoldMs).toFixed(2)} ms in the thread` : "; no pass of its own";
  const gc = `writer thread's GC: ${a.gcCount} pauses, longest ${a.gcMaxMs.toFixed(1)} ms; its CPU ${a.cpuS.toFixed(1)} s`;
  return [
    { figure: `keep_jobs prune of ${recordsLabel} on ${label}: time`, value: a.pruneMs / 1000, unit: "s", better: "lower", note: `${a.result.alongside} records deleted alongside returns (≤ ${reclaimMax} each)${passes}; ${gc}; data.mdb ${mib(a.fileBytes[0])} → ${mib(a.fileBytes[1])} MiB during the prune` },
    { figure: `  ${label}: the prune's deletes in one return's turn: max`, value: a.reclaimUsMax / 1000, unit: "ms", better: "lower", note: `mean ${(a.reclaimCalls ? a.reclaimUsSum / a.reclaimCalls : 0).toFixed(1)} µs over ${a.reclaimCalls} returns during the prune; over ${slowMs} ms: ${a.carrying[1]} of ${a.carrying[0]} returns that carried deletes, ${a.plain[1]} of ${a.plain[0]} that carried none` },
    { figure: `  ${label}: a durable return write, no prune: max`, value: Math.max(...a.quiet), unit: "ms", better: "lower", note: `${spread(a.quiet)} (${causes(a, false)})` },
    { figure: `  ${label}: a durable return write during the prune: max`, value: Math.max(...a.during), unit: "ms", better: "lower", note: `${spread(a.during)} (${causes(a, true)})` },
  ];
}

/**
 * Issue 17's verdict for one round, two rows that can each fail:
 * 1. the prune's own hold of the writer's thread: the longest any one of its turns there (a return's deletes, the
 *    issue of a pass of its own) took, less the thread's GC and its wait for a CPU in it, ≤ slowMs (turns under
 *    1 ms are not kept: read as 0); the longest turn is printed with its GC, CPU wait and time on a CPU (the rest
 *    of it the thread was blocked: a page fault read from the disk, a lock);
 * 2. writes over slowMs during the prune ≤ overAllowed(the no-prune window's count, scaled to as many writes).
 */
export function verdictRows(label: string, a: ThreadAnswer): BenchRow[] {
  const w = a.worstTurn;
  const allowed = overAllowed(over(a.quiet), a.quiet.length, a.during.length);
  return [
    { figure: `verdict, ${label}: the prune's longest turn in the writer's thread (a return's deletes, a pass) less GC and CPU wait ≤ ${slowMs} ms`, value: a.worstOwnMs, unit: "ms", target: slowMs, better: "lower", note: `the longest turn ${w.ms.toFixed(1)} ms, of it this thread's GC ${w.gcMs.toFixed(1)} ms and its wait for a CPU ${w.cpuWaitMs.toFixed(1)} ms, on a CPU ${w.onCpuMs.toFixed(1)} ms, ${w.majorFaults} page faults read from the disk, ${w.sleeps} sleeps (with none, the time neither on a CPU nor waiting for one is the host not running this VM: steal)` },
    { figure: `verdict, ${label}: writes over ${slowMs} ms during the prune ≤ the no-prune count scaled + 3σ`, value: over(a.during), unit: "writes", target: allowed, better: "lower", note: `${over(a.quiet)} of ${a.quiet.length} without, ${a.during.length} during: ${((over(a.quiet) * a.during.length) / Math.max(1, a.quiet.length)).toFixed(1)} expected` },
  ];
}
