/**
 * The return path of bench/request-paths.ts, run in a worker thread as a request lane's thread runs it
 * (src/workers/req-handler/): a MasterContext of its own on the bench's config and shared buffers, frames in
 * lane-sized batches (lane-batches.ts).
 * The parent asks for one round at a time (so it can alternate rounds with its own reference measurement);
 * each answer carries the round's wall time and this thread's CPU time.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { MasterConfig } from "../src/shared/config/defaults.js";
import { configureLogging } from "../src/shared/log.js";
import { MasterContext, newEffects, type SharedBuffers } from "../src/workers/req-handler/context.js";
import { handleRequest } from "../src/workers/req-handler/request.js";
import { decodeWire } from "../src/shared/protocol/msgpack.js";
import { cpuSecondsOf } from "../tools/swarm/proc-stats.js";
import { inLaneBatches } from "./lane-batches.js";

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

function runFrames(from: number, to: number): Promise<void> {
  return inLaneBatches(frames, from, to, (batch) => {
    const fx = newEffects();
    return Promise.all(batch.map((f) => handleRequest(ctx, f, fx)));
  });
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
