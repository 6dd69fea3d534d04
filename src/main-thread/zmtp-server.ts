/**
 * brine's own ZMTP transport for the minion-facing ports (`brine_minion_transport: native`): a PUB on
 * `publish_port` and a ROUTER on `ret_port` on Node's `net`, the shell of the pure codec
 * src/shared/protocol/zmtp.ts (which decides everything about bytes: handshake, frames, subscriptions, bounds).
 * Why: libzmq's fixed per-connection pipes and engines cost 38–42 KB per connected minion (bench/RESULTS.md,
 * "Memory per connected minion"); a connection here is a socket and a small session object.
 *
 * What the shell does: accept, write what the session says to write, close what the session says to close
 * (with a line in a per-server LogBudget, never a throw), one coarse timer per server for handshakes that never
 * finish (`handshakeMsMax`, libzmq's ZMQ_HANDSHAKE_IVL default), and:
 * - PUB: a publish is encoded once and written to every subscriber whose subscriptions match its first frame
 *   (found in a SubscriptionIndex, not by asking every subscriber; `fanoutSubscribersPerTurn` per turn of the
 *   event loop, publishes in order);
 *   a subscriber with `pub_hwm` messages still unwritten (its socket's buffer has not drained since) gets no
 *   more until it drains: each message not queued is counted in `dropped` (the metrics' send-queue drops of
 *   `publish`). TCP keepalive as the libzmq PUB had it.
 * - ROUTER: each connection gets a routing id as libzmq makes them (0x00 and a 32-bit counter), a request goes
 *   up as [routing id, envelope..., body] and the reply comes back by that id. A REQ peer has one request in
 *   flight (it cannot send another before its reply); a DEALER or ROUTER peer at most
 *   `requestsInFlightPerPeerMax`; while a peer is at its bound, or its replies are not being read, its socket is
 *   not read (TCP pushes back); requests already read meanwhile wait in the connection, at most
 *   `requestsWaitingPerPeerMax`, past which the peer is closed.
 */
import type { ConnBoard } from "../shared/conn-board.js";
import net from "node:net";
import { getLogger } from "../shared/log.js";
import { LogBudget } from "../shared/log-budget.js";
import { BrineError } from "../shared/errors.js";
import { encodeMessage, hwmAllows, SubscriptionIndex, ZmtpSession, type ZmtpEvent, type ZmtpRole } from "../shared/protocol/zmtp.js";

const log = getLogger("brine.transport");

/** How long a peer has to send its greeting and READY, ms (libzmq's ZMQ_HANDSHAKE_IVL default). */
export const handshakeMsMax = 30_000;
/** Period of the one timer per server that closes connections stuck in their handshake, ms. */
const handshakeSweepMs = 5_000;
/** Lines about refused peers per server and window, and the window, ms. */
const refusalLinesMax = 10;
const refusalWindowMs = 60_000;
/**
 * Subscribers a publish is written to per turn of the event loop, count: up to this many a publish is written at
 * once; to more, the main thread's other work runs between slices (its writes cost 10–16 µs each on this box).
 */
export const fanoutSubscribersPerTurn = 1024;
/** Requests one DEALER or ROUTER peer may have in flight (a REQ peer: one). */
export const requestsInFlightPerPeerMax = 64;
/** Requests read from one peer and waiting for its in-flight ones, beyond which it is closed. */
export const requestsWaitingPerPeerMax = 1024;

export interface ZmtpServerOptions {
  /** listen backlog (`zmq_backlog`) */
  backlog: number;
  /** `ipv6`: an IPv6 address may be listened on (both families on `::`), as libzmq's IPV4ONLY 0; without it only IPv4 */
  ipv6?: boolean;
  /** TCP keepalive idle time, ms (none when absent) */
  keepaliveIdleMs?: number;
  /** how long a peer has for its handshake, ms (default handshakeMsMax) */
  handshakeMs?: number;
}

interface Conn {
  sock: net.Socket;
  session: ZmtpSession;
  openedMs: number;
}

/**
 * "tcp://host:port", host possibly in brackets (IPv6) or `*`. An IPv6 host needs `ipv6` (Salt's option), as
 * libzmq refuses one without it ("No such device"); here the refusal says why.
 */
