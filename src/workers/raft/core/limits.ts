/**
 * Every bound the Raft core enforces, named with its unit. Time is counted in ticks: the shell decides how
 * long a tick is (brine's worker uses 1 tick = 100 ms for the cluster group; the simulator uses 1 tick = 1 ms
 * of simulated network time).
 */
import { BrineError } from "../../../shared/errors.js";

export interface RaftLimits {
  /**
   * Election timeout lower bound, ticks. Each follower/candidate picks its timeout uniformly in
   * [electionTicksMin, 2 * electionTicksMin) so that usually one node times out first (§5.2). The leader's
   * check-quorum period and the followers' leader lease are also electionTicksMin.
   */
  electionTicksMin: number;
  /** leader heartbeat period, ticks; must be well below electionTicksMin (broadcast << election timeout) */
  heartbeatTicks: number;
  /** MsgApp messages in flight to one follower in the replicate state before the leader pauses it */
  maxInflightMsgs: number;
  /** entry bytes (data + ENTRY_OVERHEAD_BYTES) in one MsgApp; at least one entry is always sent */
  maxSizePerMsgBytes: number;
  /** entry bytes in one Ready's committedEntries; at least one entry is always handed out */
  maxCommittedSizePerReadyBytes: number;
  /** entry bytes the leader holds appended but uncommitted before it rejects proposals (overload guard) */
  maxUncommittedEntriesBytes: number;
  /** snapshot bytes per MsgSnap chunk */
  snapshotChunkBytes: number;
  /** ticks without an acknowledgement before the leader resends the current snapshot chunk */
  snapshotResendTicks: number;
  /** largest snapshot a follower will reassemble in memory, bytes */
  snapshotBytesMax: number;
  /** ticks a request (proposal, conf change, read) may wait for its outcome before it fails */
  requestDeadlineTicks: number;
  /** requests waiting for an outcome on one node before new ones are refused */
  maxPendingRequests: number;
}

export const DEFAULT_LIMITS: Readonly<RaftLimits> = Object.freeze({
  electionTicksMin: 10,
  heartbeatTicks: 1,
  maxInflightMsgs: 256,
  maxSizePerMsgBytes: 1024 * 1024,
  maxCommittedSizePerReadyBytes: 16 * 1024 * 1024,
  maxUncommittedEntriesBytes: 64 * 1024 * 1024,
  snapshotChunkBytes: 1024 * 1024,
  snapshotResendTicks: 5,
  snapshotBytesMax: 1024 * 1024 * 1024,
  requestDeadlineTicks: 50,
  maxPendingRequests: 100_000,
});

/** Fills defaults and rejects nonsensical combinations up front, so no code path meets them later. */
export function resolveLimits(partial: Partial<RaftLimits> = {}): RaftLimits {
  const l: RaftLimits = { ...DEFAULT_LIMITS, ...partial };
  for (const [name, v] of Object.entries(l)) {
    if (!Number.isSafeInteger(v) || v < 1) throw new BrineError("CONFIG_INVALID", `raft limit ${name}=${v}`);
  }
  if (l.heartbeatTicks >= l.electionTicksMin) {
    throw new BrineError("CONFIG_INVALID", "raft heartbeatTicks must be below electionTicksMin");
  }
  if (l.snapshotChunkBytes > l.snapshotBytesMax) {
    throw new BrineError("CONFIG_INVALID", "raft snapshotChunkBytes exceeds snapshotBytesMax");
  }
  return l;
}
