/**
 * The peer channel's I/O shell: one ZeroMQ ROUTER listening on `interface:cluster_pool_port`, one DEALER
 * per configured peer, the handshake and sessions of handshake.ts/session.ts on top, and the message layer
 * (one-way messages, correlated requests, bounded queues, reconnects) that the Raft RPC and event
 * forwarding use. docs/PEER-CHANNEL.md is the design; the invariants this file keeps:
 *
 * - peers are named by their node id, proven in the handshake, never by an address;
 * - one DEALER socket is one connection attempt is one handshake is one session: any failure (refusal,
 *   timeout, disconnect, send error) closes that socket and a new one is dialled after a backoff
 *   (reconnectMinMs doubling to reconnectMaxMs, ±20% jitter), so old frames can never reach a new session;
 * - each master sends its messages and requests on its own DEALER; the peer answers requests on the same
 *   connection (ROUTER side), so a response always travels the session its request came on;
 * - our queue per peer holds encoded, unsealed bodies, bounded by peerQueueMessagesMax and peerQueueBytesMax:
 *   `send` and `request` throw CLUSTER_PEER_QUEUE_FULL rather than grow it. A body is sealed only when it
 *   is written, so a queued message survives a reconnect and is sealed under the new session;
 * - delivery is at most once, in order per pair of masters: a frame is never re-sent. A request whose
 *   connection drops after it was written fails with CLUSTER_PEER_DOWN (it may or may not have run);
 * - unknown or forged peers, replays and frames that fail authentication are refused, counted and logged
 *   (with a budget per window, so a flood cannot flood the log).
 *
 * This file is the API and the outbound side (links: dial, handshake as initiator, backoff, the per-peer
 * queue and its writer, request correlation). The listening side (the ROUTER: inbound handshakes, handlers,
 * replies) is inbound.ts; the public types are peer-types.ts (re-exported here); out-queue.ts and
 * log-budget.ts are the queue and the log budget; pending-requests.ts correlates requests with their answers.
 */
import { EventEmitter } from "node:events";
import * as zmq from "zeromq";
import { ZmqSettle } from "../../../shared/zmq-settle.js";
import { BrineError, isBrineError, type ErrCode } from "../../../shared/errors.js";
import { getLogger, type Logger } from "../../../shared/log.js";
import { CoarseTimer, type TimerHandle } from "../../../shared/coarse-timer.js";
import { tcpAddress } from "../../../lib/zmq-req-client.js";
import { BODY, DATA_OVERHEAD_BYTES, FRAME, decodeBodies, decodeRefuse, encodeBody, joinBodies, validateChannel, type Body } from "./framing.js";
import { HandshakeError, InitiatorHandshake, isIdentityRefusal, type HandshakeContext } from "./handshake.js";
import { PeerListener } from "./inbound.js";
import { resolvePeerLimits, type PeerLimits } from "./limits.js";
import { LogBudget } from "../../../shared/log-budget.js";
import { OutQueue, type OutItem } from "./out-queue.js";
import { PendingRequests } from "./pending-requests.js";
import {
  type LinkState,
  type PeerCounters,
  type PeerEndpoint,
  type PeerHandler,
  type PeerStatus,
  type PeerTransportEvents,
  type PeerTransportOptions,
  type RefusedInfo,
  type SendOptions,
} from "./peer-types.js";
import type { Session } from "./session.js";
import { NO_STAGES, type StageSink } from "../../../shared/metrics/stage-clock.js";

export { PeerRemoteError } from "./peer-types.js";
export type { PeerCounters, PeerEndpoint, PeerHandler, PeerMessage, PeerStatus, PeerTransportEvents, PeerTransportOptions, RefusedInfo, SendOptions } from "./peer-types.js";

