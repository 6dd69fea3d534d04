/**
 * The Raft log as the core sees it: the durable part (Storage) followed by an unstable tail the application
 * has not yet persisted, optionally preceded by an unstable snapshot.
 */
import { BrineError, isBrineError } from "../../../shared/errors.js";
import type { Storage } from "./storage.js";
import { limitSize } from "./storage.js";
import type { Entry, Snapshot } from "./types.js";
import { entryBytes } from "./types.js";

/**
 * Entries (and possibly a snapshot) not yet known to be durable: not yet handed out in a Ready, or handed out
 * and not yet acknowledged (by advance(), or, for a write still in flight, by appendDurable()).
 *
 * Invariants: entries[k].index === offset + k; if snapshot is set, offset === snapshot.metadata.index + 1
 * (the snapshot sits immediately before the unstable entries); offset <= inProgress <= offset +
 * entries.length: the entries before `inProgress` were handed to the application's storage (etcd's
 * offsetInProgress), so a later Ready does not hand them out again while their write is in flight.
 */
export class Unstable {
  snapshot: Snapshot | undefined;
  entries: Entry[] = [];
  offset: number;
  inProgress: number;

  constructor(offset: number) {
    this.offset = offset;
    this.inProgress = offset;
  }

  /** Entries not yet handed out in a Ready. */
  entriesToWrite(): Entry[] {
    return this.entries.slice(this.inProgress - this.offset);
  }

  hasEntriesToWrite(): boolean {
    return this.offset + this.entries.length > this.inProgress;
  }

  /** Every unstable entry has been handed out (ready()). */
  acceptInProgress(): void {
    this.inProgress = this.offset + this.entries.length;
  }

  maybeFirstIndex(): number | undefined {
    return this.snapshot ? this.snapshot.metadata.index + 1 : undefined;
  }

  maybeLastIndex(): number | undefined {
    if (this.entries.length > 0) return this.offset + this.entries.length - 1;
    return this.snapshot?.metadata.index;
  }

  maybeTerm(i: number): number | undefined {
    if (i < this.offset) {
      if (this.snapshot && this.snapshot.metadata.index === i) return this.snapshot.metadata.term;
      return undefined;
    }
    const last = this.maybeLastIndex();
    if (last === undefined || i > last) return undefined;
    return this.entries[i - this.offset]!.term;
  }

  /** Entries through (i, t) are durable. Ignored if the entry at i was replaced meanwhile (term differs). */
  stableTo(i: number, t: number): void {
    const gt = this.maybeTerm(i);
    if (gt === undefined || gt !== t || i < this.offset) return;
    this.entries = this.entries.slice(i + 1 - this.offset);
    this.offset = i + 1;
    this.inProgress = Math.max(this.inProgress, this.offset);
  }

  stableSnapTo(i: number): void {
    if (this.snapshot && this.snapshot.metadata.index === i) this.snapshot = undefined;
  }

  restore(s: Snapshot): void {
    this.offset = s.metadata.index + 1;
    this.inProgress = this.offset;
    this.entries = [];
    this.snapshot = s;
  }

  /** Appends ents, first dropping any unstable entries at or after ents[0].index (a leader's overwrite). */
  truncateAndAppend(ents: readonly Entry[]): void {
    const after = ents[0]!.index;
    if (after === this.offset + this.entries.length) {
      for (const e of ents) this.entries.push(e);
    } else if (after <= this.offset) {
      // The new entries replace everything unstable; the durable suffix from `after` on is replaced too when
      // the application persists them (Storage.append truncates).
      this.offset = after;
      this.entries = ents.slice();
    } else {
      this.entries = this.entries.slice(0, after - this.offset);
      for (const e of ents) this.entries.push(e);
    }
    // replaced entries are written again, even if a write of their older version is in flight
    this.inProgress = Math.max(this.offset, Math.min(this.inProgress, after));
  }

  slice(lo: number, hi: number): Entry[] {
    return this.entries.slice(lo - this.offset, hi - this.offset);
  }
}

/**
 * Invariants (checked by assertInvariants, relied on everywhere):
 *   firstIndex() - 1 <= applied <= applying <= committed <= lastIndex()
 * `applying` is the last index handed out in Ready.committedEntries (or a Ready snapshot); `applied` the last
 * one the application confirmed with advance(). `committed` never decreases.
 */
