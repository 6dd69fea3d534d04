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
 */
import { EventEmitter } from "node:events";
import * as zmq from "zeromq";
import { BrineError, isBrineError, type ErrCode } from "../../errors.js";
import { getLogger, type Logger } from "../../log.js";
import { CoarseTimer, type TimerHandle } from "../../minion/clock.js";
import { tcpAddress } from "../../minion/transport.js";
import { BODY, FRAME, SEALED_HEADER_BYTES, AEAD_TAG_BYTES, decodeBodies, decodeRefuse, encodeBody, encodeClear, joinBodies, validateChannel, type Body } from "./framing.js";
import { HandshakeError, InitiatorHandshake, ResponderHandshake, isIdentityRefusal, type HandshakeContext, type RefuseReason } from "./handshake.js";
import type { PeerIdentity, PeerKeyring } from "./keys.js";
import { resolvePeerLimits, type PeerLimits } from "./limits.js";
import type { Session } from "./session.js";
import { Fifo, OutQueue, type OutItem } from "./out-queue.js";
import { LogBudget } from "./log-budget.js";

export interface PeerEndpoint {
  host: string;
  port: number;
  /** the node id expected at this address; omitted: learned (and proven) in the first handshake */
  id?: string;
}

export interface PeerTransportOptions {
  clusterId: string;
  /** this master's node id; must be `keys.self.id` */
  selfId: string;
  listen: { host: string; port: number };
  peers: PeerEndpoint[];
  keys: { self: PeerIdentity; keyring: PeerKeyring };
  limits?: Partial<PeerLimits>;
  log?: Logger;
  context?: zmq.Context;
}

/** What a channel handler gets. */
export interface PeerMessage {
  /** the authenticated node id of the sender */
  from: string;
  channel: string;
  payload: Uint8Array;
  /** true for request(): the handler's return value (or throw) is the reply */
  request: boolean;
}

/**
 * A channel handler. For a request, its return value is the response payload (undefined: an empty one) and
 * a throw becomes an error response; for a one-way message the return value is ignored.
 */
export type PeerHandler = (msg: PeerMessage) => Uint8Array | void | Promise<Uint8Array | void>;

export interface RefusedInfo {
  /** inbound: a peer dialled us; outbound: we dialled `address`; remote: the peer refused us */
  direction: "inbound" | "outbound" | "remote";
  address?: string;
  claimedId?: string;
  reason: RefuseReason | string;
  detail: string;
}

export interface PeerTransportEvents {
  /** an outbound session to `peerId` is established: sends are written from now on */
  peerUp: [peerId: string, info: { address: string; sessionId: string }];
  /** the outbound session to `peerId` ended; queued messages wait for the next one */
  peerDown: [peerId: string, reason: string];
  refused: [info: RefusedInfo];
}

/** A request failed on the other side: `remoteCode` is the code the peer's handler threw (or its reason). */
export class PeerRemoteError extends BrineError {
  constructor(
    readonly peerId: string,
    readonly remoteCode: string,
    remoteText: string,
  ) {
    super("CLUSTER_PEER_REMOTE", `${peerId} answered ${remoteCode}: ${remoteText}`);
  }
}

export interface PeerStatus {
  id: string | undefined;
  address: string;
  state: LinkState;
  sessionId: string | undefined;
  queuedMessages: number;
  queuedBytes: number;
  requestsInFlight: number;
  /** connection attempts that failed since the transport started */
  failedAttempts: number;
}

export interface PeerCounters {
  refused: number;
  replays: number;
  authFailures: number;
  badFrames: number;
  /** frames from a connection with no session (never authenticated, or replaced) */
  unauthenticatedFrames: number;
  repliesDropped: number;
  messagesWithoutHandler: number;
  /** DATA frames written and the bodies they carried (bodies / frames = the batching factor) */
  framesOut: number;
  bodiesOut: number;
}

type LinkState = "idle" | "connecting" | "up" | "closed";

export interface SendOptions {
  /** write at once rather than after the current I/O burst (PeerTransport.send) */
  now?: boolean;
}

interface Pending {
  link: OutboundLink;
  resolve: (v: Uint8Array) => void;
  reject: (e: Error) => void;
  timer: TimerHandle;
  item: OutItem;
  /** the connection generation it was written on; undefined while queued */
  sentGen: number | undefined;
}

/** What waits for the ROUTER: a clear handshake frame, or a reply body to seal under `session` when written. */
type RouterItem = { conn: InboundConn; clear: Uint8Array } | { conn: InboundConn; body: Uint8Array; session: Session };

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

/** Overhead of a DATA frame around its body: header + tag. */
const DATA_OVERHEAD_BYTES = SEALED_HEADER_BYTES + AEAD_TAG_BYTES;
/**
 * How long start() keeps retrying a bind that fails with EADDRINUSE, ms: a transport closed in this process
 * (a restart) frees its port on libzmq's I/O thread shortly after close() returns. A port held by another
 * process still fails start-up, just this much later.
 */
