/**
 * The listening side of the peer channel's I/O shell: the ROUTER socket bound on
 * `interface:cluster_pool_port`. It answers handshakes as the responder (at most pendingHandshakesMax
 * unauthenticated at a time, each within handshakeTimeoutMs), keeps one session per peer (a reconnect
 * replaces the old one), hands messages and requests to the channel handlers, and writes the replies back on
 * the connection and session their request came on. A connection it accepted never starts traffic: the
 * peer's messages and requests arrive here, their answers leave here (docs/PEER-CHANNEL.md §1).
 *
 * Replies are sealed when written, in queue order, so each session's sequence numbers leave in increasing
 * order; a reply that cannot be written is dropped and counted, never re-sent.
 */
import type { Router } from "zeromq";
import { BrineError, isBrineError } from "../../../shared/errors.js";
import type { Logger } from "../../../shared/log.js";
import type { CoarseTimer, TimerHandle } from "../../../shared/coarse-timer.js";
import { BODY, DATA_OVERHEAD_BYTES, FRAME, encodeBody, encodeClear, joinBodies, type Body } from "./framing.js";
import { HandshakeError, ResponderHandshake, type HandshakeContext } from "./handshake.js";
import { JOIN_FRAME } from "./join.js";
import type { PeerLimits } from "./limits.js";
import type { LogBudget } from "../../../shared/log-budget.js";
import { Fifo } from "./out-queue.js";
import type { PeerCounters, PeerHandler, RefusedInfo } from "./peer-types.js";
import type { Session } from "./session.js";
import type { StageSink } from "../../../shared/metrics/stage-clock.js";

/** What the listening side needs of the transport (PeerTransport). */
export interface ListenerHost {
  readonly selfId: string;
  readonly limits: PeerLimits;
  readonly counters: PeerCounters;
  readonly log: Logger;
  readonly budget: LogBudget;
  readonly timer: CoarseTimer;
  readonly stages: StageSink;
  readonly handshake: HandshakeContext;
  /** the channel handlers, by channel */
  readonly handlers: ReadonlyMap<string, PeerHandler>;
  isClosed(): boolean;
  /** opens and decodes a DATA frame; no bodies for anything refused (counted and logged) */
  openData(session: Session, frame: Buffer, from: string): Body[];
  /** counts, logs and reports a refused peer */
  refused(info: RefusedInfo): void;
  /**
   * The join exchange of an isolated-filesystem cluster (join.ts): a JOIN frame from connection `conn`, answered
   * with the frame to send back (none: nothing). Absent: JOIN frames are counted and dropped.
   */
  joinFrame?(conn: string, frame: Uint8Array): Promise<Uint8Array | undefined>;
  /** a peer's connection to us completed its handshake: it is up, whatever our own link's backoff says */
  inboundUp?(peerId: string): void;
}

/** join exchanges in progress at once on one listener, count (each holds an ephemeral key and waits on a commit) */
const joinsInFlightMax = 16;

interface InboundConn {
  rid: Buffer;
  key: string;
  hs: ResponderHandshake | undefined;
  session: Session | undefined;
  peerId: string | undefined;
  deadline: TimerHandle | undefined;
  /** requests whose handler has not answered */
  running: number;
  /** replies sealed and waiting for the ROUTER */
  queuedReplies: number;
}

/** What waits for the ROUTER: a clear handshake frame, or a reply body to seal under `session` when written. */
type RouterItem = { conn: InboundConn; clear: Uint8Array } | { conn: InboundConn; body: Uint8Array; session: Session };

export class PeerListener {
  private router: Router | undefined;
  /** connections by routing id (hex) */
  private readonly inbound = new Map<string, InboundConn>();
  /** the authenticated connection of each peer */
  private readonly inboundByPeer = new Map<string, InboundConn>();
  private pendingHandshakes = 0;
  private readonly routerOut = new Fifo<RouterItem>();
  private routerWriting = false;
  private routerFlushScheduled = false;

  constructor(private readonly h: ListenerHost) {}

