/**
 * The data the Raft core consumes and produces. Plain objects only, so the worker shell can encode them with
 * cbor-x as they are and the simulator can copy them without a codec.
 *
 * Nothing here does I/O. Entry data is opaque bytes: the core never looks inside a normal entry.
 */
import type { ErrCode } from "../../../shared/errors.js";

/**
 * A stable node identity, an integer in [1, 2^53). It is chosen by the cluster shell when a node is first
 * admitted and never derived from an address or interface (Salt's Raft keyed peers by interface, so a
 * re-addressed node became a stranger). 0 means "none".
 */
export type NodeId = number;
export const NONE: NodeId = 0;

export type EntryType = "normal" | "conf";

/** One log entry. Invariant: index >= 1 and term >= 1 for every entry stored in a log. */
export interface Entry {
  term: number;
  index: number;
  type: EntryType;
  /** opaque to the core for "normal"; an encoded ConfChange for "conf"; empty for the leader's no-op */
  data: Uint8Array;
}

/** What must be durable before any message that depends on it leaves the node. */
export interface HardState {
  term: number;
  /** the candidate voted for in `term`, or NONE */
  vote: NodeId;
  /** highest index known committed; never decreases */
  commit: number;
}

/** Group membership. A node is a voter, a learner, or absent; never both. */
export interface ConfState {
  voters: NodeId[];
  learners: NodeId[];
  /**
   * Log index of the conf-change entry this membership came from (0 = bootstrap). Conf entries at or below
   * it are already reflected here, so the core skips them when committed entries are replayed after a restart.
   */
  confIndex: number;
}

export interface SnapshotMetadata {
  /** last log index the snapshot covers; the log continues at index + 1 */
  index: number;
  /** term of the entry at `index` */
  term: number;
  /** membership as of `index` */
  confState: ConfState;
}

export interface Snapshot {
  metadata: SnapshotMetadata;
  /** the application's state machine image, opaque to the core */
  data: Uint8Array;
}

/** A piece of a snapshot in flight. The receiver reassembles chunks in offset order. */
export interface SnapshotChunk {
  metadata: SnapshotMetadata;
  /** byte offset of `data` in the whole snapshot */
  offset: number;
  /** size of the whole snapshot in bytes; the chunk ending there is the last one */
  totalBytes: number;
  data: Uint8Array;
}

export type ConfChangeKind = "addVoter" | "addLearner" | "removeNode";

/**
 * One membership change. Only one may be in flight at a time (Ongaro's thesis §4.1 single-server change);
 * "addVoter" on a learner promotes it, "addLearner" on a voter demotes it.
 */
export interface ConfChange {
  kind: ConfChangeKind;
  node: NodeId;
  /** opaque to the core; e.g. the new member's address, for the shell */
  context?: Uint8Array;
}

/**
 * Message kinds. "Local" kinds never cross the network: they are how ticks and API calls enter `step`.
 * Forwarding kinds (Prop, PropResp, ReadIndex, ReadIndexResp, TransferLeader) carry term 0: they are
 * requests to whoever is leader, not claims about a term.
 */
export type MessageType =
  // local
  | "MsgHup" // election timeout elapsed, or campaign() called
  | "MsgBeat" // heartbeat timeout elapsed on the leader
  | "MsgCheckQuorum" // the leader checks it still hears from a quorum
  | "MsgUnreachable" // the transport reports a peer unreachable
  | "MsgReachable" // the transport reports a peer reachable again
  // forwarding
  | "MsgProp"
  | "MsgPropResp"
  | "MsgReadIndex"
  | "MsgReadIndexResp"
  | "MsgTransferLeader"
  // peer to peer
  | "MsgApp"
  | "MsgAppResp"
  | "MsgVote"
  | "MsgVoteResp"
  | "MsgPreVote"
  | "MsgPreVoteResp"
  | "MsgHeartbeat"
  | "MsgHeartbeatResp"
  | "MsgSnap"
  | "MsgSnapResp"
  | "MsgTimeoutNow";

