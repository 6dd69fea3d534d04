/** The messages that cross between the main thread and the request workers. */
import type { MessagePort } from "node:worker_threads";
import type { RunnerLaunch } from "./context.js";

/** `clear`: sign-ins and the clear commands of CLIs and the API; `req`: every AES request of minions. */
export type Lane = "clear" | "req";

/** One batch of request bodies for one lane; the worker answers each in order. */
export interface BatchTask {
  kind: "batch";
  frames: Uint8Array[];
  /** when each frame reached the main thread (ms since the epoch) */
  arrivals: number[];
  /**
   * A frame that waited longer than this is answered "retry later" without being worked on (0: never).
   * Used on the clear lane: a minion gives up on a sign-in after auth_timeout (5 s) and sends a new
   * one, so the RSA work for a stale one would be wasted exactly when the master is busiest.
   */
  staleMs: number;
  /**
   * With `staleMs`: per frame, the request port's connection it came on (its routing id on the conn board,
   * src/shared/conn-board.ts; -1 none). A frame whose connection has closed is answered like a stale one, unworked:
   * its minion gave up on it (3007.x closes a timed-out request's connection and resends on a new one).
   */
  conns?: number[];
  /** per frame, where it came from when the main thread knows (audit lines, per-source login throttling) */
  sources?: (string | null)[];
  /** this batch's number in its lane: its parts (BatchPart) name it */
  batch: number;
}

/**
 * Replies of a batch that went before the whole batch was ready (worker.ts, batch-replies.ts), posted by the
 * worker on its lane's BroadcastChannel as soon as they became ready, with the effects fired since the last
 * part (events before their replies, as for a batch). One worker posts a batch's parts in order on one
 * channel; the batch's result then carries no reply (`streamed`).
 */
export interface BatchPart extends Omit<BatchResult, "replies" | "streamed" | "seq" | "indices"> {
  batch: number;
  /** this message's place among the batch's parts and results (applied in that order) */
  seq: number;
  /** the frames answered, by index in the batch, and their replies, in the same order (two flat arrays clone cheaper than pairs) */
  indices: number[];
  replies: Uint8Array[];
}

/**
 * Background maintenance that needs the store: job cache cleanup, or who is connected (presence); `ready`
 * answers once the worker that runs it has loaded (its MasterContext built: keys parsed, LMDB opened).
 */
export type MaintenanceTask = { kind: "cleanup"; nowMs: number } | { kind: "presence" } | { kind: "ready" } | AttachTask;

/**
 * The clear lane's direct port to the worker that runs this task (src/main-thread/direct-ports.ts): its batches
 * come on it and their results go back on it, past Piscina's task machinery.
 */
export interface AttachTask {
  kind: "attach";
  port: MessagePort;
}

/** The answer to an `attach` task: which worker, and whether it took the port (false: it has one already). */
export interface AttachResult {
  thread: number;
  attached: boolean;
}

/** A batch's answer on a direct port: its result, or why the batch failed. */
export type DirectReply = { result: BatchResult; error?: undefined } | { error: string; result?: undefined };

/** The answer to a `ready` task: which worker thread ran it. */
export interface ReadyResult {
  thread: number;
}

export interface PresenceResult {
  present: string[];
}

export interface BatchResult {
  replies: Uint8Array[];
  /** packed event frames, in the order they were fired */
  events: Uint8Array[];
  /** publish loads for the publisher, in order */
  publishes: Record<string, unknown>[];
  /** clustered: encoded cache-sync record batches for the peers (src/shared/sync-outbox.ts) */
  sync?: Uint8Array[];
  /** runner calls authorized clear `runner` requests asked for (the main thread starts them) */
  runs?: RunnerLaunch[];
  /** indices into `events` of the job records this master verified (Effects.verified); absent: none */
  verified?: number[];
  /** clustered: the packed nonces of the requests the batch dispatched (nonce-set.ts packNonces), for the peers */
  nonces?: Uint8Array;
  /**
   * Set when the batch went in parts (BatchPart): this result is one of its messages, applied by the main thread
   * in `seq` order with the parts (they come on another channel); `replies` then answers the frames `indices`.
   */
  seq?: number;
  indices?: number[];
  /** the task ended before the batch's last reply (batchHoldMsMax): the rest come in parts */
  streamed?: true;
  /** what the main thread's reply memory does with some of this message's replies (ReplyMemo) */
  memo?: ReplyMemo;
}

/**
 * The AES requests among a message's replies that have a nonce (src/shared/nonce-replies.ts): `at` their places in
 * the message's `replies`; per request its kind (MEMO_FRESH: remember its reply; MEMO_COPY: a copy of a request
 * seen before, its reply is a placeholder the main thread replaces), its key (nonce and tag), and for a copy its
 * command and minion (the log line of a refusal).
 */
export interface ReplyMemo {
  at: number[];
  kinds: number[];
  keys: string[];
  what: string[];
}

export interface CleanupResult {
  removed: number;
}
