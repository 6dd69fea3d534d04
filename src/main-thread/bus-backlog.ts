/**
 * What one event-bus subscriber still owes (sans-I/O: the caller gives byte counts and the time). Salt's
 * event publisher (salt/transport/tcp.py PubServer, after saltstack/salt#69995 and #70148) keeps, per
 * subscriber, a queue of writes not yet flushed, at most `pub_server_write_queue_size` (10,000 by default) of them, and
 * waits at most `publish_drain_timeout` (5 s) for each; a subscriber past either bound is disconnected. Before
 * those fixes (3007.x as released) the publisher awaited each subscriber's write in turn, so one subscriber that
 * stopped reading stalled the bus for all, and a burst held one pending task per subscriber per event (20,000
 * events to 8 subscribers: 820 MB).
 *
 * Here the count is of events: each event written to the subscriber's socket is remembered by the offset of
 * its last byte in that socket's stream and the time it was written, until the socket has handed that byte to
 * the kernel (the caller reports the bytes still held by the process: net.Socket's writableLength). An event
 * the kernel took at once is never remembered, so a subscriber that keeps up costs nothing here. The ring is
 * allocated once per subscriber (`queueSize` slots, 16 bytes each).
 */

import { BUS_DROP_REASONS } from "../shared/metrics/labels.js";

export { BUS_DROP_REASONS };
/** Why a subscriber was disconnected (a metric label: bounded). */
export type BusDropReason = (typeof BUS_DROP_REASONS)[number];

export interface BusBacklogLimits {
  /** events written but not yet taken by the kernel before the subscriber is dropped (pub_server_write_queue_size) */
  queueSize: number;
  /** longest an event may wait for the kernel before the subscriber is dropped, ms (publish_drain_timeout) */
  drainTimeoutMs: number;
  /** bytes held by the process for this subscriber before it is dropped (one huge event can pass the count) */
  backlogBytesMax: number;
}

export class SubscriberBacklog {
  /** per waiting event: offset of its last byte in the stream, then the time it was written (ms) */
  private readonly ends: Float64Array;
  private readonly times: Float64Array;
  private head = 0;
  private len = 0;
  /** bytes written to this subscriber since it connected */
  private written = 0;

  constructor(private readonly limits: BusBacklogLimits) {
    this.ends = new Float64Array(limits.queueSize);
    this.times = new Float64Array(limits.queueSize);
  }

  /** Events waiting for the kernel. */
  get waiting(): number {
    return this.len;
  }

  /**
   * Events of `sizes` bytes were written, in order, at `nowMs`; `unsent` bytes of the stream are still held by
   * the process after the write. Returns why the subscriber must be dropped, or undefined to keep it.
   */
  wrote(sizes: readonly number[], unsent: number, nowMs: number): BusDropReason | undefined {
    const start = this.written;
    for (const n of sizes) this.written += n;
    const taken = this.forget(unsent);
    if (unsent > this.limits.backlogBytesMax) return "backlog_bytes";
    let end = start;
    for (const n of sizes) {
      end += n;
      if (end <= taken) continue;
      if (this.len === this.limits.queueSize) return "queue_full";
      const i = (this.head + this.len) % this.limits.queueSize;
      this.ends[i] = end;
      this.times[i] = nowMs;
      this.len++;
    }
    return this.overdue(nowMs);
  }

  /** Nothing written: is the subscriber overdue at `nowMs` with `unsent` bytes still held? */
  check(unsent: number, nowMs: number): BusDropReason | undefined {
    this.forget(unsent);
    if (unsent > this.limits.backlogBytesMax) return "backlog_bytes";
    return this.overdue(nowMs);
  }

  /** Forgets the events the kernel has taken; returns the stream offset taken so far. */
  private forget(unsent: number): number {
    const taken = this.written - unsent;
    while (this.len > 0 && this.ends[this.head]! <= taken) {
      this.head = (this.head + 1) % this.limits.queueSize;
      this.len--;
    }
    return taken;
  }

  private overdue(nowMs: number): BusDropReason | undefined {
    return this.len > 0 && nowMs - this.times[this.head]! > this.limits.drainTimeoutMs ? "drain_timeout" : undefined;
  }
}