export class RaftLog {
  readonly storage: Storage;
  unstable: Unstable;
  committed: number;
  applying: number;
  applied: number;
  /**
   * Asynchronous storage writes (RaftConfig.asyncStorageWrites): committed entries are handed out for
   * applying only once durable here (etcd's rule in that mode), since a Ready may be advanced before its
   * write finished.
   */
  readonly applyDurableOnly: boolean;

  constructor(storage: Storage, applied = 0, applyDurableOnly = false) {
    this.storage = storage;
    this.applyDurableOnly = applyDurableOnly;
    const first = storage.firstIndex();
    const last = storage.lastIndex();
    this.unstable = new Unstable(last + 1);
    this.committed = first - 1;
    this.applied = Math.max(first - 1, applied);
    this.applying = this.applied;
  }

  firstIndex(): number {
    return this.unstable.maybeFirstIndex() ?? this.storage.firstIndex();
  }

  lastIndex(): number {
    return this.unstable.maybeLastIndex() ?? this.storage.lastIndex();
  }

  lastTerm(): number {
    return this.term(this.lastIndex());
  }

  /** Term of entry i; throws RAFT_COMPACTED / RAFT_UNAVAILABLE outside [firstIndex()-1, lastIndex()]. */
  term(i: number): number {
    const ut = this.unstable.maybeTerm(i);
    if (ut !== undefined) return ut;
    if (i < this.firstIndex() - 1) throw new BrineError("RAFT_COMPACTED", `term(${i})`);
    if (i > this.lastIndex()) throw new BrineError("RAFT_UNAVAILABLE", `term(${i})`);
    return this.storage.term(i);
  }

  /** Term of entry i, or 0 when it is compacted or beyond the log (for comparisons that treat both as "no"). */
  termOrZero(i: number): number {
    if (i < this.firstIndex() - 1 || i > this.lastIndex()) return 0;
    return this.term(i);
  }

  matchTerm(i: number, t: number): boolean {
    return this.termOrZero(i) === t && (t !== 0 || i === 0);
  }

  /** §5.4.1: a candidate's log is at least as up to date as ours. */
  isUpToDate(lastIndex: number, lastTerm: number): boolean {
    const ourTerm = this.lastTerm();
    return lastTerm > ourTerm || (lastTerm === ourTerm && lastIndex >= this.lastIndex());
  }

  /**
   * The follower side of AppendEntries: if our log has (index, logTerm), append ents (replacing the first
   * conflicting suffix), advance commit to min(commit, last new index) and return the last new index.
   * Returns undefined when the consistency check fails.
   */
  maybeAppend(index: number, logTerm: number, commit: number, ents: readonly Entry[]): number | undefined {
    if (!this.matchTerm(index, logTerm)) return undefined;
    const lastNew = index + ents.length;
    const ci = this.findConflict(ents);
    if (ci !== 0) {
      if (ci <= this.committed) {
        throw new BrineError("RAFT_REJECTED", `entry ${ci} conflicts with committed entry (commit ${this.committed})`);
      }
      this.append(ents.slice(ci - (index + 1)));
    }
    this.commitTo(Math.min(commit, lastNew));
    return lastNew;
  }

  append(ents: readonly Entry[]): number {
    if (ents.length === 0) return this.lastIndex();
    if (ents[0]!.index - 1 < this.committed) {
      throw new BrineError("RAFT_REJECTED", `append at ${ents[0]!.index} below commit ${this.committed}`);
    }
    this.unstable.truncateAndAppend(ents);
    return this.lastIndex();
  }

  /**
   * Index of the first entry in ents whose term differs from ours (or that we lack), or 0 if we already
   * hold all of them. ents must be contiguous.
   */
  findConflict(ents: readonly Entry[]): number {
    for (const e of ents) {
      if (!this.matchTerm(e.index, e.term)) return e.index;
    }
    return 0;
  }

  /**
   * Conflict backtracking by term: the largest index <= index whose term is <= term, with its term. The
   * leader skips a whole term of mismatching entries per round trip instead of one index at a time (the
   * "optimization" at the end of §5.3, which Salt's follower advertised but its leader never used).
   */
  findConflictByTerm(index: number, term: number): [number, number] {
    const floor = this.firstIndex() - 1;
    for (let i = Math.min(index, this.lastIndex()); ; i--) {
      // Below the compacted prefix nothing is known: answer that index with term 0, so a leader's next
      // probe lands in the compacted region and it sends a snapshot.
      if (i < floor) return [i, 0];
      const t = this.term(i);
      if (t <= term) return [i, t];
    }
  }

