/**
 * Raft messages over the authenticated peer channel (src/workers/raft/peer/). The Raft worker owns the
 * PeerTransport, so this is a direct adapter inside that one thread, with no MessagePort hop:
 *
 *   GroupManager ─ RaftPeerLink.send(group, msgs) ─ encode ─▶ PeerTransport.send(to, "raft"); RaftPeerLink.flush() ─▶ PeerTransport.flush(peers)
 *   GroupManager.receive ◀─ validate ◀─ decode ◀─ RaftPeerLink ◀─ PeerTransport "raft" handler
 *
 * One payload per destination per send() call (raft-wire.ts: CBOR `[2, group, message tuples...]` to a peer
 * whose handshake said it reads that form, `{g: group, m: Message[]}` to any other), queued on the peer channel
 * (held: nothing is written until flush());
 * flush() writes every destination's queue at once, so what all groups sent in one pump step (the manager
 * calls flush after each batch of sends) leaves as one sealed frame and one socket write per peer, not one
 * per group (the peer channel coalesces queued bodies into a frame).
 *
 * Trust: a message is accepted only if its `from` is the Raft id of the node id the peer channel authenticated
 * (a master cannot speak for another), its `to` is this node, its type is one peers exchange, and its shape
 * and sizes are what the core expects (a malformed message that threw inside the core would stop the node).
 *
 * Delivery is best effort, as Raft wants it: a message for a peer without an established session is dropped
 * (Raft resends), never queued behind a dead connection to arrive stale.
 *
 * Reachability (etcd's ReportUnreachable): the transport's peerDown tells the manager a peer is down at once,
 * and so does the first message the link has to drop for it; the transport's peerUp, or the first message
 * that goes through again, tells it the peer is up. One report per edge, not per message. A leader probes a
 * down peer instead of pipelining appends to it, and probes it at once when it is up again.
 *
 * Fault injection (brine_cluster_chaos_file): the cluster service pushes its cut set here (setCut); messages
 * to and from a cut peer are dropped as a partition would drop them, and a cut peer counts as down.
 */
