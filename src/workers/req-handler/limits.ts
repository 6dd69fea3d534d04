/** Limits of the request lanes shared by the main thread (pool.ts) and the workers (worker.ts). */

/**
 * Longest a batch holds one of its worker's task slots (Piscina's concurrentTasksPerWorker), ms. Replies do
 * not wait for it (each leaves as soon as it is ready: batch-replies.ts); past it the task ends and
 * the frames still running (a runner call can take minutes) answer in parts (BatchPart) without a slot.
 */
export const batchHoldMsMax = 100;
/** A reply still owed by a batch whose task ended, not heard of after this long, is answered with an error (its worker died), ms. */
export const replyOwedMsMax = 10 * 60_000;