export function parseTcpEndpoint(endpoint: string, ipv6 = true): { host: string | undefined; port: number } {
  const m = /^tcp:\/\/(\[[^\]]+\]|[^:]+):(\d+)$/.exec(endpoint);
  if (!m) throw new BrineError("TRANSPORT_BAD_ENDPOINT", `not a tcp endpoint: ${endpoint}`);
  const host = m[1]!.replace(/^\[|\]$/g, "");
  if (host.includes(":") && !ipv6) throw new BrineError("TRANSPORT_BAD_ENDPOINT", `${host} is an IPv6 address and ipv6 is False (set ipv6: True to listen on IPv6)`);
  return { host: host === "*" ? undefined : host, port: Number(m[2]) };
}

abstract class ZmtpServer<C extends Conn> {
  /**
   * every connection, by its socket: the sockets' listeners are the server's own functions, shared by all its
   * connections, which find theirs here (a closure per listener and connection cost ~0.6 KB of heap per minion's
   * two connections: issue 17)
   */
  protected readonly conns = new Map<net.Socket, C>();
  private readonly handshaking = new Set<C>();
  private readonly server: net.Server;
  private sweep: NodeJS.Timeout | undefined;
  private readonly refusals: LogBudget;
  /** connections closed for what they sent or for not finishing the handshake */
  refused = 0;
  /** of those, the ones closed for not finishing their handshake within handshakeMs (brine_handshake_timeouts_total) */
  handshakeTimeouts = 0;
  private closing = false;

  constructor(
    readonly role: ZmtpRole,
    private readonly opts: ZmtpServerOptions,
  ) {
    this.refusals = new LogBudget(refusalLinesMax, refusalWindowMs, (l) => log.warning(l), `${role} port`);
    this.server = net.createServer({ noDelay: true }, (sock) => this.accept(sock));
    this.server.on("error", (e) => log.error(`${role} port: ${e.message}`));
  }

  async bind(endpoint: string): Promise<void> {
    const { host, port } = parseTcpEndpoint(endpoint, this.opts.ipv6 ?? false);
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen({ host, port, backlog: this.opts.backlog }, () => {
        this.server.off("error", reject);
        resolve();
      });
    });
    const handshakeMs = this.opts.handshakeMs ?? handshakeMsMax;
    this.sweep = setInterval(() => this.sweepHandshakes(Date.now(), handshakeMs), Math.min(handshakeSweepMs, handshakeMs));
    this.sweep.unref();
  }

  /** Closes the listener and every connection at once (libzmq's linger 0: unsent data is dropped). */
  close(): void {
    this.closing = true;
    clearInterval(this.sweep);
    this.server.close();
    for (const c of this.conns.values()) c.sock.destroy();
  }

  protected abstract makeConn(sock: net.Socket, session: ZmtpSession): C;
  protected abstract onEvent(c: C, ev: ZmtpEvent): void;
  /** after each chunk's events */
  protected afterChunk(_c: C): void {}
  /** the connection is gone */
  protected abstract forget(c: C): void;

  private accept(sock: net.Socket): void {
    if (this.closing) {
      sock.destroy();
      return;
    }
    const session = new ZmtpSession(this.role);
    const c = this.makeConn(sock, session);
    this.conns.set(sock, c);
    this.handshaking.add(c);
    if (this.opts.keepaliveIdleMs !== undefined) sock.setKeepAlive(true, this.opts.keepaliveIdleMs);
    sock.on("data", this.onData);
    sock.on("error", this.onError);
    sock.on("close", this.onClose);
    sock.write(session.start());
  }

  // the sockets' listeners (`this` in them is the socket): one function each per server, not per connection
  private readonly onData = (() => {
    const server = this;
    return function (this: net.Socket, chunk: Buffer): void {
      const c = server.conns.get(this);
      if (!c) return;
      for (const ev of c.session.feed(chunk)) server.handle(c, ev);
      if (!c.session.closed) server.afterChunk(c);
    };
  })();

  // a reset or a write to a closed peer: the connection is gone, nothing else to do
  private readonly onError = (() => {
    const server = this;
    return function (this: net.Socket, e: Error): void {
      log.debug(`${server.role} port: ${this.remoteAddress}: ${e.message}`);
    };
  })();

  private readonly onClose = (() => {
    const server = this;
    return function (this: net.Socket): void {
      const c = server.conns.get(this);
      if (!c) return;
      server.conns.delete(this);
      server.handshaking.delete(c);
      server.forget(c);
    };
  })();

  /** The connection of a socket of this server (its listeners' `this`). */
  protected connOf(sock: net.Socket): C | undefined {
    return this.conns.get(sock);
  }

  private handle(c: C, ev: ZmtpEvent): void {
    switch (ev.k) {
      case "send":
        c.sock.write(ev.bytes);
        return;
      case "close":
        this.refuse(c, ev.reason);
        return;
      case "ready":
        this.handshaking.delete(c);
        this.onEvent(c, ev);
        return;
      case "ignored":
        log.debug(`${this.role} port: ${c.sock.remoteAddress}: ${ev.what} ignored`);
        return;
      default:
        this.onEvent(c, ev);
    }
  }

  /** Closes a peer for what it did, with a rate-limited line. */
  protected refuse(c: C, reason: string): void {
    this.refused++;
    this.refusals.line(`${this.role} port: closed the connection from ${c.sock.remoteAddress}:${c.sock.remotePort}: ${reason}`);
    c.sock.destroy();
  }

  private sweepHandshakes(nowMs: number, handshakeMs: number): void {
    for (const c of this.handshaking) {
      if (nowMs - c.openedMs <= handshakeMs) continue;
      this.handshakeTimeouts++;
      this.refuse(c, `no ZMTP handshake within ${handshakeMs} ms (${c.sock.bytesRead} bytes read from it)`);
    }
  }
}