import type { EventEmitter } from "node:events";
import { isBrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import type { Entry, Message, MessageType, SnapshotChunk } from "./core/types.js";
import { raftIdOf } from "../../shared/node-ids.js";
import type { Transport } from "./manager.js";
import type { PeerTransportEvents, SendOptions } from "./peer/peer-types.js";
import { clusterLimits } from "../../shared/cluster-limits.js";
import { NO_STAGES, type StageSink } from "../../shared/metrics/stage-clock.js";
import { decodeRaftPayload, encodeRaftPayload, PEER_MESSAGE_TYPES } from "./raft-wire.js";

export { decodeRaftPayload, encodeRaftPayload, raftMessagesPerPayloadMax } from "./raft-wire.js";

/** The peer channel name Raft traffic uses. */
export const RAFT_CHANNEL = "raft";
/** entries in one inbound message, count */
export const raftEntriesPerMessageMax = 65_536;

const log = getLogger("brine.cluster.raft");

/** Message types nodes send each other (local ones like MsgHup never cross the wire). */
const PEER_TYPES = new Set<MessageType>(PEER_MESSAGE_TYPES);

function isUint(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

function asBytes(v: unknown): Uint8Array | undefined {
  if (!(v instanceof Uint8Array)) return undefined;
  return v.constructor === Uint8Array ? v : new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
}

function checkEntry(e: unknown): Entry | undefined {
  if (e === null || typeof e !== "object") return undefined;
  const x = e as Record<string, unknown>;
  const data = asBytes(x.data);
  if (!isUint(x.term) || !isUint(x.index) || (x.type !== "normal" && x.type !== "conf") || !data) return undefined;
  if (data.length > clusterLimits.entryBytesMax) return undefined;
  return { term: x.term, index: x.index, type: x.type, data };
}

function checkSnapshot(s: unknown): SnapshotChunk | undefined {
  if (s === null || typeof s !== "object") return undefined;
  const x = s as Record<string, unknown>;
  const md = x.metadata as Record<string, unknown> | undefined;
  const data = asBytes(x.data);
  if (!md || typeof md !== "object" || !isUint(md.index) || !isUint(md.term) || !data) return undefined;
  const cs = md.confState as Record<string, unknown> | undefined;
  if (!cs || typeof cs !== "object" || !isUint(cs.confIndex)) return undefined;
  const ids = (v: unknown) => Array.isArray(v) && v.length <= clusterLimits.votersMax + clusterLimits.learnersMax && v.every(isUint);
  if (!ids(cs.voters) || !ids(cs.learners)) return undefined;
  if (!isUint(x.offset) || !isUint(x.totalBytes) || x.totalBytes > clusterLimits.snapshotBytesMax || x.offset + data.length > x.totalBytes) return undefined;
  return {
    metadata: { index: md.index, term: md.term, confState: { voters: [...(cs.voters as number[])], learners: [...(cs.learners as number[])], confIndex: cs.confIndex } },
    offset: x.offset,
    totalBytes: x.totalBytes,
    data,
  };
}

/**
 * A validated copy of a peer's message, or a reason it was refused. `fromRaftId` is the Raft id of the
 * authenticated sender, `selfRaftId` ours.
 */
export function checkPeerMessage(raw: unknown, fromRaftId: number, selfRaftId: number): Message | string {
  if (raw === null || typeof raw !== "object") return "not a map";
  const x = raw as Record<string, unknown>;
  if (typeof x.type !== "string" || !PEER_TYPES.has(x.type as MessageType)) return `type ${String(x.type).slice(0, 32)} is not a peer message`;
  if (x.from !== fromRaftId) return `from ${String(x.from)} is not the authenticated sender`;
  if (x.to !== selfRaftId) return `to ${String(x.to)} is not this node`;
  for (const k of ["term", "logTerm", "index", "commit", "rejectHint"] as const) if (!isUint(x[k])) return `${k} is not a count`;
  if (typeof x.reject !== "boolean") return "reject is not a boolean";
  const m: Message = {
    type: x.type as MessageType,
    from: fromRaftId,
    to: selfRaftId,
    term: x.term as number,
    logTerm: x.logTerm as number,
    index: x.index as number,
    commit: x.commit as number,
    reject: x.reject,
    rejectHint: x.rejectHint as number,
  };
  if (x.entries !== undefined && x.entries !== null) {
    if (!Array.isArray(x.entries) || x.entries.length > raftEntriesPerMessageMax) return "entries is not a list of entries";
    const entries: Entry[] = [];
    for (const e of x.entries) {
      const ok = checkEntry(e);
      if (!ok) return "malformed entry";
      entries.push(ok);
    }
    m.entries = entries;
  }
  if (x.snapshot !== undefined && x.snapshot !== null) {
    const s = checkSnapshot(x.snapshot);
    if (!s) return "malformed snapshot chunk";
    m.snapshot = s;
  }
  for (const k of ["snapOffset", "incarnation", "batch", "transferee"] as const) {
    if (x[k] === undefined || x[k] === null) continue;
    if (!isUint(x[k])) return `${k} is not a count`;
    m[k] = x[k] as number;
  }
  if (x.context !== undefined && x.context !== null) {
    if (typeof x.context !== "string" || x.context.length > 1024) return "context is not a short string";
    m.context = x.context;
  }
  if (x.requests !== undefined && x.requests !== null) {
    if (!Array.isArray(x.requests) || x.requests.length > raftEntriesPerMessageMax || !x.requests.every(isUint)) return "requests is not a list of ids";
    m.requests = [...(x.requests as number[])];
  }
  if (x.quiesce !== undefined && x.quiesce !== null) {
    if (typeof x.quiesce !== "boolean") return "quiesce is not a boolean";
    if (x.quiesce) m.quiesce = true;
  }
  if (x.reason !== undefined && x.reason !== null) {
    if (typeof x.reason !== "string" || x.reason.length > 64) return "reason is not a code";
    m.reason = x.reason as Message["reason"];
  }
  return m;
}

export interface InboundSink {
  receive(group: string, m: Message): void;
  /** the transport's word on a peer's session (GroupManager.peerReachable) */
  peerReachable?(nodeId: string, reachable: boolean): void;
}

/** Counters of the link (tests and the bench read them through status, if wired). */
export interface RaftLinkCounters {
  sent: number;
  received: number;
  dropped: number;
  refused: number;
}

/** What the link needs of the peer channel (PeerTransport has it; tests use a fake). */
export interface RaftPeerChannel {
  send(peerId: string, channel: string, payload: Uint8Array, opts?: SendOptions): void;
  /** writes what is queued for each of `peerIds` now, every peer's frame sealed before the first is sent (PeerTransport.flush) */
  flush(peerIds: readonly string[] | ReadonlySet<string>): void;
  isUp(peerId: string): boolean;
  /** the newest form of `channel`'s payloads the peer reads (PeerTransport.peerReads); without it, 1 */
  peerReads?(peerId: string, channel: string): number;
  on(channel: string, handler: (msg: { from: string; payload: Uint8Array }) => unknown): () => void;
  readonly events: Pick<EventEmitter<PeerTransportEvents>, "on" | "off">;
}

/** how the link queues: the manager flushes after every batch of sends (Transport.flush), so nothing else writes */
const HELD: SendOptions = Object.freeze({ held: true });

/** refused inbound messages logged, count (then only counted) */
const refusalLogsMax = 100;
/** inbound payloads held until the manager is attached, count (more are dropped: Raft resends) */
const earlyPayloadsMax = 1024;

/**
 * The GroupManager's Transport over the worker's own PeerTransport. Node ids are learned from the founders
 * and configured peers, from every session that comes up and from inbound senders; a message for a Raft id
 * with no known node id is dropped.
 */
export class RaftPeerLink implements Transport {
  private readonly names = new Map<number, string>();
  private readonly selfRaftId: number;
  private sink: InboundSink | undefined;
  private early: { from: string; bytes: Uint8Array }[] = [];
  private refusalsLogged = 0;
  /** peers the manager was told are down, until a message to them goes through or their session is up */
  private readonly down = new Set<string>();
  /** fault injection: peers cut off (setCut) */
  private cut = new Set<string>();
  /** peers something was queued for since the last flush() */
  private readonly unflushed = new Set<string>();
  private readonly offs: (() => void)[] = [];
  readonly counters: RaftLinkCounters = { sent: 0, received: 0, dropped: 0, refused: 0 };

  constructor(
    private readonly channel: RaftPeerChannel,
    readonly selfId: string,
    known: Iterable<string> = [],
    private readonly stages: StageSink = NO_STAGES,
  ) {
    this.selfRaftId = raftIdOf(selfId);
    for (const id of known) this.learn(id);
    this.offs.push(channel.on(RAFT_CHANNEL, (m) => this.onInbound(m.from, m.payload)));
    const up = (id: string) => {
      this.learn(id);
      if (this.cut.has(id)) return;
      this.down.delete(id);
      this.sink?.peerReachable?.(id, true);
    };
    const lost = (id: string) => this.markDown(id);
    channel.events.on("peerUp", up);
    channel.events.on("peerDown", lost);
    this.offs.push(() => {
      channel.events.off("peerUp", up);
      channel.events.off("peerDown", lost);
    });
  }

  /** Inbound messages go to `sink` from now on (those that arrived before are delivered at once). */
  attach(sink: InboundSink): void {
    this.sink = sink;
    const early = this.early;
    this.early = [];
    for (const m of early) this.onInbound(m.from, m.bytes);
  }

  learn(id: string): void {
    try {
      this.names.set(raftIdOf(id), id);
    } catch {
      // an id the Raft layer cannot name is ignored
    }
  }

  /** Fault injection: drop Raft traffic to and from `ids` (an empty list heals); a cut peer counts as down. */
  setCut(ids: readonly string[]): void {
    const next = new Set(ids.filter((x) => x !== this.selfId));
    for (const id of next) if (!this.cut.has(id)) this.markDown(id);
    this.cut = next;
  }

  send(group: string, messages: readonly Message[]): void {
    const byDest = new Map<number, Message[]>();
    for (const m of messages) {
      if (this.stages.on) this.stages.count(`raft.out.${m.type}`);
      let l = byDest.get(m.to);
      if (!l) byDest.set(m.to, (l = []));
      l.push(m);
    }
    for (const [rid, ms] of byDest) {
      const to = this.names.get(rid);
      if (to === undefined || rid === this.selfRaftId) {
        this.counters.dropped += ms.length;
        continue;
      }
      let sent = false;
      if (!this.cut.has(to) && this.channel.isUp(to)) {
        try {
          // queued only: written by flush(), which the manager calls after every batch of sends
          const t = this.stages.now();
          const payload = encodeRaftPayload(group, ms, this.channel.peerReads?.(to, RAFT_CHANNEL) ?? 1);
          this.stages.add("raft.encode", t);
          this.channel.send(to, RAFT_CHANNEL, payload, HELD);
          this.unflushed.add(to);
          sent = true;
        } catch {
          // queue full or peer unknown: Raft resends
        }
      }
      if (sent) {
        this.counters.sent += ms.length;
        if (this.down.delete(to)) this.sink?.peerReachable?.(to, true);
      } else {
        this.counters.dropped += ms.length;
        this.markDown(to);
      }
    }
  }

  /** Writes what send() queued, one frame per peer (the manager calls it after each batch of sends). */
  flush(): void {
    if (this.unflushed.size === 0) return;
    this.channel.flush(this.unflushed);
    this.unflushed.clear();
  }

  /** Tells the manager once (per edge) that `id` is unreachable. */
  private markDown(id: string): void {
    if (this.down.has(id)) return;
    this.down.add(id);
    // before the manager is attached there is no leader whose progress it could change
    this.sink?.peerReachable?.(id, false);
  }

  private onInbound(from: string, bytes: Uint8Array): void {
    if (this.cut.has(from)) return; // as a partition would: nothing arrives
    if (!this.sink) {
      if (this.early.length < earlyPayloadsMax) this.early.push({ from, bytes });
      return;
    }
    this.learn(from);
    let fromRaftId: number;
    try {
      fromRaftId = raftIdOf(from);
    } catch {
      return this.refuse(from, "the sender's id is not a node id");
    }
    let decoded;
    const t = this.stages.now();
    try {
      decoded = decodeRaftPayload(bytes);
    } catch (e) {
      return this.refuse(from, (e as Error).message);
    }
    for (const raw of decoded.messages) {
      const m = checkPeerMessage(raw, fromRaftId, this.selfRaftId);
      if (typeof m === "string") {
        this.refuse(from, m);
        continue;
      }
      if (this.stages.on) this.stages.count(`raft.in.${m.type}`);
      this.counters.received++;
      try {
        this.sink.receive(decoded.group, m);
      } catch (e) {
        if (!isBrineError(e)) throw e;
        this.refuse(from, e.message);
      }
    }
    this.stages.add("raft.decode", t);
  }

  private refuse(from: string, why: string): void {
    this.counters.refused++;
    if (this.refusalsLogged < refusalLogsMax) {
      this.refusalsLogged++;
      log.warning(`refused a raft message from ${from}: ${why}`);
    }
  }

  close(): void {
    for (const off of this.offs.splice(0)) off();
  }
}
