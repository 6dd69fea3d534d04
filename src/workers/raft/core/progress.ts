/**
 * The leader's view of each follower: how much of the log it holds and how to send it more.
 *
 * States:
 * - probe: the leader does not know where the follower's log matches; one MsgApp per heartbeat interval,
 *   backing off by conflict term on each rejection.
 * - replicate: the follower acknowledged; the leader streams entries optimistically (next = last sent + 1),
 *   bounded by maxInflightMsgs.
 * - snapshot: the follower's next entry is compacted away; the leader streams snapshot chunks and sends no
 *   entries until the follower reports the snapshot installed.
 */
import type { NodeId, Snapshot } from "./types.js";

export type ProgressState = "probe" | "replicate" | "snapshot";

/** A bounded FIFO of the last index carried by each MsgApp in flight (flow control). */
export class Inflights {
  private readonly cap: number;
  private buf: number[];
  private start = 0;
  count = 0;

  constructor(cap: number) {
    this.cap = cap;
    this.buf = new Array<number>(cap);
  }

  full(): boolean {
    return this.count >= this.cap;
  }

  add(lastIndex: number): void {
    if (this.full()) throw new Error("inflights: add while full");
    this.buf[(this.start + this.count) % this.cap] = lastIndex;
    this.count++;
  }

  /** Frees every message whose last index is <= i (they were acknowledged). */
  freeLE(i: number): void {
    while (this.count > 0 && this.buf[this.start]! <= i) {
      this.start = (this.start + 1) % this.cap;
      this.count--;
    }
    if (this.count === 0) this.start = 0;
  }

  reset(): void {
    this.start = 0;
    this.count = 0;
  }
}

/** Outbound snapshot transfer to one follower, sent as chunks with stop-and-wait acknowledgement. */
export interface SnapshotTransfer {
  snapshot: Snapshot;
  /** next byte to send; everything before it was acknowledged */
  offset: number;
  /** ticks since the last chunk went out or was acknowledged (drives resends) */
  idleTicks: number;
}

/**
 * Invariants: match < next; in "snapshot" state `transfer` is set and pendingSnapshot is its index;
 * a learner's match never counts toward commit (quorum.ts only sees voters).
 */
export class Progress {
  match = 0;
  next: number;
  state: ProgressState = "probe";
  /** in probe state: a MsgApp was sent this heartbeat interval and is unanswered */
  probeSent = false;
  /** the follower sent us something since the last check-quorum round */
  recentActive = false;
  /** last index sent when the previous heartbeat answer arrived (detects lost MsgApps in the replicate state) */
  sentAtLastHeartbeat = -1;
  /** highest commit index sent to this follower */
  sentCommit = 0;
  /**
   * highest index the follower waits to learn is committed (its forwarded proposals and reads): up to here
   * a commit is sent at once, in an empty MsgApp if need be; beyond it, with the next append or heartbeat
   */
  commitWaited = 0;
  pendingSnapshot = 0;
  transfer: SnapshotTransfer | undefined;
  isLearner: boolean;
  readonly inflights: Inflights;

  constructor(next: number, maxInflight: number, isLearner: boolean) {
    this.next = next;
    this.inflights = new Inflights(maxInflight);
    this.isLearner = isLearner;
  }

  private resetState(state: ProgressState): void {
    this.probeSent = false;
    this.pendingSnapshot = 0;
    this.transfer = undefined;
    this.state = state;
    this.inflights.reset();
  }

  becomeProbe(): void {
    // After a snapshot, resume right after it (or after match, if the follower already had more).
    if (this.state === "snapshot") {
      const pending = this.pendingSnapshot;
      this.resetState("probe");
      this.next = Math.max(this.match + 1, pending + 1);
    } else {
      this.resetState("probe");
      this.next = this.match + 1;
    }
  }

  becomeReplicate(): void {
    this.resetState("replicate");
    this.next = this.match + 1;
  }

  becomeSnapshot(snapshot: Snapshot): void {
    this.resetState("snapshot");
    this.pendingSnapshot = snapshot.metadata.index;
    this.transfer = { snapshot, offset: 0, idleTicks: 0 };
  }

  /** Records that a MsgApp carrying entries up to lastIndex went out. */
  sentEntries(count: number, lastIndex: number): void {
    if (this.state === "replicate") {
      if (count > 0) {
        this.next = lastIndex + 1;
        this.inflights.add(lastIndex);
      }
    } else if (this.state === "probe") {
      this.probeSent = true;
    }
  }

  /** An acknowledgement up to n arrived. Returns false if it is stale (match already >= n). */
  maybeUpdate(n: number): boolean {
    let updated = false;
    if (this.match < n) {
      this.match = n;
      updated = true;
      this.probeSent = false;
    }
    this.next = Math.max(this.next, n + 1);
    return updated;
  }

  /**
   * A rejection of the MsgApp whose previous index was `rejected`; `matchHint` is where the follower (via
   * conflict-term search on both sides) suggests the logs may match. Returns false if the rejection is
   * stale (it answers an older MsgApp than the one we are waiting for).
   */
  maybeDecrTo(rejected: number, matchHint: number): boolean {
    if (this.state === "replicate") {
      if (rejected <= this.match) return false;
      this.next = this.match + 1;
      return true;
    }
    if (this.next - 1 !== rejected) return false;
    this.next = Math.max(Math.min(rejected, matchHint + 1), this.match + 1);
    this.probeSent = false;
    return true;
  }

  /** Whether sending entries to this follower must wait. */
  isPaused(): boolean {
    switch (this.state) {
      case "probe":
        return this.probeSent;
      case "replicate":
        return this.inflights.full();
      case "snapshot":
        return true;
    }
  }
}

/** Progress of every member, keyed by id, plus the configuration sets they were built from. */
export class ProgressTracker {
  readonly voters = new Set<NodeId>();
  readonly learners = new Set<NodeId>();
  readonly progress = new Map<NodeId, Progress>();
  /** votes received in the current (pre-)election; true = granted */
  readonly votes = new Map<NodeId, boolean>();
  readonly maxInflight: number;

  constructor(maxInflight: number) {
    this.maxInflight = maxInflight;
  }

  isVoter(id: NodeId): boolean {
    return this.voters.has(id);
  }

  isMember(id: NodeId): boolean {
    return this.voters.has(id) || this.learners.has(id);
  }

  /** Rebuilds the sets; keeps existing progress for members that stay, creates it (next = nextIndex) for new ones. */
  setConfig(voters: readonly NodeId[], learners: readonly NodeId[], nextIndex: number): void {
    this.voters.clear();
    this.learners.clear();
    for (const id of voters) this.voters.add(id);
    for (const id of learners) this.learners.add(id);
    for (const id of [...this.progress.keys()]) if (!this.isMember(id)) this.progress.delete(id);
    for (const id of voters) this.ensure(id, nextIndex, false);
    for (const id of learners) this.ensure(id, nextIndex, true);
  }

  private ensure(id: NodeId, nextIndex: number, isLearner: boolean): void {
    const pr = this.progress.get(id);
    if (pr) pr.isLearner = isLearner;
    else this.progress.set(id, new Progress(nextIndex, this.maxInflight, isLearner));
  }

  /** Fresh progress for every member (a new leader knows nothing about followers yet). */
  resetAll(nextIndex: number): void {
    for (const [id, pr] of this.progress) {
      this.progress.set(id, new Progress(nextIndex, this.maxInflight, pr.isLearner));
    }
  }

  get(id: NodeId): Progress | undefined {
    return this.progress.get(id);
  }
}