interface Subscriber extends Conn {
  /** messages written since the socket last drained (queued in its buffer, not yet taken by the kernel) */
  queued: number;
  /** its remote address, read when its handshake was done (told to the watcher then and when it goes) */
  address?: string;
}

/** Told of each subscriber past its handshake as it comes and goes (presence: the publish peers board). */
export interface SubscriberWatcher {
  connected(remoteAddress: string): void;
  disconnected(remoteAddress: string): void;
}

/**
 * The publish port's PUB. `push`, `length`, `dropped`, `sent` and `drained` are SendQueue's (the libzmq path's
 * queue), so the publish port and the metrics read either the same way.
 */
export class NativePublisher extends ZmtpServer<Subscriber> {
  /** subscribers past their handshake */
  private readonly subs = new Set<Subscriber>();
  /** which subscribers a message goes to, by their subscriptions (kept as their SUBSCRIBE and CANCEL come) */
  private readonly index = new SubscriptionIndex<Subscriber>();
  /** messages published since start */
  sent = 0;
  /** messages not queued for a subscriber past its `pub_hwm`, since start */
  dropped = 0;
  /** publishes being written, in order: the subscribers it matched when it was published, and the next one to write */
  private readonly fanouts: { bytes: Buffer; targets: Subscriber[]; next: number }[] = [];
  private pumping = false;
  private idle: (() => void)[] = [];
  private watcher: SubscriberWatcher | undefined;

  private readonly onDrain = (() => {
    const server = this;
    return function (this: net.Socket): void {
      const c = server.connOf(this);
      if (c) c.queued = 0;
    };
  })();

  constructor(
    opts: ZmtpServerOptions,
    private readonly hwm: number,
    /** subscribers written to per turn of the event loop (fanoutSubscribersPerTurn) */
    private readonly perTurn = fanoutSubscribersPerTurn,
  ) {
    super("PUB", opts);
  }

  protected makeConn(sock: net.Socket, session: ZmtpSession): Subscriber {
    const c: Subscriber = { sock, session, openedMs: Date.now(), queued: 0 };
    sock.on("drain", this.onDrain);
    return c;
  }

  protected onEvent(c: Subscriber, ev: ZmtpEvent): void {
    if (ev.k === "ready") {
      this.subs.add(c);
      c.address = c.sock.remoteAddress;
      if (c.address) this.watcher?.connected(c.address);
    } else if (ev.k === "subscribe") this.index.add(c, ev.topic);
    // the session counts a topic's subscriptions: the peer leaves the index with its last cancel
    else if (ev.k === "cancel" && !c.session.subscriptions.has(ev.topic)) this.index.remove(c, ev.topic);
  }

