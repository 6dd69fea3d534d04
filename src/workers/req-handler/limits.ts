/** Limits of the request lanes shared by the main thread (pool.ts) and the workers (worker.ts). */

/**
 * Longest a batch's result waits for its slowest frame, ms. Past it the frames that are ready are answered
 * and each other one is answered on its own when ready (LateReplies): one slow request (a pillar compile,
 * a write waiting for a busy disk) cannot hold the replies of up to 63 others. Longer than an ordinary
 * batch's group commit, so a batch of returns is still one message.
 */
export const batchHoldMsMax = 100;
/** A late reply not heard of after this long is answered with an error (its worker died), ms. */
export const lateReplyMaxMs = 10 * 60_000;
