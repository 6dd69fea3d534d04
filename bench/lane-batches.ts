/**
 * Frames run as a request lane worker runs them: batches of batchFramesMax, concurrentTasksPerWorker batches
 * in flight, so LMDB folds the writes of several batches into one durable transaction.
 */
import { batchFramesMax, concurrentTasksPerWorker } from "../src/main-thread/req-pool.js";

/** Runs `each` over frames[from, to) in lane-sized batches; resolves when every batch has. */
export async function inLaneBatches<F>(frames: readonly F[], from: number, to: number, each: (batch: F[]) => Promise<unknown>): Promise<void> {
  let next = from;
  const lane = async () => {
    while (next < to) {
      const i = next;
      next += batchFramesMax;
      await each(frames.slice(i, Math.min(i + batchFramesMax, to)));
    }
  };
  await Promise.all(Array.from({ length: concurrentTasksPerWorker }, lane));
}
