/**
 * The return path of bench/request-paths.ts, run in a worker thread with a request thread's V8 heap limits
 * (src/workers/req-handler/pool.ts): a MasterContext of its own on the bench's config and shared buffers,
 * batches of batchFramesMax frames, concurrentTasksPerWorker batches in flight, as a lane worker runs them.
 * The parent asks for one round at a time (so it can alternate rounds with its own reference measurement);
 * each answer carries the round's wall time and this thread's CPU time.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { MasterConfig } from "../src/config/defaults.js";
import { configureLogging } from "../src/log.js";
import { MasterContext, newEffects, type SharedBuffers } from "../src/master/context.js";
import { handleRequest } from "../src/master/request.js";
import { decodeWire } from "../src/protocol/msgpack.js";
import { cpuSecondsOf } from "../src/swarm/proc-stats.js";
import { batchFramesMax, concurrentTasksPerWorker } from "../src/workers/req-handler/pool.js";

export interface ReturnThreadData {
  cfg: MasterConfig;
  shared: SharedBuffers;
  frames: Uint8Array[];
}
/** parent → thread: run frames [from, to); or check that the first frame is now refused as a replay */
export type ReturnThreadAsk = { kind: "round"; from: number; to: number } | { kind: "replay-check" };
/** thread → parent */
export type ReturnThreadAnswer = { kind: "round"; ns: number; cpuUs: number | undefined } | { kind: "replay-check"; reply: unknown };

const { cfg, shared, frames: raw } = workerData as ReturnThreadData;
configureLogging({ level: "quiet" });
const ctx = new MasterContext(cfg, shared);
const frames = raw.map((f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength));

function threadCpuUs(): number | undefined {
  const s = cpuSecondsOf("/proc/thread-self/stat");
  return s === undefined ? undefined : s * 1e6;
}

async function runFrames(from: number, to: number): Promise<void> {
  let next = from;
  const lane = async () => {
    while (next < to) {
      const i = next;
      next += batchFramesMax;
      const fx = newEffects();
      await Promise.all(frames.slice(i, Math.min(i + batchFramesMax, to)).map((f) => handleRequest(ctx, f, fx)));
    }
  };
  await Promise.all(Array.from({ length: concurrentTasksPerWorker }, lane));
}

parentPort!.on("message", (ask: ReturnThreadAsk) => {
  void (async () => {
    if (ask.kind === "replay-check") {
      const reply = decodeWire(await handleRequest(ctx, frames[0]!, newEffects()));
      parentPort!.postMessage({ kind: "replay-check", reply } satisfies ReturnThreadAnswer);
      return;
    }
    const c0 = threadCpuUs();
    const t0 = process.hrtime.bigint();
    await runFrames(ask.from, ask.to);
    const ns = Number(process.hrtime.bigint() - t0);
    const c1 = threadCpuUs();
    parentPort!.postMessage({ kind: "round", ns, cpuUs: c0 === undefined || c1 === undefined ? undefined : c1 - c0 } satisfies ReturnThreadAnswer);
  })();
});