  protected forget(c: Subscriber): void {
    if (this.subs.delete(c) && c.address) this.watcher?.disconnected(c.address);
    for (const topic of c.session.subscriptions.distinct()) this.index.remove(c, topic);
  }

  /**
   * Sends one message (its frames) to every subscriber it matches, once: encoded once into one Buffer every
   * write shares, the subscribers its first frame matches taken from the index at once, then written to them at
   * most `perTurn` per turn of the event loop (a publish to 5,000 does not hold the main thread's requests for
   * all its writes), publishes strictly in order.
   */
  push(frames: Buffer[]): void {
    this.sent++;
    const targets = this.index.match(frames[0]!);
    if (targets.length === 0) return;
    this.fanouts.push({ bytes: encodeMessage(frames), targets, next: 0 });
    if (!this.pumping) this.pump();
  }

  private pump(): void {
    let budget = this.perTurn;
    while (this.fanouts.length && budget > 0) {
      const f = this.fanouts[0]!;
      const end = Math.min(f.targets.length, f.next + budget);
      budget -= end - f.next;
      for (; f.next < end; f.next++) this.write(f.targets[f.next]!, f.bytes);
      if (f.next === f.targets.length) this.fanouts.shift();
    }
    this.pumping = this.fanouts.length > 0;
    if (this.pumping) setImmediate(() => this.pump());
    else for (const r of this.idle.splice(0)) r();
  }

  private write(c: Subscriber, bytes: Buffer): void {
    if (c.sock.destroyed) return;
    if (!hwmAllows(c.queued, this.hwm)) {
      this.dropped++;
      return;
    }
    c.sock.write(bytes);
    if (c.sock.writableLength > 0) c.queued++;
  }

  /** messages waiting: publishes not yet written to every subscriber, and those in subscribers' buffers */
  get length(): number {
    let n = this.fanouts.length;
    for (const c of this.subs) n += c.queued;
    return n;
  }

  /** Closes the port; publishes not yet written to every subscriber are dropped (linger 0). */
  override close(): void {
    this.fanouts.length = 0;
    super.close();
  }

  /** Resolves once every publish has been written to every subscriber (or dropped for one past its mark). */
  drained(): Promise<void> {
    return this.pumping ? new Promise((r) => this.idle.push(r)) : Promise.resolve();
  }

  /**
   * Tells `watcher` of every subscriber past its handshake now, then of each one as it comes and goes (at once:
   * a minion that left is known to have left before the next publish, not a poll later).
   */
  watch(watcher: SubscriberWatcher): void {
    this.watcher = watcher;
    for (const c of this.subs) if (c.address) watcher.connected(c.address);
  }

  /** Remote addresses of the subscribers past their handshake (for presence: who is connected). */
  remoteAddresses(): string[] {
    const out: string[] = [];
    for (const c of this.subs) if (c.sock.remoteAddress) out.push(c.sock.remoteAddress);
    return out;
  }

  /** subscribers past their handshake */
  get subscribers(): number {
    return this.subs.size;
  }
}

interface Peer extends Conn {
  /**
   * the routing id, as a number (0x00 and these 4 bytes on the wire of the tag); its frame is made for each
   * request handed up (routingIdFrame), not kept: a 5-byte Buffer kept per connection is an ArrayBuffer of its
   * own (~150 B of V8 heap and a native backing store per connection: issue 17)
   */
  id: number;
  /** requests this peer may have in flight (REQ: 1) */
  limit: number;
  inFlight: number;
  /** requests read and not handed up yet: their frames, and for one over frameBytesMax its size */
  waiting: { frames: Buffer[]; oversizedBytes?: number }[];
  paused: boolean;
  /** deliver() is on the stack for this peer (a request answered at once re-enters it) */
  delivering: boolean;
}

/** A routing id's frame (0x00 and the id's 4 bytes, as libzmq's ROUTER makes them): a slice of Node's shared pool, made per request. */
export function routingIdFrame(id: number): Buffer {
  const f = Buffer.allocUnsafe(5);
  f[0] = 0;
  f.writeUInt32BE(id, 1);
  return f;
}

