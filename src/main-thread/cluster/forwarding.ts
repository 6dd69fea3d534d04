/**
 * Publish and event forwarding between the masters of a cluster (salt-cluster.md §1: Salt's EventPublisher
 * pushes every event to every peer, and its EventMonitor re-publishes peers' job publishes).
 *
 * - **Publishes.** A job published on any master reaches the minions of every master, sealed (encrypted and
 *   signed) once in the cluster: the origin's publisher thread seals it, and the frames with their loads go once
 *   to each peer (channel `cl/pub`: `l` the msgpack of the loads, `p` the sealed frames, one per load); a peer
 *   hands what it receives to its own publisher thread only, which sends each frame as it came when its minions
 *   accept it and seals the load itself otherwise (src/workers/publisher/sealed-frame.ts). The shared AES key
 *   (`cluster_pki_dir/.aes`) and the shared cluster key make the frames every master would build equivalent;
 *   under `cluster_id` they carry no serial. Salt's peers (EventMonitor) seal every publish again; a brine
 *   that forwards loads only (no `p`) is still understood, and one that reads only `l` still understands this one.
 * - **Events.** Every event a master's request workers fire (returns, `salt/job/<jid>/new`, auth, minion
 *   events) goes onto its own bus and once to each peer (channel `cl/ev`); a peer puts it on its bus, so a
 *   CLI waiting on the originating master sees returns that landed anywhere, and mirrors into its job cache
 *   (src/workers/state-sync/worker.ts) only the job records the origin vouches for: the batch lists (`v`) the indices of
 *   the frames its own `_return` and publish paths fired (Effects.verified). A minion event whose tag looks
 *   like `salt/job/<jid>/ret/<id>` still reaches the peers' buses, never their job caches: nothing a minion
 *   puts in an event's tag or data can set that list.
 *
 * No loops and no duplicates, by construction and checked: only what this master's own workers produced is
 * ever sent (something received is never forwarded again); each batch carries (origin, incarnation, seq) and a
 * receiver drops a batch from itself, or one whose seq it has already seen from that origin's incarnation.
 * The peer channel is at most once and in order per pair, so the check only ever fires on a bug.
 *
 * Best effort, like Salt's pushers: a batch is sent only to peers with an established session and dropped
 * (counted, logged with a budget) when a peer's queue is full; nothing is queued for a dead master, so a
 * master coming back never replays stale publishes to its minions.
 */
import { randomInt } from "node:crypto";
import { cbor } from "../../shared/cbor.js";
import { getLogger } from "../../shared/log.js";
import { NONCE_PACKED_BYTES } from "../../shared/nonce-set.js";
import { LogBudget } from "../../shared/log-budget.js";

export const EVENT_CHANNEL = "cl/ev";
export const PUBLISH_CHANNEL = "cl/pub";
/** frames one forwarded event batch holds at most, count (a receiver refuses more) */
export const forwardFramesMax = 100_000;
/** sealed publish frames one forwarded batch holds at most, count (a receiver refuses more) */
export const forwardPublishesMax = 100_000;
/** packed request nonces one forwarded batch holds at most, bytes (a worker batch dispatches at most 64) */
export const forwardNonceBytesMax = 1024 * 1024;

const log = getLogger("brine.cluster.forward");
/** one line per 10 s for this flood, then a count of what was held back */
const dropLog = new LogBudget(1, 10_000, (line) => log.warning(line), "forwarding");
/** batches refused before their body is read (malformed, relayed): a few lines per 10 s, then a count */
const refusedLog = new LogBudget(5, 10_000, (line) => log.warning(line), "refused forwarded batches");

/** What forwarding needs of the peer channel (PeerTransport has it). */
export interface ForwardChannel {
  send(peerId: string, channel: string, payload: Uint8Array): void;
  upPeers(): string[];
  on(channel: string, handler: (msg: { from: string; payload: Uint8Array }) => unknown): () => void;
}

/** Where received things go on this master. */
export interface ForwardSinks {
  /** frames onto the local event bus only */
  events(frames: Buffer[]): void;
  /** a peer's publishes to the local publisher thread only: the msgpack of its loads, its sealed frames if it sent them */
  publishes(from: string, loads: Uint8Array, frames?: Uint8Array[]): void;
  /** job events to mirror into the local job cache (may be absent: no mirroring) */
  mirror?(frames: Uint8Array[]): void;
  /** an accepted batch arrived from this peer */
  heard?(from: string): void;
  /** the request nonces a peer accepted (packed) */
  nonces?(packed: Uint8Array): void;
}

