/** Limits of the request lanes shared by the main thread (pool.ts) and the workers (worker.ts). */

/**
 * Longest a batch holds one of its worker's task slots (Piscina's concurrentTasksPerWorker), ms. Replies do
 * not wait for it (each leaves as soon as it is ready: batch-replies.ts); past it the task ends and
 * the frames still running (a runner call can take minutes) answer in parts (BatchPart) without a slot.
 */
export const batchHoldMsMax = 100;
/** A reply still owed by a batch whose task ended, not heard of after this long, is answered with an error (its worker died), ms. */
export const replyOwedMsMax = 10 * 60_000;

/**
 * V8 old-generation bound of each request worker, MiB (node's `resourceLimits.maxOldGenerationSizeMb`, set by the
 * pool: req-pool.ts): what V8 gives a thread by default on a host with 16 GiB or more (4,144 MiB on this project's
 * box), named so that the decode budget's margin does not depend on the host. A worker that reaches it ends alone
 * (ERR_WORKER_OUT_OF_MEMORY), its batches are answered with an error, and Piscina starts another.
 */
export const requestWorkerHeapMb = 4096;
/**
 * Decoded request data one request worker holds at once, bytes, as decode-budget.ts charges it: a quarter of its
 * heap bound, and above the charge of the largest request the wire limits let through (~583 MiB), so that one is
 * always taken when nothing else is held.
 */
export const decodedHeldBytesMax = 1024 * 1024 * 1024;