const BIND_RETRY_MS = 2000;
/** Jitter applied to each reconnect delay, as a fraction (±). */
const BACKOFF_JITTER = 0.2;

export class PeerTransport {
  readonly events = new EventEmitter<PeerTransportEvents>();
  readonly limits: PeerLimits;
  readonly counters: PeerCounters = { refused: 0, replays: 0, authFailures: 0, badFrames: 0, unauthenticatedFrames: 0, repliesDropped: 0, messagesWithoutHandler: 0, framesOut: 0, bodiesOut: 0 };
  private readonly log: Logger;
  private readonly budget: LogBudget;
  private readonly timer: CoarseTimer;
  private readonly ctx: HandshakeContext;
  private readonly links: OutboundLink[] = [];
  private readonly byId = new Map<string, OutboundLink>();
  private readonly handlers = new Map<string, PeerHandler>();
  private readonly pending = new Map<number, Pending>();
  private nextRequestId = 1;
  private router: zmq.Router | undefined;
  private readonly inbound = new Map<string, InboundConn>();
  private readonly inboundByPeer = new Map<string, InboundConn>();
  private pendingHandshakes = 0;
  private readonly routerOut = new Fifo<RouterItem>();
  private routerWriting = false;
  private routerFlushScheduled = false;
  private started = false;
  private closed = false;
  private boundPort = 0;

