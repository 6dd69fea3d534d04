/**
 * The writes of every group of the node on their way to the backend: staged by the pump, committed as one
 * transaction per pump iteration (the group commit), either waited for (`commit`) or in the background
 * (`commitInBackground`: a leader's own appends, Raft thesis §10.2.1, while the Raft thread goes on reading
 * its followers' answers). Writes reach the disk in staging order: a waited-for commit first waits for every
 * background commit before it, and the backend keeps background commits in call order.
 *
 * No decisions about Raft here: which iteration may commit in the background is the manager's (manager.ts,
 * "the pump"); this class only keeps the order, the counters and the in-flight set.
 */
import type { DurableState, GroupWrite, RaftBackend } from "./backend.js";
import type { StageSink } from "../../shared/metrics/stage-clock.js";
import { LatencyWindow } from "../../shared/metrics/latency-window.js";

export class DurableWrites {
  /**
   * Writes staged and not yet committed, in staging order (a group's writes must reach the disk in that
   * order). A deferred write (the state only: membership) is superseded by any later write of its group that
   * carries a state (the group's whole state); so at most one per group waits here.
   */
  private unwritten: GroupWrite[] = [];
  /**
   * Per group, its newest state whose only change since the last state staged with it is the commit index
   * (stateCommitOnly): not written with every commit but with the first commit after each tick (tick()), so
   * a busy group's state costs one put per tick instead of one per commit (another B-tree leaf to write and
   * fsync: 60-70 µs of a ~0.6 ms commit on this box's disk). A committed index is recoverable from a quorum;
   * on disk it may lag by a tick's commits, as a deferred one always could.
   */
  private readonly lazyStates = new Map<string, DurableState>();
  /** the next commit carries every held-back state (set by tick() and commitAll()) */
  private stateDue = false;
  /** an unwritten write must be durable before the pump goes on (entries, term, vote, snapshot, genesis) */
  mustCommit = false;
  /** a commit happened since the last tick: deferred writes ride along with the traffic */
  private committedSinceTick = false;
  /** commits started in the background and not yet durable, in start order */
  private readonly inFlight = new Set<Promise<void>>();
  commits = 0;
  /** of them, started with commitInBackground */
  backgroundCommits = 0;
  entriesWritten = 0;
  /** how long the last durable commits took (the backend's transaction, fsync included), on the manager's clock */
  readonly commitTimes = new LatencyWindow();

  constructor(
    private readonly backend: RaftBackend,
    private readonly stages: StageSink,
    private readonly now: () => number,
  ) {}

  /** writes and held-back states not yet committed */
  get pending(): number {
    return this.unwritten.length + this.lazyStates.size;
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /**
   * A tick passed (the pump absorbed one). Returns whether it passed without any commit since the one before:
   * then the deferred writes and held-back states are due a commit of their own; otherwise the next commit
   * carries the held-back states.
   */
  tick(): boolean {
    const idle = !this.committedSinceTick;
    this.committedSinceTick = false;
    this.stateDue = true;
    return idle;
  }

  /** Commits every write and held-back state not yet committed (a clean stop's last write). */
  async commitAll(): Promise<void> {
    this.stateDue = true;
    await this.commit();
  }

  /** Queues a write for the next commit; `must`: that commit happens in the pump's next iteration. */
  stage(w: GroupWrite, must: boolean): void {
    if (must) this.mustCommit = true;
    if (w.state && w.stateCommitOnly) {
      // held back, superseding any held before; the rest of `w` goes to the disk as usual
      this.lazyStates.set(w.group, w.state);
      const { state: _held, stateCommitOnly: _only, ...rest } = w;
      if (!isStateOnly(rest)) this.unwritten.push(rest);
      return;
    }
    if (w.state) {
      // an earlier deferred write or held-back state of this group is older than the state `w` carries
      this.lazyStates.delete(w.group);
      this.unwritten = this.unwritten.filter((x) => x.group !== w.group || !isStateOnly(x));
    }
    this.unwritten.push(w);
  }

  /**
   * Whether the unwritten writes may be committed in the background: appends and state only. A group's
   * creation, a snapshot and a log truncation or compaction are waited for (their key ranges are read inside
   * the transaction, which must see every earlier write).
   */
  backgroundable(): boolean {
    return this.unwritten.every((w) => !w.meta && !w.snapshot && w.dropFrom === undefined && w.dropThrough === undefined);
  }

  /** Commits every unwritten write in one transaction, after every background commit; resolves when durable. */
  async commit(): Promise<void> {
    await this.drain();
    const writes = this.take();
    const t = this.stages.now();
    const t0 = this.now();
    await this.backend.commit(writes);
    this.stages.add("lmdb.commit", t);
    this.done(writes, t0);
  }

  /**
   * Starts one transaction of every unwritten write without waiting for it: `onDurable` runs once it is
   * durable, `onError` if the disk refused it (the node must stop). Later commits reach the disk after it.
   */
  commitInBackground(onDurable: () => void, onError: (e: unknown) => void): void {
    const writes = this.take();
    const t = this.stages.now();
    const t0 = this.now();
    this.backgroundCommits++;
    const p = this.backend.commitInBackground(writes).then(
      () => {
        this.done(writes, t0);
        onDurable();
      },
      onError,
    );
    this.stages.add("lmdb.commitStart", t);
    this.inFlight.add(p);
    void p.finally(() => this.inFlight.delete(p));
  }

  /** Resolves when no background commit is in flight (each one's onDurable/onError has run). */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  private take(): GroupWrite[] {
    const writes = this.unwritten;
    this.unwritten = [];
    if (this.stateDue) {
      for (const [group, state] of this.lazyStates) writes.push({ group, entries: [], state });
      this.lazyStates.clear();
      this.stateDue = false;
    }
    this.mustCommit = false;
    return writes;
  }

  private done(writes: readonly GroupWrite[], t0: number): void {
    this.commitTimes.add(this.now() - t0);
    this.committedSinceTick = true;
    this.commits++;
    for (const w of writes) this.entriesWritten += w.entries.length;
  }
}

/** A deferred write: nothing but the group's state (commit index, membership). */
function isStateOnly(w: GroupWrite): boolean {
  return w.entries.length === 0 && !w.meta && !w.snapshot && w.dropFrom === undefined && w.dropThrough === undefined;
}