/** Vote context that lets a leadership-transfer election bypass the followers' leader lease. */
export const CAMPAIGN_TRANSFER = "transfer";

/**
 * One message. A flat shape (like etcd's protobuf) keeps encoding trivial; which fields matter depends on
 * `type`:
 * - MsgApp: index/logTerm = the entry preceding `entries`; commit = leader's commit.
 * - MsgAppResp: index = last index now matching (accept) or the rejected prev index (reject);
 *   rejectHint/logTerm = where the follower suggests the leader retry (conflict backtracking by term).
 * - MsgVote/MsgPreVote: index/logTerm = candidate's last entry; context = CAMPAIGN_TRANSFER when forced.
 * - MsgHeartbeat: commit = min(follower match, leader commit); context = read-index round, if any.
 *   quiesce = the leader's last heartbeat before its group rests; index/logTerm = the leader's last entry,
 *   which is committed and which the follower must hold to rest too (raft.ts, "Resting groups").
 * - MsgHeartbeatResp: context = the round it acknowledges; reject = it declines a quiesce heartbeat.
 * - MsgSnap: snapshot = one chunk. MsgSnapResp: index = snapshot index, snapOffset = next byte wanted.
 * - MsgProp: entries (index/term unset), requests = origin's request ids, incarnation = origin's,
 *   batch = origin's send attempt (a request re-sent after a refusal goes in a new batch).
 * - MsgPropResp: requests, batch, index/logTerm = first appended entry, or reject + reason.
 * - MsgReadIndex/MsgReadIndexResp: requests, batch; index = read index; reject + reason.
 * - MsgTransferLeader: transferee.
 */
export interface Message {
  type: MessageType;
  from: NodeId;
  to: NodeId;
  term: number;
  logTerm: number;
  index: number;
  commit: number;
  reject: boolean;
  rejectHint: number;
  entries?: Entry[];
  snapshot?: SnapshotChunk;
  snapOffset?: number;
  context?: string;
  requests?: number[];
  incarnation?: number;
  batch?: number;
  reason?: ErrCode;
  transferee?: NodeId;
  quiesce?: boolean;
}

export type Role = "follower" | "pre-candidate" | "candidate" | "leader";

/** Volatile state worth telling the application about (not persisted). */
export interface SoftState {
  lead: NodeId;
  role: Role;
}

/** Identifies a request (proposal, conf change or read) made through one RawNode instance. */
export type RequestId = number;
export type RequestKind = "propose" | "conf" | "read";

/**
 * The outcome of a request. Every request gets exactly one, in some later Ready: the core never drops a
 * request silently.
 * - propose/conf success: the entry committed at (index, term) with `value` as its data.
 * - read success: every write committed before the read began is at or below `index`, and this node has
 *   applied through `index` (deliver the result after applying the Ready's committedEntries).
 */
export type RequestResult =
  | { id: RequestId; kind: "propose" | "conf"; ok: true; index: number; term: number; value: Uint8Array }
  | { id: RequestId; kind: "read"; ok: true; index: number }
  | { id: RequestId; kind: RequestKind; ok: false; code: ErrCode; detail: string };