/**
 * The request port's ROUTER. `onRequest` gets [routing id, envelope..., body] (as libzmq's ROUTER gives it), or
 * for a request over frameBytesMax [routing id, envelope...] and its size (its body was never stored);
 * `push([routing id, envelope..., reply])` sends the reply back to that peer.
 */
export class NativeRouter extends ZmtpServer<Peer> {
  private readonly byId = new Map<number, Peer>();
  private nextId = (Math.random() * 0x1_0000_0000) >>> 0;
  /** requests are handed up only once the master reads its request port (start()); they wait in their connection until then */
  private started = false;
  sent = 0;
  /** replies whose peer had gone */
  dropped = 0;
  readonly length = 0;

  private readonly onDrain = (() => {
    const server = this;
    return function (this: net.Socket): void {
      const c = server.connOf(this);
      if (c) server.deliver(c);
    };
  })();

  constructor(
    opts: ZmtpServerOptions,
    private readonly onRequest: (frames: Buffer[], oversizedBytes?: number) => void,
    /** told of each connection as it opens and closes, for the request workers (src/shared/conn-board.ts) */
    private readonly board?: ConnBoard,
  ) {
    super("ROUTER", opts);
  }

  protected makeConn(sock: net.Socket, session: ZmtpSession): Peer {
    let id = this.nextId;
    while (this.byId.has(id)) id = (id + 1) >>> 0;
    this.nextId = (id + 1) >>> 0;
    const c: Peer = { sock, session, openedMs: Date.now(), id, limit: 1, inFlight: 0, waiting: [], paused: false, delivering: false };
    this.byId.set(id, c);
    this.board?.opened(id);
    sock.on("drain", this.onDrain);
    return c;
  }

  protected onEvent(c: Peer, ev: ZmtpEvent): void {
    if (ev.k === "ready") c.limit = ev.socketType === "REQ" ? 1 : requestsInFlightPerPeerMax;
    else if (ev.k === "message" || ev.k === "oversized") {
      c.waiting.push(ev.k === "message" ? { frames: ev.frames } : { frames: ev.envelope, oversizedBytes: ev.bytes });
      if (c.waiting.length > requestsWaitingPerPeerMax) this.refuse(c, `more than ${requestsWaitingPerPeerMax} requests waiting for their turn`);
    }
  }

  protected override afterChunk(c: Peer): void {
    this.deliver(c);
  }

  protected forget(c: Peer): void {
    this.byId.delete(c.id);
    this.board?.closed(c.id);
    c.waiting = [];
  }

  /** Starts handing requests up (the master's request lanes are ready). */
  start(): void {
    this.started = true;
    for (const c of this.conns.values()) this.deliver(c);
  }

  /** Hands up the peer's waiting requests while it is under its bounds; reads its socket only then. */
  private deliver(c: Peer): void {
    if (c.delivering) return;
    c.delivering = true;
    try {
      while (this.started && c.waiting.length && c.inFlight < c.limit && !c.sock.writableNeedDrain && !c.sock.destroyed) {
        c.inFlight++;
        const w = c.waiting.shift()!;
        if (w.oversizedBytes === undefined) this.onRequest([routingIdFrame(c.id), ...w.frames]);
        else this.onRequest([routingIdFrame(c.id), ...w.frames], w.oversizedBytes);
      }
    } finally {
      c.delivering = false;
    }
    const hold = c.waiting.length > 0 || c.inFlight >= c.limit || c.sock.writableNeedDrain;
    if (hold && !c.paused) c.sock.pause();
    else if (!hold && c.paused) c.sock.resume();
    c.paused = hold;
  }

  /** A reply: [routing id, envelope..., body]. */
  push(msg: Buffer[]): void {
    const idFrame = msg[0];
    const c = idFrame && idFrame.length === 5 && idFrame[0] === 0 ? this.byId.get(idFrame.readUInt32BE(1)) : undefined;
    if (!c || c.sock.destroyed) {
      this.dropped++;
      return;
    }
    // one buffer, one write: cheaper than a corked writev of each frame's header and body (bench/RESULTS.md, issue 17)
    c.sock.write(encodeMessage(msg, 1));
    this.sent++;
    c.inFlight = Math.max(0, c.inFlight - 1);
    this.deliver(c);
  }

  drained(): Promise<void> {
    return Promise.resolve();
  }
}