  /** Starts serving on a bound ROUTER socket. */
  attach(router: Router): void {
    this.router = router;
    void this.readRouter(router);
  }

  /** Drops every connection and what waits for the ROUTER, and closes it. */
  close(): void {
    for (const conn of this.inbound.values()) this.dropInbound(conn);
    this.routerOut.clear();
    // no unbind(): zeromq.js runs it on a libuv worker thread while this thread may still use the socket,
    // which libzmq does not allow (it aborted in testing). close() releases the port shortly after, on
    // libzmq's I/O thread; start() retries a bind that finds the port still taken (bindRetryMs).
    this.router?.close();
    this.router = undefined;
  }

  private async readRouter(router: Router): Promise<void> {
    try {
      for await (const parts of router) {
        if (this.h.isClosed()) return;
        if (parts.length !== 2) {
          this.h.counters.badFrames++;
          continue;
        }
        const t = this.h.stages.now();
        this.onInboundFrame(parts[0]!, parts[1]!);
        this.h.stages.add("peer.in", t);
      }
    } catch (e) {
      if (!this.h.isClosed()) this.h.log.error(`peer channel: listening socket failed: ${(e as Error).message}`);
    }
  }

  private onInboundFrame(rid: Buffer, frame: Buffer): void {
    const key = rid.toString("hex");
    const conn = this.inbound.get(key);
    const type = frame[0];
    if (type === FRAME.HELLO) {
      if (conn) {
        this.refuseInbound(conn, new HandshakeError("state", conn.peerId, "second HELLO on one connection"));
        return;
      }
      this.onHello(rid, key, frame);
      return;
    }
    if (type === JOIN_FRAME) {
      this.onJoinFrame(rid, key, frame);
      return;
    }
    if (!conn) {
      this.h.counters.unauthenticatedFrames++;
      return;
    }
    if (type === FRAME.AUTH && conn.hs) {
      this.onAuth(conn, frame);
      return;
    }
    if (type !== FRAME.DATA || !conn.session) {
      this.h.counters.unauthenticatedFrames++;
      return;
    }
    const session = conn.session;
    for (const body of this.h.openData(session, frame, `from ${conn.peerId}`)) this.dispatch(conn, session, body);
  }

  private joinsInFlight = 0;

  /** A join frame: handed to the join responder (never holds a session; answered in the clear). */
  private onJoinFrame(rid: Buffer, key: string, frame: Buffer): void {
    const handler = this.h.joinFrame;
    if (!handler || this.joinsInFlight >= joinsInFlightMax) {
      this.h.counters.unauthenticatedFrames++;
      return;
    }
    this.joinsInFlight++;
    const conn: InboundConn = { rid, key, hs: undefined, session: undefined, peerId: undefined, deadline: undefined, running: 0, queuedReplies: 0 };
    handler
      .call(this.h, key, frame)
      .then((reply) => {
        if (reply) this.writeRouter({ conn, clear: reply });
      })
      .catch((e: unknown) => this.h.log.error(`peer channel: join frame failed: ${(e as Error).message}`))
      .finally(() => this.joinsInFlight--);
  }

  private onHello(rid: Buffer, key: string, frame: Buffer): void {
    const conn: InboundConn = { rid, key, hs: undefined, session: undefined, peerId: undefined, deadline: undefined, running: 0, queuedReplies: 0 };
    if (this.pendingHandshakes >= this.h.limits.pendingHandshakesMax) {
      this.refuseInbound(conn, new HandshakeError("state", undefined, `${this.pendingHandshakes} handshakes already in progress (pendingHandshakesMax)`));
      return;
    }
    const hs = new ResponderHandshake(this.h.handshake);
    let welcome: Uint8Array;
    try {
      welcome = hs.onHello(frame);
    } catch (e) {
      this.refuseInbound(conn, e instanceof HandshakeError ? e : new HandshakeError("bad-frame", undefined, (e as Error).message));
      return;
    }
    conn.hs = hs;
    conn.peerId = hs.peerId;
    this.inbound.set(key, conn);
    this.pendingHandshakes++;
    conn.deadline = this.h.timer.after(this.h.limits.handshakeTimeoutMs, () => {
      if (conn.hs) this.dropInbound(conn);
    });
    this.writeRouter({ conn, clear: welcome });
  }