interface Envelope {
  /** origin node id */
  o: string;
  /** origin incarnation (random per start) */
  i: number;
  /** batch sequence number, per origin incarnation and channel */
  s: number;
  /** event frames (cl/ev) */
  f?: Uint8Array[];
  /** indices into `f` of the job records the origin verified (strictly increasing); absent: none */
  v?: number[];
  /** the request nonces the origin accepted (packed, nonce-set.ts): replayed to this master, refused */
  n?: Uint8Array;
  /** msgpack of the publish loads (cl/pub) */
  l?: Uint8Array;
  /** the publish frames the origin sealed, one per load of `l` in its order (cl/pub; absent from an older brine) */
  p?: Uint8Array[];
}

export interface ForwardCounters {
  eventBatchesOut: number;
  eventsOut: number;
  /** publishes sent, each counted once per peer */
  publishesOut: number;
  eventsIn: number;
  /** publish batches received */
  publishBatchesIn: number;
  /** sends refused by the channel (queue full, peer gone) */
  dropped: number;
  /** received batches refused: from ourselves, seen before, malformed */
  refused: number;
}

/** Cheap test on a bus frame's first bytes: is its tag under salt/job/ (the tag sits right after the map header)? */
export function isJobEventFrame(frame: Uint8Array): boolean {
  const head = Buffer.from(frame.buffer, frame.byteOffset, Math.min(frame.byteLength, 48));
  return head.includes("salt/job/");
}

/** The frames of an event batch and the indices of its verified job records, or why the batch is refused. */
export function checkEventBody(env: { f?: unknown; v?: unknown; n?: unknown }): { frames: Uint8Array[]; verified: number[]; nonces?: Uint8Array } | string {
  const f = env.f;
  if (!Array.isArray(f) || f.length > forwardFramesMax || !f.every((x) => x instanceof Uint8Array)) return "bad frames";
  const v = env.v ?? [];
  if (!Array.isArray(v) || v.length > f.length) return "bad verified list";
  let prev = -1;
  for (const i of v) {
    if (!Number.isSafeInteger(i) || (i as number) <= prev || (i as number) >= f.length) return "bad verified index";
    prev = i as number;
  }
  const n = env.n;
  if (n !== undefined && (!(n instanceof Uint8Array) || n.byteLength % NONCE_PACKED_BYTES !== 0 || n.byteLength > forwardNonceBytesMax)) return "bad nonces";
  return { frames: f as Uint8Array[], verified: v as number[], ...(n !== undefined ? { nonces: n } : {}) };
}

export class ClusterForwarder {
  readonly counters: ForwardCounters = { eventBatchesOut: 0, eventsOut: 0, publishesOut: 0, eventsIn: 0, publishBatchesIn: 0, dropped: 0, refused: 0 };
  private readonly incarnation = randomInt(1, 2 ** 47);
  private seqEv = 0;
  private seqPub = 0;
  private readonly seen = new Map<string, { i: number; ev: number; pub: number }>();
  private readonly offs: (() => void)[] = [];

  constructor(
    private readonly selfId: string,
    private readonly channel: ForwardChannel,
    private readonly sinks: ForwardSinks,
  ) {
    this.offs.push(channel.on(EVENT_CHANNEL, (m) => this.onEvents(m.from, m.payload)));
    this.offs.push(channel.on(PUBLISH_CHANNEL, (m) => this.onPublishes(m.from, m.payload)));
  }

  /**
   * Forwards the events this master's request workers produced (call after handing them to the local bus).
   * `verified`: indices into `events` of the job records this master verified (the only ones peers store).
   */
  forward(events: readonly Uint8Array[], verified?: readonly number[], nonces?: Uint8Array): void {
    if (events.length === 0 && !(nonces && nonces.byteLength > 0)) return;
    const peers = this.channel.upPeers();
    if (peers.length === 0) return;
    const env: Envelope = { o: this.selfId, i: this.incarnation, s: ++this.seqEv, f: events as Uint8Array[] };
    if (verified && verified.length > 0) env.v = verified as number[];
    if (nonces && nonces.byteLength > 0) env.n = nonces;
    const payload = cbor.encode(env) as Uint8Array;
    this.counters.eventBatchesOut++;
    this.counters.eventsOut += events.length * this.sendAll(peers, EVENT_CHANNEL, payload);
  }