/**
 * Everything the application must act on, in this order (the persistence contract):
 * 0. optionally, send at once the messages `sendableBeforePersist` allows (a leader's appends, heartbeats and
 *    snapshot chunks: Raft thesis §10.2.1, the leader writes its log in parallel with replicating it);
 * 1. write `snapshot` (if any), append `entries` (replacing any suffix from entries[0].index on), then
 *    write `hardState` and `confState`. When `mustSync`, all of it must be durable before step 2. When not
 *    (only the commit index or the membership moved), the write may be deferred and joined to a later one:
 *    a committed index is recoverable from a quorum, and the membership is replayed from the log with it;
 * 2. send the other `messages` (they may assume step 1 is durable: a vote or an append acknowledgement is a
 *    promise);
 * 3. apply `snapshot` to the state machine, then `committedEntries` in order;
 * 4. deliver `results` to their callers (they refer to entries applied in step 3 or earlier);
 * 5. call `advance()`; no message may be stepped between ready() and advance().
 * Because of 5, a peer's acknowledgement of entries sent at step 0 is stepped only after the leader's own
 * write of them finished (a leader's own copy counts toward the quorum only once durable), provided the
 * shell finishes step 1 before it steps anything again. With asynchronous storage writes
 * (RaftConfig.asyncStorageWrites) the shell may instead advance before step 1's write is durable
 * (`advance({writeInFlight})`) and report it later (`appendDurable`): the core then counts the leader's own
 * copy and applies only what was reported durable; step 2's messages still wait for the write.
 */
export interface Ready {
  softState?: SoftState;
  hardState?: HardState;
  entries: Entry[];
  snapshot?: Snapshot;
  committedEntries: Entry[];
  /** set when committedEntries changed membership; persist with the HardState */
  confState?: ConfState;
  messages: Message[];
  results: RequestResult[];
  /** true when entries, term or vote changed: the write must be fsynced before messages go out */
  mustSync: boolean;
}

export function isHardStateEqual(a: HardState, b: HardState): boolean {
  return a.term === b.term && a.vote === b.vote && a.commit === b.commit;
}

export const EMPTY_HARD_STATE: HardState = Object.freeze({ term: 0, vote: NONE, commit: 0 });

/** Approximate in-memory/wire cost of an entry, used for every byte limit. */
export function entryBytes(e: Entry): number {
  return e.data.length + ENTRY_OVERHEAD_BYTES;
}
/** fixed per-entry cost (index, term, type) counted against byte limits, bytes */
export const ENTRY_OVERHEAD_BYTES = 16;

/** A message with every numeric field zeroed; callers override what their kind needs. */
export function newMessage(type: MessageType, from: NodeId, to: NodeId, term: number): Message {
  return { type, from, to, term, logTerm: 0, index: 0, commit: 0, reject: false, rejectHint: 0 };
}

export function isLocalMessage(t: MessageType): boolean {
  return t === "MsgHup" || t === "MsgBeat" || t === "MsgCheckQuorum" || t === "MsgUnreachable" || t === "MsgReachable";
}

/** What a node has durably written for its group before the Ready at hand: its term and its last log index. */
export interface DurableMark {
  term: number;
  lastIndex: number;
  /**
   * The core counts only durable copies toward a quorum (RaftConfig.asyncStorageWrites, the leader's own
   * included): every commit index it announces is durable on a quorum, whatever this node's disk holds yet.
   */
  quorumCommits?: boolean;
}

/**
 * Whether `m` may leave before the durable write of the Ready it came in (step 0 of the contract). Only a
 * leader's requests to followers qualify, and only when they promise nothing about its disk: their term is
 * already durable (a leader elected in this Ready waits), and the commit index they announce is within the
 * leader's durable log (a sole voter commits its entries at append time; announcing such a commit to a
 * learner before the entries are on disk could make the learner apply an entry the leader then loses).
 * Every response waits: it is a promise about the responder's disk.
 */
export function sendableBeforePersist(m: Message, durable: DurableMark): boolean {
  if (m.type !== "MsgApp" && m.type !== "MsgHeartbeat" && m.type !== "MsgSnap") return false;
  return m.term <= durable.term && (durable.quorumCommits === true || m.commit <= durable.lastIndex);
}

/** Kinds a node sends only after its HardState and entries are durable (responses that are promises). */
export function isResponseMessage(t: MessageType): boolean {
  return (
    t === "MsgAppResp" ||
    t === "MsgVoteResp" ||
    t === "MsgPreVoteResp" ||
    t === "MsgHeartbeatResp" ||
    t === "MsgSnapResp" ||
    t === "MsgPropResp" ||
    t === "MsgReadIndexResp"
  );
}
