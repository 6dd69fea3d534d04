/**
 * What crosses the one MessagePort between the main thread's PeerChannelProxy (proxy.ts) and the Raft
 * worker's PeerChannelHost (host.ts), which owns the peer channel (src/workers/raft/peer/). Raft traffic never
 * crosses it: the worker's RaftPeerLink talks to the PeerTransport directly.
 *
 * Both directions carry batches, `{m: PortMsg[], p: Uint8Array[]}`, coalesced per turn of the event loop by
 * PortBatcher: event forwarding can carry thousands of messages per second, and one postMessage per message
 * would cost a structured clone and a wake-up of the other thread each. Messages name their payload by its
 * index in `p`, so a payload sent to several peers in one turn (a forwarded event batch) crosses once.
 *
 * Payloads are copied once into a buffer of their exact size and that buffer is transferred. Never the
 * caller's buffer itself: callers' bytes are often views into buffers still in use (an encoder's scratch
 * buffer, Node's Buffer pool, a frame's plaintext shared with Raft entries decoded from it), and a structured
 * clone of a view serializes its whole backing buffer, twice (serialize, deserialize). The one exception is a
 * payload its caller hands over (`handOver`) that spans a buffer of its own: bytes that only pass through the
 * thread, as the state-sync relay's do, cross without a copy.
 */
import { BrineError, ERR, isBrineError, type ErrCode } from "../../shared/errors.js";
import type { Logger } from "../../shared/log.js";
import { PeerRemoteError, type PeerEndpoint, type PeerStatus, type RefusedInfo } from "./peer/peer-types.js";

/** main thread → worker */
export type ToHost =
  /** forward this channel's inbound messages and requests to the main thread */
  | { k: "on"; ch: string }
  | { k: "off"; ch: string }
  | { k: "send"; to: string; ch: string; p: number; now: boolean }
  /** a request from the main thread: answered by `res`/`err` with the same id */
  | { k: "req"; id: number; to: string; ch: string; p: number; ms: number }
  /** the main thread's handler answered inbound request `id` */
  | { k: "res"; id: number; p: number }
  | { k: "err"; id: number; code: string; text: string }
  /** bind and dial (answered by `res`, after a `state` that carries the bound port) */
  | { k: "start"; id: number }
  | { k: "add"; ep: PeerEndpoint }
  /** fault injection: the node ids Raft traffic is dropped to and from (empty: healed) */
  | { k: "cut"; ids: string[] }
  | { k: "close"; id: number };

/** worker → main thread */
export type ToProxy =
  | { k: "msg"; from: string; ch: string; p: number }
  /** an inbound request for a channel the main thread handles: answer with `res`/`err` and this id */
  | { k: "ireq"; id: number; from: string; ch: string; p: number }
  /** the answer to the main thread's request `id` (or to `start`/`close`) */
  | { k: "res"; id: number; p: number }
  | { k: "err"; id: number; code: string; text: string; peer?: string; remoteCode?: string }
  /** the channel's state, sent before any event that changed it (so a peerUp handler sees isUp true) */
  | { k: "state"; state: HostState }
  | { k: "up"; id: string; address: string; sessionId: string }
  | { k: "down"; id: string; reason: string }
  | { k: "refused"; info: RefusedInfo };

/** What the proxy answers isUp/upPeers/status/port from, pushed by the host whenever it changes. */
export interface HostState {
  port: number;
  status: PeerStatus[];
  /** sends the host could not queue (a full queue, an unknown peer): counted there, since send() is one-way */
  sendsRefused: number;
}

/** Someone waiting for the other side's answer to a call (a request, start, close). */
export interface Waiter {
  resolve(v: Uint8Array): void;
  reject(e: Error): void;
}

/** The payload index of a message without one (an empty reply). */
export const NO_PAYLOAD = -1;

/** One post: the messages of a turn and the payloads they name by index. */
export interface PortBatch<M> {
  m: M[];
  p: Uint8Array[];
}

/** A copy of `b` in a buffer of its own, exactly its size: safe to transfer. */
export function ownedCopy(b: Uint8Array): Uint8Array {
  const c = new Uint8Array(b.byteLength);
  c.set(b);
  return c;
}

/**
 * Payloads whose callers gave their buffer up (`handOver`): a batcher transfers such a payload as it is, when it
 * spans its whole buffer, instead of copying it. Held weakly: a mark never keeps a buffer alive.
 */