  commitTo(c: number): void {
    if (c <= this.committed) return;
    if (c > this.lastIndex()) {
      throw new BrineError("RAFT_UNAVAILABLE", `commit ${c} beyond last index ${this.lastIndex()}`);
    }
    this.committed = c;
  }

  /** §5.4.2: a leader commits by counting replicas only for entries of its own term. */
  maybeCommit(maxIndex: number, term: number): boolean {
    if (maxIndex > this.committed && this.termOrZero(maxIndex) === term) {
      this.commitTo(maxIndex);
      return true;
    }
    return false;
  }

  /** The last index known durable on this node: everything before the unstable tail. */
  durableLastIndex(): number {
    return this.unstable.offset - 1;
  }

  /** The last committed index that may be handed out for applying. */
  private applyLimit(): number {
    return this.applyDurableOnly ? Math.min(this.committed, this.durableLastIndex()) : this.committed;
  }

  hasNextCommittedEnts(): boolean {
    return this.applyLimit() > this.applying && this.unstable.snapshot === undefined;
  }

  /** Committed entries not yet handed out, at most maxBytes (at least one). */
  nextCommittedEnts(maxBytes: number): Entry[] {
    if (!this.hasNextCommittedEnts()) return [];
    const lo = Math.max(this.applying + 1, this.firstIndex());
    return this.slice(lo, this.applyLimit() + 1, maxBytes);
  }

  /** Entries [lo, hi) from storage then the unstable tail, at most maxBytes (at least one when lo < hi). */
  slice(lo: number, hi: number, maxBytes: number): Entry[] {
    if (lo >= hi) return [];
    if (lo < this.firstIndex()) throw new BrineError("RAFT_COMPACTED", `slice(${lo}) below ${this.firstIndex()}`);
    if (hi > this.lastIndex() + 1) throw new BrineError("RAFT_UNAVAILABLE", `slice(..${hi}) above ${this.lastIndex()}`);
    const uOffset = this.unstable.offset;
    if (lo >= uOffset) return limitSize(this.unstable.entries, lo - uOffset, hi - uOffset, maxBytes);
    const stored = this.storage.entries(lo, Math.min(hi, uOffset), maxBytes);
    if (hi <= uOffset || stored.length < Math.min(hi, uOffset) - lo) return stored;
    const out = stored.slice();
    let bytes = 0;
    for (const e of out) bytes += entryBytes(e);
    for (let k = 0; k < hi - uOffset; k++) {
      const e = this.unstable.entries[k]!;
      bytes += entryBytes(e);
      if (bytes > maxBytes) break;
      out.push(e);
    }
    return out;
  }

  /** Entries from i on (at most maxBytes), or undefined if i is compacted: the leader must send a snapshot. */
  entriesFrom(i: number, maxBytes: number): Entry[] | undefined {
    if (i > this.lastIndex()) return [];
    try {
      return this.slice(i, this.lastIndex() + 1, maxBytes);
    } catch (e) {
      if (isBrineError(e, "RAFT_COMPACTED")) return undefined;
      throw e;
    }
  }

  /** A snapshot replaces the whole log: the follower's entries, if any, are superseded. */
  restore(s: Snapshot): void {
    this.committed = s.metadata.index;
    this.unstable.restore(s);
  }

  /** The application handed out entries through i (or a snapshot at i). */
  applyingTo(i: number): void {
    if (i < this.applying) return;
    if (i > this.committed) throw new BrineError("RAFT_UNAVAILABLE", `applying ${i} beyond commit ${this.committed}`);
    this.applying = i;
  }

  appliedTo(i: number): void {
    if (i <= this.applied) return;
    if (i > this.applying) throw new BrineError("RAFT_UNAVAILABLE", `applied ${i} beyond handed-out ${this.applying}`);
    this.applied = i;
  }

  assertInvariants(): void {
    // While a received snapshot waits in `unstable`, applied trails it until the Ready hands it out.
    const ok =
      (this.unstable.snapshot !== undefined || this.firstIndex() - 1 <= this.applied) &&
      this.applied <= this.applying &&
      this.applying <= this.committed &&
      this.committed <= this.lastIndex();
    if (!ok) {
      throw new BrineError(
        "RAFT_UNAVAILABLE",
        `log invariant broken: first=${this.firstIndex()} applied=${this.applied} applying=${this.applying} ` +
          `committed=${this.committed} last=${this.lastIndex()}`,
      );
    }
  }
}
