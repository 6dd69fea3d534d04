/**
 * The outbound side's request correlation (peer-transport.ts writes, this file waits): every request sent to
 * a peer is registered here before it is queued, and settled exactly once, by its answer (RES/ERR on the
 * connection it was written on), its timeout, the loss of that connection, or the transport's close. A
 * request's id is unique per transport; a late answer (after a timeout) finds nothing and is dropped.
 */
import { BrineError } from "../../../shared/errors.js";
import type { CoarseTimer, TimerHandle } from "../../../shared/coarse-timer.js";
import { BODY, encodeBody, type Body } from "./framing.js";
import type { OutItem } from "./out-queue.js";
import { PeerRemoteError } from "./peer-types.js";

/** What a request needs of the link it goes out on: the peer's id and the link's set of requests in flight. */
export interface RequestLink {
  readonly id: string | undefined;
  readonly inFlight: Set<number>;
}

interface Pending {
  link: RequestLink;
  resolve: (v: Uint8Array) => void;
  reject: (e: Error) => void;
  timer: TimerHandle;
  item: OutItem;
  /** the connection generation it was written on; undefined while queued */
  sentGen: number | undefined;
}

export class PendingRequests {
  private readonly pending = new Map<number, Pending>();
  private nextRequestId = 1;

  constructor(private readonly timer: CoarseTimer) {}

  /**
   * Registers a request on `link` and returns the queue item that carries it (registered before it is
   * queued, so the writer always finds it; a refused enqueue undoes it with settle). After `timeoutMs` it
   * rejects with CLUSTER_PEER_TIMEOUT and is not written if still queued.
   */
  open(link: RequestLink, channel: string, payload: Uint8Array, timeoutMs: number, resolve: (v: Uint8Array) => void, reject: (e: Error) => void): OutItem {
    const id = this.nextRequestId++;
    const item: OutItem = { body: encodeBody({ kind: BODY.REQ, channel, id, payload }), requestId: id, cancelled: false };
    const timer = this.timer.after(timeoutMs, () => {
      if (!this.settle(id)) return;
      item.cancelled = true;
      reject(new BrineError("CLUSTER_PEER_TIMEOUT", `${channel} to ${link.id} after ${timeoutMs} ms`));
    });
    this.pending.set(id, { link, resolve, reject, timer, item, sentGen: undefined });
    link.inFlight.add(id);
    return item;
  }

  /** False for an item that must not be written (its request timed out while queued); marks requests sent on connection `gen`. */
  markWritten(item: OutItem, gen: number): boolean {
    if (item.cancelled) return false;
    if (item.requestId === 0) return true;
    const p = this.pending.get(item.requestId);
    if (!p) return false;
    p.sentGen = gen;
    return true;
  }

  /** An answer read on `link`: settles its request (one of ours on that link), or is dropped. */
  answer(link: RequestLink, body: Extract<Body, { kind: typeof BODY.RES | typeof BODY.ERR }>): void {
    const p = this.pending.get(body.id);
    if (!p || p.link !== link) return; // late (timed out) or not ours: nothing waits for it
    this.settle(body.id);
    if (body.kind === BODY.RES) p.resolve(body.payload);
    else p.reject(new PeerRemoteError(link.id!, body.code, body.text));
  }

  /** Removes a pending request's bookkeeping; false when it was already settled. */
  settle(id: number): boolean {
    const p = this.pending.get(id);
    if (!p) return false;
    this.pending.delete(id);
    p.timer.cancel();
    p.link.inFlight.delete(id);
    return true;
  }

  /** Fails the requests of `link` written on connection `gen` (it dropped: they may or may not have run). */
  failWrittenOn(link: RequestLink, gen: number, err: () => Error): void {
    for (const id of [...link.inFlight]) {
      const p = this.pending.get(id);
      if (p && p.sentGen === gen) this.fail(id, err());
    }
  }

  /** Fails every pending request (the transport closes). */
  failAll(err: () => Error): void {
    for (const id of [...this.pending.keys()]) this.fail(id, err());
  }

  private fail(id: number, err: Error): void {
    const p = this.pending.get(id);
    if (p && this.settle(id)) p.reject(err);
  }
}