const handedOver = new WeakSet<Uint8Array>();

/**
 * Marks `b` as given up by its caller: the batcher that takes it next may transfer its buffer to the other
 * thread, after which `b` (and any other view of that buffer) is detached. For bytes that only pass through a
 * thread (the state-sync relay: received by transfer from one thread, sent on to another); never for a buffer
 * the caller or anyone else reads again.
 */
export function handOver(b: Uint8Array): Uint8Array {
  handedOver.add(b);
  return b;
}

/** `b`'s buffer when `b` spans all of it and it can be transferred (not shared), else undefined. */
export function ownBuffer(b: Uint8Array): ArrayBuffer | undefined {
  const buf = b.buffer;
  return b.byteOffset === 0 && b.byteLength === buf.byteLength && !(buf instanceof SharedArrayBuffer) ? buf : undefined;
}

/** The port a batcher posts on (a MessagePort; a fake in tests). */
export interface PostTarget {
  postMessage(value: unknown, transfer?: ArrayBuffer[]): void;
}

/**
 * Coalesces one side's messages into one post per turn of the event loop (setImmediate: after the I/O that
 * produced them). Payloads are copied once (not at all when handed over whole), deduplicated by identity within the
 * batch, and transferred.
 */
export class PortBatcher<M> {
  private m: M[] = [];
  private p: Uint8Array[] = [];
  private index = new Map<Uint8Array, number>();
  private scheduled = false;
  private closed = false;
  /** posts made and messages they carried (messages / posts = the batching factor) */
  posts = 0;
  messages = 0;

  constructor(private readonly port: PostTarget) {}

  /** The index `payload` has in the current batch (copied on first use, unless handed over: see handOver). */
  payload(payload: Uint8Array): number {
    let i = this.index.get(payload);
    if (i === undefined) {
      i = this.p.push(handedOver.has(payload) && ownBuffer(payload) ? payload : ownedCopy(payload)) - 1;
      this.index.set(payload, i);
    }
    return i;
  }

  push(msg: M): void {
    if (this.closed) return;
    this.m.push(msg);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  /** Posts what is queued now (also called by the scheduled flush). */
  flush(): void {
    this.scheduled = false;
    if (this.m.length === 0 || this.closed) return;
    const batch: PortBatch<M> = { m: this.m, p: this.p };
    const transfer = this.p.map((b) => b.buffer as ArrayBuffer);
    this.m = [];
    this.p = [];
    this.index = new Map();
    this.posts++;
    this.messages += batch.m.length;
    this.port.postMessage(batch, transfer);
  }

  /** Flushes, then drops whatever comes later. */
  close(): void {
    this.flush();
    this.closed = true;
  }
}

/** An error as it crosses the port: its code (CLUSTER_PEER_REMOTE for an uncoded one) and its exact text. */
export function errorFields(e: unknown): { code: string; text: string; peer?: string; remoteCode?: string } {
  const text = e instanceof Error ? e.message : String(e);
  if (e instanceof PeerRemoteError) return { code: e.code, text, peer: e.peerId, remoteCode: e.remoteCode };
  return { code: isBrineError(e) ? e.code : "CLUSTER_PEER_REMOTE", text };
}

/** The error on the other side of the port: the same class, code and message. */
export function reviveError(f: { code: string; text: string; peer?: string; remoteCode?: string }): BrineError {
  const e =
    f.code === "CLUSTER_PEER_REMOTE" && f.peer !== undefined && f.remoteCode !== undefined
      ? new PeerRemoteError(f.peer, f.remoteCode, "")
      : new BrineError(f.code in ERR ? (f.code as ErrCode) : "CLUSTER_PEER_REMOTE");
  e.message = f.text;
  return e;
}

/**
 * Hands each message of a received batch to `handle`, with the batch's payloads. One message that throws is
 * logged and does not stop the others (they come from unrelated callers).
 */
export function dispatchBatch<M extends { k: string }>(b: PortBatch<M>, handle: (msg: M, payloads: Uint8Array[]) => void, log: Logger, side: string): void {
  for (const msg of b.m) {
    try {
      handle(msg, b.p);
    } catch (e) {
      log.error(`peer channel ${side}: ${msg.k} failed: ${(e as Error)?.stack ?? String(e)}`);
    }
  }
}