class OutboundLink {
  id: string | undefined;
  state: LinkState = "idle";
  /** connection generation: bumped when a connection is dialled and when it fails, so stale events are ignored */
  gen = 0;
  sock: zmq.Dealer | undefined;
  hs: InitiatorHandshake | undefined;
  session: Session | undefined;
  readonly queue = new OutQueue();
  /** request ids awaiting a response from this peer */
  readonly inFlight = new Set<number>();
  writing = false;
  flushScheduled = false;
  /** failures since the last established session (drives the backoff) */
  attempts = 0;
  failedAttempts = 0;
  handshakeTimer: TimerHandle | undefined;
  retryTimer: TimerHandle | undefined;

  constructor(readonly endpoint: PeerEndpoint) {
    this.id = endpoint.id;
  }

  get address(): string {
    return `${this.endpoint.host}:${this.endpoint.port}`;
  }
}

/**
 * How long start() keeps retrying a bind that fails with EADDRINUSE, ms: a transport closed in this process
 * (a restart) frees its port on libzmq's I/O thread shortly after close() returns. A port held by another
 * process still fails start-up, just this much later.
 */
const bindRetryMs = 2000;
/**
 * How long close() waits for libzmq to destroy the sockets (their observers end), ms. libzmq tells an observer
 * its socket is gone (MONITOR_STOPPED) on its reaper thread a moment after close(); a thread that ends
 * (terminate, process exit) before that aborts the whole process: zeromq.js throws at teardown for a waiting
 * observer (zeromq.js#411), and libzmq hands a dropped message's buffer back to the freed module
 * (src/shared/zmq-settle.ts).
 */
const observersEndWaitMs = 2000;
/** Jitter applied to each reconnect delay, as a fraction (±). */
const BACKOFF_JITTER = 0.2;

export class PeerTransport {
  readonly events = new EventEmitter<PeerTransportEvents>();
  readonly limits: PeerLimits;
  readonly counters: PeerCounters = { refused: 0, replays: 0, authFailures: 0, badFrames: 0, unauthenticatedFrames: 0, repliesDropped: 0, messagesWithoutHandler: 0, framesOut: 0, bodiesOut: 0 };
  private readonly log: Logger;
  private readonly budget: LogBudget;
  private readonly timer: CoarseTimer;
  private readonly stages: StageSink;
  private readonly ctx: HandshakeContext;
  private readonly links: OutboundLink[] = [];
  private readonly byId = new Map<string, OutboundLink>();
  private readonly handlers = new Map<string, PeerHandler>();
  /** requests written or queued, waiting for their answers */
  private readonly requests: PendingRequests;
  /** the listening side: the ROUTER, inbound handshakes and sessions, handlers, replies (inbound.ts) */
  private readonly listener: PeerListener;
  private started = false;
  private closed = false;
  private boundPort = 0;
  private joinHandler: ((conn: string, frame: Uint8Array) => Promise<Uint8Array | undefined>) | undefined;
  /** the sockets libzmq has not destroyed yet (close() waits for them: observersEndWaitMs) */
  private readonly settle = new ZmqSettle();

  constructor(private readonly opts: PeerTransportOptions) {
    if (opts.keys.self.id !== opts.selfId) {
      throw new BrineError("CLUSTER_CONFIG", `selfId ${JSON.stringify(opts.selfId)} does not match the identity key's id ${JSON.stringify(opts.keys.self.id)}`);
    }
    this.limits = resolvePeerLimits(opts.limits);
    this.log = opts.log ?? getLogger("brine.cluster.peer");
    this.budget = new LogBudget(this.limits.refusalLogsPerWindow, this.limits.refusalLogWindowMs, (l) => this.log.warning(l));
    this.timer = new CoarseTimer(this.limits.timerTickMs);
    this.requests = new PendingRequests(this.timer);
    this.stages = opts.stages ?? NO_STAGES;
    this.ctx = { clusterId: opts.clusterId, self: opts.keys.self, keyring: opts.keys.keyring, limits: this.limits, ...(opts.channelVersions ? { channelVersions: opts.channelVersions } : {}) };
    this.listener = new PeerListener({
      selfId: opts.selfId,
      limits: this.limits,
      counters: this.counters,
      log: this.log,
      budget: this.budget,
      timer: this.timer,
      handshake: this.ctx,
      handlers: this.handlers,
      stages: this.stages,
      isClosed: () => this.closed,
      openData: (session, frame, from) => this.openData(session, frame, from),
      refused: (info) => this.refused(info),
      joinFrame: (conn, frame) => (this.joinHandler ? this.joinHandler(conn, frame) : Promise.resolve(undefined)),
      inboundUp: (peerId) => this.redialNow(peerId),
    });
    for (const ep of opts.peers) this.addLink(ep);
  }