  constructor(private readonly opts: PeerTransportOptions) {
    if (opts.keys.self.id !== opts.selfId) {
      throw new BrineError("CLUSTER_CONFIG", `selfId ${JSON.stringify(opts.selfId)} does not match the identity key's id ${JSON.stringify(opts.keys.self.id)}`);
    }
    this.limits = resolvePeerLimits(opts.limits);
    this.log = opts.log ?? getLogger("brine.cluster.peer");
    this.budget = new LogBudget(this.limits.refusalLogsPerWindow, this.limits.refusalLogWindowMs, (l) => this.log.warning(l));
    this.timer = new CoarseTimer(this.limits.timerTickMs);
    this.ctx = { clusterId: opts.clusterId, self: opts.keys.self, keyring: opts.keys.keyring, limits: this.limits };
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
    for (const retryUntil = Date.now() + BIND_RETRY_MS; ; ) {
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
    this.router = router;
    this.boundPort = Number(/:(\d+)$/.exec(router.lastEndpoint ?? "")?.[1] ?? port);
    void this.readRouter(router);
    for (const link of this.links) this.dial(link);
    this.log.info(`peer channel ${this.opts.selfId} listening on ${host}:${this.boundPort}, ${this.links.length} peer(s)`);
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
   * as Raft's: its sender already batched it, and waiting for the burst to end only delays it).
   */
  send(peerId: string, channel: string, payload: Uint8Array, opts?: SendOptions): void {
    const link = this.linkFor(peerId);
    validateChannel(channel, this.limits.channelBytesMax);
    this.enqueue(link, { body: encodeBody({ kind: BODY.MSG, channel, payload }), requestId: 0, cancelled: false });
    // pumpOut seals and hands the frame to the socket before its first await (or finds a write under way,
    // which takes this message along when it is done)
    if (opts?.now && link.state === "up") void this.pumpOut(link);
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
      if (link.inFlight.size >= this.limits.requestsInFlightMax) {
        throw new BrineError("CLUSTER_PEER_QUEUE_FULL", `${this.limits.requestsInFlightMax} requests to ${peerId} in flight`);
      }
      const id = this.nextRequestId++;
      const item: OutItem = { body: encodeBody({ kind: BODY.REQ, channel, id, payload }), requestId: id, cancelled: false };
      const timer = this.timer.after(timeoutMs, () => {
        if (!this.settle(id)) return;
        item.cancelled = true;
        reject(new BrineError("CLUSTER_PEER_TIMEOUT", `${channel} to ${peerId} after ${timeoutMs} ms`));
      });
      // registered before it is queued, so the writer always finds it (and a refused enqueue undoes it)
      this.pending.set(id, { link, resolve, reject, timer, item, sentGen: undefined });
      link.inFlight.add(id);
      try {
        this.enqueue(link, item);
      } catch (e) {
        this.settle(id);
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
    for (const id of [...this.pending.keys()]) this.failPending(id, new BrineError("CLUSTER_PEER_CLOSED"));
    for (const conn of this.inbound.values()) this.dropInbound(conn);
    this.routerOut.clear();
    // no unbind(): zeromq.js runs it on a libuv worker thread while this thread may still use the socket,
    // which libzmq does not allow (it aborted in testing). close() releases the port shortly after, on
    // libzmq's I/O thread; start() retries a bind that finds the port still taken (BIND_RETRY_MS).
    this.router?.close();
    this.router = undefined;
    // let the sockets' receive loops see the close before the caller, say, rebinds the port
    await new Promise((r) => setImmediate(r));
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

  private enqueue(link: OutboundLink, item: OutItem): void {
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
    if (link.state === "up") this.schedulePump(link);
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
    sock.events.on("disconnect", lost("disconnected"));
    sock.events.on("close", lost("connection closed"));
    sock.events.on("connect:retry", lost("connection refused"));
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

  private async readOut(link: OutboundLink, sock: zmq.Dealer, gen: number): Promise<void> {
    try {
      for await (const parts of sock) {
        if (link.gen !== gen) return;
        if (parts.length !== 1) {
          this.counters.badFrames++;
          continue;
        }
        this.onOutboundFrame(link, gen, parts[0]!);
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
        this.onResponse(link, body);
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
   */
  private async pumpOut(link: OutboundLink): Promise<void> {
    if (link.writing || link.state !== "up") return;
    link.writing = true;
    const gen = link.gen;
    const sock = link.sock!;
    const session = link.session!;
    const batch: Uint8Array[] = [];
    try {
      while (link.gen === gen && link.state === "up" && link.queue.length > 0) {
        if (session.exhausted) {
          this.fail(link, gen, `session ${session.id} used up its ${this.limits.sessionMessagesMax} frames; re-keying`);
          break;
        }
        batch.length = 0;
        let bytes = 0;
        for (let next = link.queue.peek(); next; next = link.queue.peek()) {
          if (batch.length > 0 && bytes + next.body.length > this.limits.batchBytesMax) break;
          link.queue.shift();
          if (!this.takeForWrite(next, gen)) continue;
          batch.push(next.body);
          bytes += next.body.length;
        }
        if (batch.length === 0) continue;
        this.counters.framesOut++;
        this.counters.bodiesOut += batch.length;
        await sock.send(session.seal(FRAME.DATA, joinBodies(batch, bytes)));
      }
    } catch (e) {
      this.fail(link, gen, `send failed: ${(e as Error).message}`);
    } finally {
      link.writing = false;
    }
    // a new session may have come up while the last write was pending
    if (link.state === "up" && link.queue.length > 0) this.schedulePump(link);
  }

  /** False for an item that must not be written (its request timed out while queued); marks requests sent. */
  private takeForWrite(item: OutItem, gen: number): boolean {
    if (item.cancelled) return false;
    if (item.requestId === 0) return true;
    const p = this.pending.get(item.requestId);
    if (!p) return false;
    p.sentGen = gen;
    return true;
  }

  private onResponse(link: OutboundLink, body: Extract<Body, { kind: typeof BODY.RES | typeof BODY.ERR }>): void {
    const p = this.pending.get(body.id);
    if (!p || p.link !== link) return; // late (timed out) or not ours: nothing waits for it
    this.settle(body.id);
    if (body.kind === BODY.RES) p.resolve(body.payload);
    else p.reject(new PeerRemoteError(link.id!, body.code, body.text));
  }

  /** Removes a pending request's bookkeeping; false when it was already settled. */
  private settle(id: number): boolean {
    const p = this.pending.get(id);
    if (!p) return false;
    this.pending.delete(id);
    p.timer.cancel();
    p.link.inFlight.delete(id);
    return true;
  }

  private failPending(id: number, err: Error): void {
    const p = this.pending.get(id);
    if (p && this.settle(id)) p.reject(err);
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
    for (const id of [...link.inFlight]) {
      const p = this.pending.get(id);
      if (p && p.sentGen === gen) this.failPending(id, new BrineError("CLUSTER_PEER_DOWN", `${link.id}: ${reason}`));
    }
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

  // ------------------------------------------------------------------ inbound

  private async readRouter(router: zmq.Router): Promise<void> {
    try {
      for await (const parts of router) {
        if (this.closed) return;
        if (parts.length !== 2) {
          this.counters.badFrames++;
          continue;
        }
        this.onInboundFrame(parts[0]!, parts[1]!);
      }
    } catch (e) {
      if (!this.closed) this.log.error(`peer channel: listening socket failed: ${(e as Error).message}`);
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
    if (!conn) {
      this.counters.unauthenticatedFrames++;
      return;
    }
    if (type === FRAME.AUTH && conn.hs) {
      this.onAuth(conn, frame);
      return;
    }
    if (type !== FRAME.DATA || !conn.session) {
      this.counters.unauthenticatedFrames++;
      return;
    }
    const session = conn.session;
    for (const body of this.openData(session, frame, `from ${conn.peerId}`)) this.dispatch(conn, session, body);
  }

  private onHello(rid: Buffer, key: string, frame: Buffer): void {
    const conn: InboundConn = { rid, key, hs: undefined, session: undefined, peerId: undefined, deadline: undefined, running: 0, queuedReplies: 0 };
    if (this.pendingHandshakes >= this.limits.pendingHandshakesMax) {
      this.refuseInbound(conn, new HandshakeError("state", undefined, `${this.pendingHandshakes} handshakes already in progress (pendingHandshakesMax)`));
      return;
    }
    const hs = new ResponderHandshake(this.ctx);
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
    conn.deadline = this.timer.after(this.limits.handshakeTimeoutMs, () => {
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
    this.log.info(`peer channel: session ${out.session.id} from ${peerId} established`);
    this.writeRouter({ conn, clear: out.confirm });
  }

  private refuseInbound(conn: InboundConn, e: HandshakeError): void {
    this.refused({ direction: "inbound", claimedId: e.claimedId, reason: e.reason, detail: e.message });
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
      this.counters.badFrames++;
      return; // responses travel on the other connection
    }
    const handler = this.handlers.get(body.channel);
    const from = session.peerId;
    if (body.kind === BODY.MSG) {
      if (!handler) {
        this.counters.messagesWithoutHandler++;
        return;
      }
      try {
        const r = handler({ from, channel: body.channel, payload: body.payload, request: false });
        if (r instanceof Promise) r.catch((e: Error) => this.log.warning(`peer channel: handler of ${body.channel} failed on a message from ${from}: ${e.message}`));
      } catch (e) {
        this.log.warning(`peer channel: handler of ${body.channel} failed on a message from ${from}: ${(e as Error).message}`);
      }
      return;
    }
    const id = body.id;
    const answer = (b: Body) => this.reply(conn, session, b);
    const fail = (e: unknown) => answer(errorBody(id, e));
    if (!handler) return fail(new BrineError("CLUSTER_PEER_CHANNEL", `no handler for channel ${body.channel} on ${this.opts.selfId}`));
    if (conn.running >= this.limits.inboundRequestsMax) {
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
    if (this.closed || conn.session !== session) return; // the requester reconnected: it no longer waits here
    if (conn.queuedReplies >= this.limits.replyQueueMessagesMax) {
      this.counters.repliesDropped++;
      this.budget.line(`peer channel: reply to ${conn.peerId} dropped (${conn.queuedReplies} queued, replyQueueMessagesMax)`);
      return;
    }
    let plain = encodeBody(body);
    if (plain.length + DATA_OVERHEAD_BYTES > this.limits.frameBytesMax) {
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
      for (let item = this.routerOut.shift(); item && !this.closed; item = this.routerOut.shift()) {
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
            if (bytes + next.body.length > this.limits.batchBytesMax) break;
            this.routerOut.shift();
            conn.queuedReplies--;
            batch.push(next.body);
            bytes += next.body.length;
          }
          if (conn.session !== session || session.exhausted) {
            this.counters.repliesDropped += batch.length; // replaced or used up: its requester has moved on
            continue;
          }
          frame = session.seal(FRAME.DATA, joinBodies(batch, bytes));
          this.counters.framesOut++;
          this.counters.bodiesOut += batch.length;
        }
        try {
          await router.send([conn.rid, frame]);
        } catch (e) {
          // EHOSTUNREACH: the connection is gone; EAGAIN: its libzmq queue is full. The frame is lost,
          // never re-sent (the receiver allows gaps, not repeats).
          this.counters.repliesDropped++;
          this.log.debug(`peer channel: frame to ${conn.peerId ?? "?"} dropped: ${(e as Error).message}`);
        }
      }
    } finally {
      this.routerWriting = false;
    }
  }

  // ------------------------------------------------------------------ shared

  /** Opens and decodes a DATA frame; counts, logs and returns no bodies for anything refused. */
  private openData(session: Session, frame: Buffer, from: string): Body[] {
    if (frame.length > this.limits.frameBytesMax) {
      this.counters.badFrames++;
      return [];
    }
    try {
      return decodeBodies(session.open(frame).plaintext, this.limits.channelBytesMax);
    } catch (e) {
      const code: ErrCode | undefined = isBrineError(e) ? e.code : undefined;
      if (code === "CLUSTER_PEER_REPLAY") this.counters.replays++;
      else if (code === "CLUSTER_PEER_AUTH") this.counters.authFailures++;
      else this.counters.badFrames++;
      this.budget.line(`peer channel: frame ${from} dropped: ${(e as Error).message}`);
      return [];
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

const EMPTY = new Uint8Array(0);

function errorBody(id: number, e: unknown): Body {
  const code = isBrineError(e) ? e.code : "CLUSTER_PEER_REMOTE";
  return { kind: BODY.ERR, id, code, text: e instanceof Error ? e.message : String(e) };
}
