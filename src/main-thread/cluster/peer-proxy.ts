/**
 * The main thread's handle on the peer channel, which the Raft worker owns (host.ts serves it there): the
 * surface the cluster service, forwarding, cache sync, hello/join and AES use, over one MessagePort.
 *
 * - Sync methods stay sync: isUp, upPeers, status and port answer from the state the host pushes whenever a
 *   link changes (and at most stateRefreshMs late for queue depths while traffic flows). A peerUp or
 *   peerDown event is emitted after the state that goes with it has been applied.
 * - send() is one-way: it throws at once what can be known here (closed, unknown peer, bad channel,
 *   oversized payload); what only the transport knows (a full queue) is counted there (`sendsRefused`)
 *   and logged with a budget, and the message is dropped, as a full queue drops it on the owning thread.
 * - request() times out on the transport's coarse timer in the worker; no timer here. close(), and the
 *   worker's end (the port closing), reject every request still waiting.
 * - on(channel, handler): one handler per channel, as PeerTransport; a request's answer (or throw) goes back
 *   as the reply, with its code.
 */
import { EventEmitter } from "node:events";
import type { MessagePort } from "node:worker_threads";
import { BrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import { DATA_OVERHEAD_BYTES, validateChannel } from "../../workers/raft/peer/framing.js";
import { resolvePeerLimits, type PeerLimits } from "../../workers/raft/peer/limits.js";
import type { PeerEndpoint, PeerHandler, PeerStatus, PeerTransportEvents, SendOptions } from "../../workers/raft/peer/peer-types.js";
import { NO_PAYLOAD, PortBatcher, dispatchBatch, errorFields, reviveError, type HostState, type PortBatch, type Waiter, type ToHost, type ToProxy } from "../../workers/raft/peer-proxy-wire.js";

/** CBOR framing around a payload in one body (array header, kind, channel, request id), bytes: a margin */
const BODY_OVERHEAD_BYTES = 128;

const log = getLogger("brine.cluster.peer");

export class PeerChannelProxy {
  readonly events = new EventEmitter<PeerTransportEvents>();
  readonly limits: PeerLimits;
  private readonly out: PortBatcher<ToHost>;
  private readonly handlers = new Map<string, PeerHandler>();
  private readonly calls = new Map<number, Waiter>();
  private nextId = 1;
  private state: HostState = { port: 0, status: [], sendsRefused: 0 };
  private upSet = new Set<string>();
  private known = new Set<string>();
  private closed = false;

  constructor(
    private readonly portToHost: MessagePort,
    readonly selfId: string,
    opts: { limits?: Partial<PeerLimits>; known?: Iterable<string> } = {},
  ) {
    this.limits = resolvePeerLimits(opts.limits);
    // the configured ids: sendable before the worker's first state arrives (on another port than its API)
    for (const id of opts.known ?? []) this.known.add(id);
    this.out = new PortBatcher<ToHost>(portToHost);
    portToHost.on("message", (b: PortBatch<ToProxy>) => dispatchBatch(b, (m, p) => this.onMessage(m, p), log, "proxy"));
    // the worker ended (or closed its side): nothing will answer
    portToHost.on("close", () => this.shut());
  }

  /** The port the worker's listening socket is bound to. */
  get port(): number {
    return this.state.port;
  }

  /** Sends the worker's transport refused after send() returned (full queue): they were dropped there. */
  get sendsRefused(): number {
    return this.state.sendsRefused;
  }

  /** Posts to the worker and the messages they carried (messages / posts = the port's batching factor). */
  get portCounters(): { posts: number; messages: number } {
    return { posts: this.out.posts, messages: this.out.messages };
  }

  /** Binds the worker's listening socket and dials every peer (handlers registered before are in place). */
  start(): Promise<void> {
    return this.call({ k: "start", id: 0 }).then(() => undefined);
  }

  addPeer(ep: PeerEndpoint): void {
    if (this.closed) throw new BrineError("CLUSTER_PEER_CLOSED");
    // known at once (a send to it right after must not be refused as unknown); the worker's state confirms it
    if (ep.id !== undefined) this.known.add(ep.id);
    this.post({ k: "add", ep: { ...ep } });
  }

  /** Fault injection: Raft traffic to and from these node ids is dropped in the worker (empty: healed). */
  cut(ids: string[]): void {
    this.post({ k: "cut", ids: [...ids] });
  }

  on(channel: string, handler: PeerHandler): () => void {
    validateChannel(channel, this.limits.channelBytesMax);
    if (this.handlers.has(channel)) throw new BrineError("CLUSTER_PEER_CHANNEL", `channel ${channel} already has a handler`);
    this.handlers.set(channel, handler);
    this.post({ k: "on", ch: channel });
    return () => {
      if (this.handlers.get(channel) !== handler) return;
      this.handlers.delete(channel);
      this.post({ k: "off", ch: channel });
    };
  }

  send(peerId: string, channel: string, payload: Uint8Array, opts?: SendOptions): void {
    this.check(peerId, channel, payload);
    this.post({ k: "send", to: peerId, ch: channel, p: this.out.payload(payload), now: opts?.now === true });
  }

  request(peerId: string, channel: string, payload: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    try {
      this.check(peerId, channel, payload);
    } catch (e) {
      return Promise.reject(e);
    }
    return this.call({ k: "req", id: 0, to: peerId, ch: channel, p: this.out.payload(payload), ms: timeoutMs });
  }

  upPeers(): string[] {
    return [...this.upSet].sort();
  }

  isUp(peerId: string): boolean {
    return this.upSet.has(peerId);
  }

  status(): PeerStatus[] {
    return this.state.status.map((s) => ({ ...s }));
  }

  /** Closes the worker's transport; waits until its sockets are closed. */
  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.call({ k: "close", id: 0 });
    } catch {
      // the worker is gone already: its sockets went with it
    }
    this.shut();
    this.portToHost.close();
  }

  // ------------------------------------------------------------------ internals

  /** What send() and request() refuse synchronously, as the transport on this thread would have. */
  private check(peerId: string, channel: string, payload: Uint8Array): void {
    if (this.closed) throw new BrineError("CLUSTER_PEER_CLOSED");
    if (!this.known.has(peerId)) throw new BrineError("CLUSTER_PEER_UNKNOWN", `${JSON.stringify(peerId)} is not a configured peer, or its id is not learned yet`);
    validateChannel(channel, this.limits.channelBytesMax);
    if (payload.byteLength + BODY_OVERHEAD_BYTES + DATA_OVERHEAD_BYTES > this.limits.frameBytesMax) {
      throw new BrineError("CLUSTER_PEER_FRAME", `message of ${payload.byteLength} bytes exceeds frameBytesMax ${this.limits.frameBytesMax}`);
    }
  }

  private post(msg: ToHost): void {
    if (this.closed) return;
    this.out.push(msg);
  }

  private call(msg: Extract<ToHost, { id: number }>): Promise<Uint8Array> {
    if (this.closed) return Promise.reject(new BrineError("CLUSTER_PEER_CLOSED"));
    const id = this.nextId++;
    return new Promise<Uint8Array>((resolve, reject) => {
      this.calls.set(id, { resolve, reject });
      this.out.push({ ...msg, id });
    });
  }

  private onMessage(msg: ToProxy, p: Uint8Array[]): void {
    switch (msg.k) {
      case "state":
        this.apply(msg.state);
        return;
      case "up":
        this.events.emit("peerUp", msg.id, { address: msg.address, sessionId: msg.sessionId });
        return;
      case "down":
        this.events.emit("peerDown", msg.id, msg.reason);
        return;
      case "refused":
        this.events.emit("refused", msg.info);
        return;
      case "res": {
        const c = this.calls.get(msg.id);
        this.calls.delete(msg.id);
        c?.resolve(msg.p === NO_PAYLOAD ? new Uint8Array(0) : p[msg.p]!);
        return;
      }
      case "err": {
        const c = this.calls.get(msg.id);
        this.calls.delete(msg.id);
        c?.reject(reviveError(msg));
        return;
      }
      case "msg":
      case "ireq":
        this.deliver(msg, p[msg.p]!);
        return;
    }
  }

  private apply(state: HostState): void {
    this.state = state;
    this.upSet = new Set(state.status.filter((s) => s.state === "up" && s.id !== undefined).map((s) => s.id!));
    for (const s of state.status) if (s.id !== undefined) this.known.add(s.id);
  }

  /** Runs this thread's handler; a request's outcome goes back to the worker. */
  private deliver(msg: Extract<ToProxy, { k: "msg" | "ireq" }>, payload: Uint8Array): void {
    const handler = this.handlers.get(msg.ch);
    const request = msg.k === "ireq";
    const reply = (v: Uint8Array | void) => {
      if (request) this.post({ k: "res", id: msg.id, p: v ? this.out.payload(v) : NO_PAYLOAD });
    };
    const fail = (e: unknown) => {
      if (request) this.post({ k: "err", id: msg.id, ...errorFields(e) });
    };
    if (!handler) {
      fail(new BrineError("CLUSTER_PEER_CHANNEL", `no handler for ${msg.ch}`));
      return;
    }
    let r: ReturnType<PeerHandler>;
    try {
      r = handler({ from: msg.from, channel: msg.ch, payload, request });
    } catch (e) {
      fail(e);
      return;
    }
    if (r instanceof Promise) r.then(reply, fail);
    else reply(r);
  }

  /**
   * Nothing will answer any more: every waiting call fails, and a peer still up is reported down (after a
   * close() the host has reported them already; if the worker died, this is the only word peer health gets).
   */
  private shut(): void {
    if (this.closed) return;
    this.closed = true;
    this.out.close();
    const wasUp = [...this.upSet];
    this.upSet = new Set();
    for (const c of this.calls.values()) c.reject(new BrineError("CLUSTER_PEER_CLOSED"));
    this.calls.clear();
    for (const id of wasUp) this.events.emit("peerDown", id, "the peer channel's thread ended");
  }
}