  private onAuth(conn: InboundConn, frame: Buffer): void {
    const hs = conn.hs!;
    let out: { confirm: Uint8Array; session: Session };
    try {
      out = hs.onAuth(frame);
    } catch (e) {
      this.refuseInbound(conn, e instanceof HandshakeError ? e : new HandshakeError("bad-frame", conn.peerId, (e as Error).message));
      return;
    }
    conn.hs = undefined;
    this.pendingHandshakes--;
    conn.deadline?.cancel();
    conn.deadline = undefined;
    conn.session = out.session;
    const peerId = out.session.peerId;
    // one inbound session per peer: a reconnect (new connection, new routing id) replaces the old one
    const old = this.inboundByPeer.get(peerId);
    if (old && old !== conn) this.dropInbound(old);
    this.inboundByPeer.set(peerId, conn);
    this.h.log.info(`peer channel: session ${out.session.id} from ${peerId} established`);
    this.writeRouter({ conn, clear: out.confirm });
    this.h.inboundUp?.(peerId);
  }

  private refuseInbound(conn: InboundConn, e: HandshakeError): void {
    this.h.refused({ direction: "inbound", claimedId: e.claimedId, reason: e.reason, detail: e.message });
    this.writeRouter({ conn, clear: encodeClear(FRAME.REFUSE, { reason: e.reason }) });
    this.dropInbound(conn);
  }

  private dropInbound(conn: InboundConn): void {
    if (conn.hs) {
      conn.hs.abort();
      conn.hs = undefined;
      this.pendingHandshakes--;
    }
    conn.deadline?.cancel();
    conn.session?.destroy();
    conn.session = undefined;
    if (this.inbound.get(conn.key) === conn) this.inbound.delete(conn.key);
    if (conn.peerId !== undefined && this.inboundByPeer.get(conn.peerId) === conn) this.inboundByPeer.delete(conn.peerId);
  }

  private dispatch(conn: InboundConn, session: Session, body: Body): void {
    if (body.kind === BODY.RES || body.kind === BODY.ERR) {
      this.h.counters.badFrames++;
      return; // responses travel on the other connection
    }
    const handler = this.h.handlers.get(body.channel);
    const from = session.peerId;
    if (this.h.stages.on) this.h.stages.count(`peer.in.${body.channel}`);
    if (body.kind === BODY.MSG) {
      if (!handler) {
        this.h.counters.messagesWithoutHandler++;
        return;
      }
      try {
        const r = handler({ from, channel: body.channel, payload: body.payload, request: false });
        if (r instanceof Promise) r.catch((e: Error) => this.h.log.warning(`peer channel: handler of ${body.channel} failed on a message from ${from}: ${e.message}`));
      } catch (e) {
        this.h.log.warning(`peer channel: handler of ${body.channel} failed on a message from ${from}: ${(e as Error).message}`);
      }
      return;
    }
    const id = body.id;
    const answer = (b: Body) => this.reply(conn, session, b);
    const fail = (e: unknown) => answer(errorBody(id, e));
    if (!handler) return fail(new BrineError("CLUSTER_PEER_CHANNEL", `no handler for channel ${body.channel} on ${this.h.selfId}`));
    if (conn.running >= this.h.limits.inboundRequestsMax) {
      return fail(new BrineError("CLUSTER_PEER_QUEUE_FULL", `${conn.running} requests from ${from} running (inboundRequestsMax)`));
    }
    let r: ReturnType<PeerHandler>;
    try {
      r = handler({ from, channel: body.channel, payload: body.payload, request: true });
    } catch (e) {
      return fail(e);
    }
    if (!(r instanceof Promise)) return answer({ kind: BODY.RES, id, payload: r ?? EMPTY });
    conn.running++;
    r.then(
      (v) => answer({ kind: BODY.RES, id, payload: v ?? EMPTY }),
      (e) => fail(e),
    ).finally(() => conn.running--);
  }

