/**
 * What the main thread does with a finished batch of requests, in the one order that keeps Salt's
 * clients and brine's peers right. Every lane result and every part of one (BatchPart) goes through here.
 *
 * 1. events to the local bus: a CLI that publishes subscribes first, so it must see the returns before
 *    any reply could let it conclude (and a `salt/job/<jid>/new` before its returns);
 * 2. publishes to the publisher thread: a job is on the PUB socket before its publisher hears "done";
 * 3. peers (clustered): the same events, with the origin's verified marks and the batch's replay nonces, so a
 *    peer never sees a reply's consequences before the events that caused them (the publishes reach the peers
 *    from the publisher thread, sealed: src/main-thread/cluster/forwarding.ts);
 * 4. cache-sync batches (session keys, data cache) to the peers before the reply that hands a key out;
 * 5. replies, each to the socket or thread it came from;
 * 6. runner threads for the batch's authorized `runner` requests (answered with their jid in step 5).
 *
 * Pure wiring: the sinks are injected, so the order is tested directly (test/master/batch-result-order).
 */
import type { RunnerLaunch } from "../workers/req-handler/context.js";
import type { BatchResult } from "../workers/req-handler/task.js";
import type { LaneOutput } from "./req-pool.js";

/**
 * One lane result (or one part of a batch's replies) as the request pool hands it to the main thread: a worker's
 * BatchResult with each reply paired with the tag of the request it answers.
 */
export type BatchOutput<T> = Omit<BatchResult, "replies" | "streamed" | "seq" | "indices"> & { replies: LaneOutput<T>[] };

/** Where each kind of output goes; `peers` and `sync` are absent on an unclustered master. */
export interface BatchSinks<T> {
  bus(frames: Buffer[]): void;
  publisher(loads: Record<string, unknown>[]): void;
  peers?(events: Uint8Array[], verified?: number[], nonces?: Uint8Array): void;
  sync?(batches: Uint8Array[]): void;
  reply(tag: T, reply: Buffer): void;
  runner(run: RunnerLaunch): void;
}

export function applyBatchResult<T>(out: BatchOutput<T>, sinks: BatchSinks<T>): void {
  sinks.bus(out.events.map((e) => Buffer.from(e.buffer, e.byteOffset, e.byteLength)));
  sinks.publisher(out.publishes);
  sinks.peers?.(out.events, out.verified, out.nonces);
  if (out.sync) sinks.sync?.(out.sync);
  for (const r of out.replies) sinks.reply(r.tag, r.reply);
  for (const run of out.runs ?? []) sinks.runner(run);
}