  /**
   * Forwards this master's own publishes as its publisher thread sealed them: `loads` the msgpack of the array of
   * their loads, `frames` their sealed frames, one per load in the same order.
   */
  forwardPublishes(loads: Uint8Array, frames: readonly Uint8Array[]): void {
    if (frames.length === 0) return;
    const peers = this.channel.upPeers();
    if (peers.length === 0) return;
    const payload = cbor.encode({ o: this.selfId, i: this.incarnation, s: ++this.seqPub, l: loads, p: frames as Uint8Array[] } satisfies Envelope) as Uint8Array;
    this.counters.publishesOut += frames.length * this.sendAll(peers, PUBLISH_CHANNEL, payload);
  }

  private sendAll(peers: string[], channel: string, payload: Uint8Array): number {
    let sent = 0;
    for (const p of peers) {
      try {
        this.channel.send(p, channel, payload);
        sent++;
      } catch (e) {
        this.counters.dropped++;
        dropLog.line(`forwarding to ${p} dropped (${(e as Error).message}); ${this.counters.dropped} dropped so far`);
      }
    }
    return sent;
  }

  /** Decodes and checks an envelope; undefined (counted) for one to drop. */
  private accept(from: string, payload: Uint8Array, kind: "ev" | "pub"): Envelope | undefined {
    let env: Envelope;
    try {
      env = cbor.decode(payload) as Envelope;
    } catch {
      this.counters.refused++;
      refusedLog.line(`refused a ${kind} batch from ${from}: not CBOR`);
      return undefined;
    }
    if (env === null || typeof env !== "object" || typeof env.o !== "string" || !Number.isSafeInteger(env.i) || !Number.isSafeInteger(env.s)) {
      this.counters.refused++;
      refusedLog.line(`refused a ${kind} batch from ${from}: no origin, incarnation and sequence number`);
      return undefined;
    }
    // only the origin itself sends its batches: anything else would be a relay (a loop) or a forgery
    if (env.o === this.selfId || env.o !== from) {
      this.counters.refused++;
      refusedLog.line(`refused a ${kind} batch from ${from}: its origin is ${JSON.stringify(env.o.slice(0, 64))}`);
      return undefined;
    }
    let st = this.seen.get(from);
    if (!st || st.i !== env.i) this.seen.set(from, (st = { i: env.i, ev: 0, pub: 0 }));
    if (env.s <= st[kind]) {
      this.counters.refused++;
      log.warning(`dropped a duplicate ${kind} batch ${env.s} from ${from}`);
      return undefined;
    }
    st[kind] = env.s;
    return env;
  }

  private onEvents(from: string, payload: Uint8Array): void {
    const env = this.accept(from, payload, "ev");
    if (!env) return;
    const body = checkEventBody(env);
    if (typeof body === "string") {
      this.counters.refused++;
      log.warning(`refused an event batch from ${from}: ${body}`);
      return;
    }
    this.sinks.heard?.(from);
    if (body.nonces) this.sinks.nonces?.(body.nonces);
    const frames = body.frames.map((f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength));
    this.counters.eventsIn += frames.length;
    if (frames.length > 0) this.sinks.events(frames);
    if (this.sinks.mirror && body.verified.length > 0) {
      const jobs = body.verified.map((i) => frames[i]!).filter(isJobEventFrame);
      if (jobs.length > 0) this.sinks.mirror(jobs);
    }
  }

  private onPublishes(from: string, payload: Uint8Array): void {
    const env = this.accept(from, payload, "pub");
    if (!env) return;
    // shapes here; the loads are decoded, and each frame checked, by the publisher thread (sealed-frame.ts)
    const fault = !(env.l instanceof Uint8Array)
      ? "no loads"
      : env.p !== undefined && (!Array.isArray(env.p) || env.p.length > forwardPublishesMax || !env.p.every((f) => f instanceof Uint8Array))
        ? "bad sealed frames"
        : undefined;
    if (fault) {
      this.counters.refused++;
      refusedLog.line(`refused a publish batch from ${from}: ${fault}`);
      return;
    }
    this.sinks.heard?.(from);
    this.counters.publishBatchesIn++;
    this.sinks.publishes(from, env.l!, env.p);
  }

  close(): void {
    for (const off of this.offs) off();
  }
}