  /** Queues a reply for the ROUTER, to be sealed under the session its request came on. */
  private reply(conn: InboundConn, session: Session, body: Body): void {
    if (this.h.isClosed() || conn.session !== session) return; // the requester reconnected: it no longer waits here
    if (conn.queuedReplies >= this.h.limits.replyQueueMessagesMax) {
      this.h.counters.repliesDropped++;
      this.h.budget.line(`peer channel: reply to ${conn.peerId} dropped (${conn.queuedReplies} queued, replyQueueMessagesMax)`);
      return;
    }
    let plain = encodeBody(body);
    if (plain.length + DATA_OVERHEAD_BYTES > this.h.limits.frameBytesMax) {
      const id = (body as { id: number }).id;
      plain = encodeBody(errorBody(id, new BrineError("CLUSTER_PEER_FRAME", `reply of ${plain.length} bytes exceeds frameBytesMax`)));
    }
    this.writeRouter({ conn, body: plain, session });
  }

  private writeRouter(item: RouterItem): void {
    if (!this.router) return;
    item.conn.queuedReplies++;
    this.routerOut.push(item);
    if (!this.routerWriting && !this.routerFlushScheduled) {
      this.routerFlushScheduled = true;
      setImmediate(() => {
        this.routerFlushScheduled = false;
        void this.pumpRouter();
      });
    }
  }

  /**
   * Writes the ROUTER's queue in order. Replies are sealed here, at write time, in queue order, so each
   * session's sequence numbers leave in increasing order; consecutive replies to one session share a frame.
   */
  private async pumpRouter(): Promise<void> {
    const router = this.router;
    if (this.routerWriting || !router) return;
    this.routerWriting = true;
    const batch: Uint8Array[] = [];
    try {
      for (let item = this.routerOut.shift(); item && !this.h.isClosed(); item = this.routerOut.shift()) {
        const conn = item.conn;
        conn.queuedReplies--;
        let frame: Uint8Array;
        if ("clear" in item) {
          frame = item.clear;
        } else {
          const session = item.session;
          batch.length = 0;
          batch.push(item.body);
          let bytes = item.body.length;
          for (let next = this.routerOut.peek(); next && "body" in next && next.session === session; next = this.routerOut.peek()) {
            if (bytes + next.body.length > this.h.limits.batchBytesMax) break;
            this.routerOut.shift();
            conn.queuedReplies--;
            batch.push(next.body);
            bytes += next.body.length;
          }
          if (conn.session !== session || session.exhausted) {
            this.h.counters.repliesDropped += batch.length; // replaced or used up: its requester has moved on
            continue;
          }
          const t = this.h.stages.now();
          frame = session.seal(FRAME.DATA, joinBodies(batch, bytes));
          this.h.stages.add("peer.seal", t);
          this.h.counters.framesOut++;
          this.h.counters.bodiesOut += batch.length;
        }
        try {
          const t = this.h.stages.now();
          const sent = router.send([conn.rid, frame]);
          this.h.stages.add("peer.zmqSend", t);
          await sent;
        } catch (e) {
          // EHOSTUNREACH: the connection is gone; EAGAIN: its libzmq queue is full. The frame is lost,
          // never re-sent (the receiver allows gaps, not repeats).
          this.h.counters.repliesDropped++;
          this.h.log.debug(`peer channel: frame to ${conn.peerId ?? "?"} dropped: ${(e as Error).message}`);
        }
      }
    } finally {
      this.routerWriting = false;
    }
  }
}

const EMPTY = new Uint8Array(0);

function errorBody(id: number, e: unknown): Body {
  const code = isBrineError(e) ? e.code : "CLUSTER_PEER_REMOTE";
  return { kind: BODY.ERR, id, code, text: e instanceof Error ? e.message : String(e) };
}