  get selfId(): string {
    return this.opts.selfId;
  }

  /** The port the listening socket is bound to (useful with listen.port 0). */
  get port(): number {
    return this.boundPort;
  }

  /** Binds the listening socket and starts dialling every peer. */
  async start(): Promise<void> {
    if (this.started) throw new BrineError("CLUSTER_CONFIG", "peer transport already started");
    if (this.closed) throw new BrineError("CLUSTER_PEER_CLOSED");
    this.started = true;
    const { host, port } = this.opts.listen;
    const router = new zmq.Router({
      ...this.socketOptions(host),
      // fail (and drop the frame) rather than silently discard or block every peer behind one slow one
      mandatory: true,
      sendTimeout: 0,
    });
    const address = port === 0 ? tcpAddress({ host, port: 0 }).replace(/:0$/, ":*") : tcpAddress({ host, port });
    for (const retryUntil = Date.now() + bindRetryMs; ; ) {
      try {
        await router.bind(address);
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "EADDRINUSE" && Date.now() < retryUntil) {
          await new Promise((r) => setTimeout(r, 20));
          continue;
        }
        router.close();
        this.started = false;
        throw new BrineError("CLUSTER_CONFIG", `cannot listen on ${host}:${port} (${(e as Error).message})`);
      }
    }
    this.boundPort = Number(/:(\d+)$/.exec(router.lastEndpoint ?? "")?.[1] ?? port);
    this.settle.watch(router);
    this.listener.attach(router);
    for (const link of this.links) this.dial(link);
    this.log.info(`peer channel ${this.opts.selfId} listening on ${host}:${this.boundPort}, ${this.links.length} peer(s)`);
  }

  /** Answers the JOIN frames of an isolated-filesystem cluster (join-host.ts); without one they are dropped. */
  onJoinFrame(handler: (conn: string, frame: Uint8Array) => Promise<Uint8Array | undefined>): void {
    this.joinHandler = handler;
  }

  /** Adds a peer at runtime (the join flow); dialled at once when the transport runs. */
  addPeer(ep: PeerEndpoint): void {
    if (this.closed) throw new BrineError("CLUSTER_PEER_CLOSED");
    const link = this.addLink(ep);
    if (this.started) this.dial(link);
  }

  /** Registers the handler of `channel` (one per channel). Returns a function that removes it. */
  on(channel: string, handler: PeerHandler): () => void {
    validateChannel(channel, this.limits.channelBytesMax);
    if (this.handlers.has(channel)) throw new BrineError("CLUSTER_PEER_CHANNEL", `channel ${channel} already has a handler`);
    this.handlers.set(channel, handler);
    return () => {
      if (this.handlers.get(channel) === handler) this.handlers.delete(channel);
    };
  }

  /**
   * Queues a one-way message to `peerId`. Throws CLUSTER_PEER_UNKNOWN for a peer without a link,
   * CLUSTER_PEER_QUEUE_FULL when its queue is at a bound, CLUSTER_PEER_FRAME for an oversized payload.
   * `opts.now`: write the queue now instead of after the current I/O burst (a latency-bound message, such
   * as Raft's: its sender already batched it, and waiting for the burst to end only delays it). `opts.held`:
   * queue only, the caller calls flush() before it yields (a write scheduled for after the burst would find
   * the queue empty: one setImmediate and one writer run per message for nothing).
   */
  send(peerId: string, channel: string, payload: Uint8Array, opts?: SendOptions): void {
    const t = this.stages.now();
    const link = this.linkFor(peerId);
    validateChannel(channel, this.limits.channelBytesMax);
    this.enqueue(link, { body: encodeBody({ kind: BODY.MSG, channel, payload }), requestId: 0, cancelled: false }, opts?.held === true);
    this.stages.add("peer.enqueue", t);
    if (this.stages.on) this.stages.count(`peer.out.${channel}`);
    if (opts?.now) this.writeNow(link);
  }

  /**
   * Writes what is queued for each of `peerIds` now instead of after the current I/O burst, one frame per
   * peer (up to batchBytesMax): a sender that queued several latency-bound messages in one turn (the Raft
   * link, one payload per group and peer) sends them as one sealed frame and one socket write per peer.
   * Every peer's frame is sealed before the first is handed to its socket, so the frames leave back to back:
   * handing a frame to libzmq wakes its I/O thread, which on a busy box often takes this thread's CPU, and a
   * seal left between two sends then waits for it (a leader's second follower got its append that much
   * later, and the leader's own durable write started that much later). No-op for an unknown peer or a
   * link without a session (the queue then waits for it, as ever); a link with a write under way takes
   * what is queued along when that write is done.
   */
  flush(peerIds: readonly string[] | ReadonlySet<string>): void {
    if (this.closed) return;
    const sealed: [OutboundLink, Uint8Array][] = [];
    for (const id of peerIds) {
      const link = this.byId.get(id);
      if (!link || link.state !== "up" || link.writing || link.queue.length === 0) continue;
      link.writing = true;
      const frame = this.nextFrame(link, link.gen, link.session!);
      if (frame) sealed.push([link, frame]);
      else link.writing = false;
    }
    for (const [link, frame] of sealed) void this.pumpOut(link, frame);
  }

  private writeNow(link: OutboundLink): void {
    // pumpOut seals and hands the frame to the socket before its first await (or finds a write under way,
    // which takes what is queued along when it is done)
    if (link.state === "up" && link.queue.length > 0) void this.pumpOut(link);
  }

  /**
   * Sends a request and resolves with the peer handler's reply. Rejects with CLUSTER_PEER_TIMEOUT after
   * `timeoutMs`, CLUSTER_PEER_DOWN if the connection it was written on drops, PeerRemoteError
   * (CLUSTER_PEER_REMOTE) if the handler threw or there is none, and synchronously-coded errors as send().
   */
  request(peerId: string, channel: string, payload: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    return new Promise<Uint8Array>((resolve, reject) => {
      const link = this.linkFor(peerId);
      validateChannel(channel, this.limits.channelBytesMax);
      if (this.stages.on) this.stages.count(`peer.out.${channel}`);
      if (link.inFlight.size >= this.limits.requestsInFlightMax) {
        throw new BrineError("CLUSTER_PEER_QUEUE_FULL", `${this.limits.requestsInFlightMax} requests to ${peerId} in flight`);
      }
      // registered before it is queued, so the writer always finds it (and a refused enqueue undoes it)
      const item = this.requests.open(link, channel, payload, timeoutMs, resolve, reject);
      try {
        this.enqueue(link, item);
      } catch (e) {
        this.requests.settle(item.requestId);
        throw e;
      }
    });
  }

  /** Node ids with an established outbound session. */
  upPeers(): string[] {
    return this.links.filter((l) => l.state === "up" && l.id !== undefined).map((l) => l.id!).sort();
  }

  isUp(peerId: string): boolean {
    return this.byId.get(peerId)?.state === "up";
  }

  /**
   * The newest form of `channel`'s payloads `peerId` reads, as its handshake on this master's outbound link
   * said (what send() writes goes over that link); 1 when it said nothing or there is no session.
   */
  peerReads(peerId: string, channel: string): number {
    return this.byId.get(peerId)?.session?.peerReads(channel) ?? 1;
  }

  status(): PeerStatus[] {
    return this.links.map((l) => ({
      id: l.id,
      address: l.address,
      state: l.state,
      sessionId: l.session?.id,
      queuedMessages: l.queue.length,
      queuedBytes: l.queue.bytes,
      requestsInFlight: l.inFlight.size,
      failedAttempts: l.failedAttempts,
    }));
  }

  /** Closes every socket; pending requests reject with CLUSTER_PEER_CLOSED, queued messages are dropped. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const link of this.links) {
      const wasUp = link.state === "up";
      this.teardown(link);
      link.state = "closed";
      link.retryTimer?.cancel();
      link.queue.clear();
      if (wasUp && link.id) this.events.emit("peerDown", link.id, "closed");
    }
    this.requests.failAll(() => new BrineError("CLUSTER_PEER_CLOSED"));
    this.listener.close();
    // let the sockets' receive loops see the close before the caller, say, rebinds the port
    await new Promise((r) => setImmediate(r));
    // and libzmq destroys them before the caller may end this thread (observersEndWaitMs says why)
    const open = await this.settle.settled(observersEndWaitMs);
    if (open) this.log.warning(`peer channel: ${open} socket(s) not yet destroyed by libzmq ${observersEndWaitMs} ms after close; ending this thread now may abort the process`);
  }

  // ------------------------------------------------------------------ outbound

  private addLink(ep: PeerEndpoint): OutboundLink {
    if (ep.id !== undefined) {
      if (ep.id === this.opts.selfId) throw new BrineError("CLUSTER_BAD_NODE_ID", `peer ${ep.host}:${ep.port} has this master's own id ${ep.id}`);
      if (this.byId.has(ep.id)) throw new BrineError("CLUSTER_BAD_NODE_ID", `peer id ${ep.id} is listed twice`);
    }
    const link = new OutboundLink(ep);
    this.links.push(link);
    if (ep.id !== undefined) this.byId.set(ep.id, link);
    return link;
  }

  private linkFor(peerId: string): OutboundLink {
    if (this.closed) throw new BrineError("CLUSTER_PEER_CLOSED");
    const link = this.byId.get(peerId);
    if (!link) throw new BrineError("CLUSTER_PEER_UNKNOWN", `${JSON.stringify(peerId)} is not a configured peer, or its id is not learned yet`);
    return link;
  }

  /** `held`: the caller flushes (SendOptions.held), so no write is scheduled for after the I/O burst */
  private enqueue(link: OutboundLink, item: OutItem, held = false): void {
    const l = this.limits;
    if (item.body.length + DATA_OVERHEAD_BYTES > l.frameBytesMax) {
      throw new BrineError("CLUSTER_PEER_FRAME", `message of ${item.body.length} bytes exceeds frameBytesMax ${l.frameBytesMax}`);
    }
    if (link.queue.length >= l.peerQueueMessagesMax) {
      throw new BrineError("CLUSTER_PEER_QUEUE_FULL", `${link.queue.length} messages queued for ${link.id ?? link.address} (peerQueueMessagesMax)`);
    }
    if (link.queue.bytes + item.body.length > l.peerQueueBytesMax) {
      throw new BrineError("CLUSTER_PEER_QUEUE_FULL", `${link.queue.bytes} bytes queued for ${link.id ?? link.address} (peerQueueBytesMax)`);
    }
    link.queue.push(item);
    if (link.state === "up" && !held) this.schedulePump(link);
  }

  private socketOptions(host: string) {
    const l = this.limits;
    return {
      ...(this.opts.context ? { context: this.opts.context } : {}),
      linger: 0,
      ipv6: host.includes(":"),
      maxMessageSize: l.frameBytesMax,
      sendHighWaterMark: l.zmqHighWaterMark,
      receiveHighWaterMark: l.zmqHighWaterMark,
      heartbeatInterval: l.heartbeatIntervalMs,
      heartbeatTimeout: l.heartbeatTimeoutMs,
      heartbeatTimeToLive: l.heartbeatTimeoutMs,
    };
  }

  private dial(link: OutboundLink): void {
    if (this.closed || link.state === "closed") return;
    link.retryTimer = undefined;
    const gen = ++link.gen;
    const sock = new zmq.Dealer({
      ...this.socketOptions(link.endpoint.host),
      // one socket, one connection: libzmq must not reconnect it behind the session's back
      reconnectInterval: -1,
      connectTimeout: this.limits.handshakeTimeoutMs,
    });
    link.sock = sock;
    link.state = "connecting";
    const lost = (what: string) => () => this.fail(link, gen, what);
    const observer = this.settle.watch(sock);
    observer.on("disconnect", lost("disconnected"));
    observer.on("close", lost("connection closed"));
    observer.on("connect:retry", lost("connection refused"));
    link.hs = new InitiatorHandshake(this.ctx, link.id ?? null);
    link.handshakeTimer = this.timer.after(this.limits.handshakeTimeoutMs, () => this.fail(link, gen, `no handshake within ${this.limits.handshakeTimeoutMs} ms`));
    try {
      sock.connect(tcpAddress(link.endpoint));
    } catch (e) {
      this.fail(link, gen, `cannot connect: ${(e as Error).message}`);
      return;
    }
    void this.readOut(link, sock, gen);
    sock.send(link.hs.hello).catch((e: Error) => this.fail(link, gen, `HELLO not sent: ${e.message}`));
  }

  /**
   * A peer just proved it is up (its own connection to us completed a handshake): if our link to it waits
   * out a backoff, dial now instead. A restarted master is otherwise reached only when the backoff that grew
   * while it was down (up to reconnectMaxMs) runs out, and until then everything this master answers it,
   * Raft's vote and append answers included, is dropped: after a restart a failover could wait seconds.
   */
  private redialNow(peerId: string): void {
    const link = this.byId.get(peerId);
    if (!link || this.closed || link.state !== "idle" || !link.retryTimer) return;
    link.retryTimer.cancel();
    link.retryTimer = undefined;
    link.attempts = 0;
    this.dial(link);
  }

  private async readOut(link: OutboundLink, sock: zmq.Dealer, gen: number): Promise<void> {
    try {
      for await (const parts of sock) {
        if (link.gen !== gen) return;
        if (parts.length !== 1) {
          this.counters.badFrames++;
          continue;
        }
        const t = this.stages.now();
        this.onOutboundFrame(link, gen, parts[0]!);
        this.stages.add("peer.in", t);
      }
    } catch (e) {
      if (link.gen === gen) this.fail(link, gen, `receive failed: ${(e as Error).message}`);
    }
  }

  private onOutboundFrame(link: OutboundLink, gen: number, frame: Buffer): void {
    const type = frame[0];
    if (link.state === "connecting") {
      const hs = link.hs!;
      try {
        if (type === FRAME.REFUSE) {
          const reason = decodeRefuse(frame, this.limits.handshakeFrameBytesMax);
          this.refused({ direction: "remote", address: link.address, claimedId: link.id, reason, detail: "the peer refused this master" });
          this.fail(link, gen, `refused by the peer (${reason})`, isIdentityRefusal(reason));
        } else if (type === FRAME.WELCOME) {
          const auth = hs.onWelcome(frame);
          const id = hs.peerId!;
          const other = this.byId.get(id);
          if (other && other !== link) throw new HandshakeError("duplicate-id", id, `${link.address} and ${other.address} both answer as ${JSON.stringify(id)}`);
          link.sock!.send(auth).catch((e: Error) => this.fail(link, gen, `AUTH not sent: ${e.message}`));
        } else if (type === FRAME.CONFIRM) {
          this.established(link, hs.onConfirm(frame));
        } else {
          this.counters.badFrames++;
        }
      } catch (e) {
        if (e instanceof HandshakeError) {
          this.refused({ direction: "outbound", address: link.address, claimedId: e.claimedId, reason: e.reason, detail: e.message });
          this.fail(link, gen, e.message, isIdentityRefusal(e.reason));
        } else {
          this.fail(link, gen, (e as Error).message);
        }
      }
      return;
    }
    if (link.state !== "up" || type !== FRAME.DATA) {
      this.counters.badFrames++;
      return;
    }
    for (const body of this.openData(link.session!, frame, `from ${link.id}`)) {
      if (body.kind === BODY.RES || body.kind === BODY.ERR) {
        this.requests.answer(link, body);
      } else {
        // the listening side of this connection only ever answers; anything else breaks the protocol
        this.counters.badFrames++;
        this.budget.line(`peer channel: ${link.id} sent a ${body.kind === BODY.REQ ? "request" : "message"} on our outbound connection; dropped`);
      }
    }
  }

  private established(link: OutboundLink, session: Session): void {
    link.handshakeTimer?.cancel();
    link.handshakeTimer = undefined;
    link.hs = undefined;
    link.session = session;
    if (link.id === undefined) {
      link.id = session.peerId;
      this.byId.set(session.peerId, link);
    }
    link.state = "up";
    link.attempts = 0;
    this.log.info(`peer channel: session ${session.id} to ${link.id} at ${link.address} established`);
    this.events.emit("peerUp", link.id, { address: link.address, sessionId: session.id });
    if (link.queue.length > 0) this.schedulePump(link);
  }

  /**
   * Flushes the link's queue once the current burst of work is over (setImmediate runs right after the
   * I/O phase): every message queued by the frames just read, the handlers they ran and the requests those
   * resolved then leaves in one frame. Writing at each enqueue instead settles into one frame per message
   * under request/response traffic (each reply frees one request, which is written alone, and so on).
   */
  private schedulePump(link: OutboundLink): void {
    if (link.writing || link.flushScheduled) return;
    link.flushScheduled = true;
    setImmediate(() => {
      link.flushScheduled = false;
      void this.pumpOut(link);
    });
  }

  /**
   * Writes the queue, sealing just before each write and coalescing what is already queued (up to
   * batchBytesMax) into one frame. One writer per link at a time; it never waits for more messages.
   * `first`: a frame flush() already sealed for this link (the link is marked writing).
   */
  private async pumpOut(link: OutboundLink, first?: Uint8Array): Promise<void> {
    if (first === undefined) {
      if (link.writing || link.state !== "up") return;
      link.writing = true;
    }
    const gen = link.gen;
    const sock = link.sock!;
    const session = link.session!;
    try {
      for (let frame = first ?? this.nextFrame(link, gen, session); frame; frame = this.nextFrame(link, gen, session)) {
        const t = this.stages.now();
        const sent = sock.send(frame);
        this.stages.add("peer.zmqSend", t);
        await sent;
      }
    } catch (e) {
      this.fail(link, gen, `send failed: ${(e as Error).message}`);
    } finally {
      link.writing = false;
    }
    // a new session may have come up while the last write was pending
    if (link.state === "up" && link.queue.length > 0) this.schedulePump(link);
  }

  /**
   * The next frame of connection `gen` of `link`: what is queued (up to batchBytesMax) sealed as one frame, or
   * undefined when the connection ended, the queue is empty, or the session is used up (the link then fails
   * and re-keys).
   */
  private nextFrame(link: OutboundLink, gen: number, session: Session): Uint8Array | undefined {
    const batch: Uint8Array[] = [];
    while (link.gen === gen && link.state === "up" && link.queue.length > 0) {
      if (session.exhausted) {
        this.fail(link, gen, `session ${session.id} used up its ${this.limits.sessionMessagesMax} frames; re-keying`);
        return undefined;
      }
      let bytes = 0;
      for (let next = link.queue.peek(); next; next = link.queue.peek()) {
        if (batch.length > 0 && bytes + next.body.length > this.limits.batchBytesMax) break;
        link.queue.shift();
        if (!this.requests.markWritten(next, gen)) continue;
        batch.push(next.body);
        bytes += next.body.length;
      }
      if (batch.length === 0) continue;
      this.counters.framesOut++;
      this.counters.bodiesOut += batch.length;
      const t = this.stages.now();
      const frame = session.seal(FRAME.DATA, joinBodies(batch, bytes));
      this.stages.add("peer.seal", t);
      return frame;
    }
    return undefined;
  }

  /** Closes the current connection attempt or session of `link`, without scheduling anything. */
  private teardown(link: OutboundLink): void {
    link.gen++;
    link.handshakeTimer?.cancel();
    link.handshakeTimer = undefined;
    link.hs?.abort();
    link.hs = undefined;
    link.session?.destroy();
    link.session = undefined;
    const sock = link.sock;
    link.sock = undefined;
    if (sock && !sock.closed) sock.close();
  }

  /**
   * Ends connection `gen` of `link` (ignored if it already ended), fails the requests written on it, and
   * schedules the next attempt. `slow`: the failure will not fix itself soon (refusal), so wait the longest.
   */
  private fail(link: OutboundLink, gen: number, reason: string, slow = false): void {
    if (link.gen !== gen || link.state === "closed" || this.closed) return;
    const wasUp = link.state === "up";
    this.teardown(link);
    link.state = "idle";
    link.failedAttempts++;
    this.requests.failWrittenOn(link, gen, () => new BrineError("CLUSTER_PEER_DOWN", `${link.id}: ${reason}`));
    if (wasUp) {
      this.log.warning(`peer channel: lost ${link.id} at ${link.address}: ${reason}`);
      this.events.emit("peerDown", link.id!, reason);
    } else {
      this.log.debug(`peer channel: attempt to ${link.id ?? "?"} at ${link.address} failed: ${reason}`);
    }
    const l = this.limits;
    const base = slow ? l.reconnectMaxMs : Math.min(l.reconnectMaxMs, l.reconnectMinMs * 2 ** Math.min(link.attempts, 30));
    link.attempts++;
    const delay = base * (1 - BACKOFF_JITTER + 2 * BACKOFF_JITTER * Math.random());
    link.retryTimer = this.timer.after(delay, () => this.dial(link));
  }

  // ------------------------------------------------------------------ shared

  /** Opens and decodes a DATA frame; counts, logs and returns no bodies for anything refused. */
  private openData(session: Session, frame: Buffer, from: string): Body[] {
    if (frame.length > this.limits.frameBytesMax) {
      this.counters.badFrames++;
      return [];
    }
    const t = this.stages.now();
    try {
      return decodeBodies(session.open(frame).plaintext, this.limits.channelBytesMax);
    } catch (e) {
      const code: ErrCode | undefined = isBrineError(e) ? e.code : undefined;
      if (code === "CLUSTER_PEER_REPLAY") this.counters.replays++;
      else if (code === "CLUSTER_PEER_AUTH") this.counters.authFailures++;
      else this.counters.badFrames++;
      this.budget.line(`peer channel: frame ${from} dropped: ${(e as Error).message}`);
      return [];
    } finally {
      this.stages.add("peer.open", t);
    }
  }

  private refused(info: RefusedInfo): void {
    this.counters.refused++;
    const who = info.claimedId !== undefined ? JSON.stringify(info.claimedId) : "(no valid id)";
    const where = info.address ? ` at ${info.address}` : "";
    const what =
      info.direction === "inbound"
        ? `refused inbound peer ${who}`
        : info.direction === "outbound"
          ? `refused peer ${who}${where}`
          : `peer ${who}${where} refused this master`;
    this.budget.line(`peer channel: ${what} (${info.reason}): ${info.detail}`);
    this.events.emit("refused", info);
  }
}
