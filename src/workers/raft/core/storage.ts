/**
 * The durable side of one Raft group, as the core sees it: a read-only view it queries synchronously. The
 * shell owns every write (it persists what each Ready carries, in the order the Ready contract gives) and
 * implements this interface over LMDB; MemoryStorage implements it in memory for tests and the simulator,
 * where it plays the role of the disk that survives a crash.
 *
 * Layout: the log holds entries (firstIndex()-1, lastIndex()]. The entry at firstIndex()-1 is not stored;
 * only its term is known, from the latest snapshot (or 0 for an empty log).
 */
import { BrineError } from "../../../shared/errors.js";
import { cloneConfState } from "./confchange.js";
import type { ConfState, Entry, HardState, NodeId, Snapshot } from "./types.js";
import { EMPTY_HARD_STATE, entryBytes } from "./types.js";

export interface InitialState {
  hardState: HardState;
  confState: ConfState;
}

export interface Storage {
  /** the persisted HardState and the membership in effect (see ConfState.confIndex) */
  initialState(): InitialState;
  /**
   * Entries [lo, hi), cut after the first entry that makes the total exceed maxBytes (at least one entry is
   * returned when lo < hi). Throws BrineError RAFT_COMPACTED when lo < firstIndex(), RAFT_UNAVAILABLE when
   * hi > lastIndex() + 1.
   */
  entries(lo: number, hi: number, maxBytes: number): Entry[];
  /** Term of entry i, for firstIndex()-1 <= i <= lastIndex(). Same errors as entries(). */
  term(i: number): number;
  firstIndex(): number;
  lastIndex(): number;
  /**
   * The latest snapshot. The leader calls it to catch up a follower whose next entry is compacted. May throw
   * RAFT_UNAVAILABLE while a snapshot is being produced; the leader then retries on a later heartbeat.
   */
  snapshot(): Snapshot;
}

const EMPTY_CONF: ConfState = Object.freeze({ voters: [], learners: [], confIndex: 0 }) as ConfState;

/**
 * In-memory Storage with the write operations a shell would perform. Entries are kept in one array whose
 * element 0 is a placeholder carrying the index and term of the snapshot (or 0/0).
 *
 * Invariants: ents[0].index === snap.metadata.index; ents[k].index === ents[0].index + k;
 * snap.metadata.index <= hardState.commit once a snapshot exists.
 */
export class MemoryStorage implements Storage {
  private hardState: HardState = { ...EMPTY_HARD_STATE };
  private confState: ConfState = cloneConfState(EMPTY_CONF);
  private snap: Snapshot = { metadata: { index: 0, term: 0, confState: cloneConfState(EMPTY_CONF) }, data: new Uint8Array(0) };
  private ents: Entry[] = [{ index: 0, term: 0, type: "normal", data: new Uint8Array(0) }];

  /**
   * A founding member's storage: a genesis snapshot at index 1, term 1 holding the initial voters. Every
   * founder starts from the same genesis, and a node added later (with empty storage) learns membership from
   * the snapshot the leader sends it, so the founding config never needs to be in the log.
   */
  static bootstrap(voters: NodeId[], learners: NodeId[] = []): MemoryStorage {
    const s = new MemoryStorage();
    const confState: ConfState = { voters: [...voters].sort((a, b) => a - b), learners: [...learners].sort((a, b) => a - b), confIndex: 0 };
    s.applySnapshot({ metadata: { index: 1, term: 1, confState }, data: new Uint8Array(0) });
    s.setHardState({ term: 1, vote: 0, commit: 1 });
    return s;
  }

  initialState(): InitialState {
    return { hardState: { ...this.hardState }, confState: cloneConfState(this.confState) };
  }

  setHardState(hs: HardState): void {
    this.hardState = { ...hs };
  }

  setConfState(cs: ConfState): void {
    this.confState = cloneConfState(cs);
  }

  firstIndex(): number {
    return this.ents[0]!.index + 1;
  }

  lastIndex(): number {
    return this.ents[0]!.index + this.ents.length - 1;
  }

  term(i: number): number {
    const offset = this.ents[0]!.index;
    if (i < offset) throw new BrineError("RAFT_COMPACTED", `term(${i}) below ${offset}`);
    if (i - offset >= this.ents.length) throw new BrineError("RAFT_UNAVAILABLE", `term(${i}) above ${this.lastIndex()}`);
    return this.ents[i - offset]!.term;
  }

  entries(lo: number, hi: number, maxBytes: number): Entry[] {
    const offset = this.ents[0]!.index;
    if (lo <= offset) throw new BrineError("RAFT_COMPACTED", `entries(${lo}) at or below ${offset}`);
    if (hi > this.lastIndex() + 1) throw new BrineError("RAFT_UNAVAILABLE", `entries(..${hi}) above ${this.lastIndex()}`);
    return limitSize(this.ents, lo - offset, hi - offset, maxBytes);
  }

  snapshot(): Snapshot {
    return this.snap;
  }

  /**
   * Replaces everything with `s` (a follower catching up, or a founder's genesis). Refuses a snapshot older
   * than the current one, which a reordered chunk stream could otherwise install.
   */
  applySnapshot(s: Snapshot): void {
    if (s.metadata.index <= this.snap.metadata.index && this.snap.metadata.index > 0) {
      throw new BrineError("RAFT_COMPACTED", `snapshot ${s.metadata.index} is not newer than ${this.snap.metadata.index}`);
    }
    this.snap = s;
    this.ents = [{ index: s.metadata.index, term: s.metadata.term, type: "normal", data: new Uint8Array(0) }];
    this.confState = cloneConfState(s.metadata.confState);
    if (this.hardState.commit < s.metadata.index) this.hardState = { ...this.hardState, commit: s.metadata.index };
  }

  /**
   * Records the application's state image at applied index i. Only a committed index may be snapshotted:
   * a snapshot is the state machine after applying the committed prefix through i.
   */
  createSnapshot(i: number, confState: ConfState, data: Uint8Array): Snapshot {
    if (i <= this.snap.metadata.index) throw new BrineError("RAFT_COMPACTED", `snapshot at ${i} is not newer`);
    if (i > this.hardState.commit) throw new BrineError("RAFT_UNAVAILABLE", `snapshot at ${i} above commit ${this.hardState.commit}`);
    this.snap = { metadata: { index: i, term: this.term(i), confState: cloneConfState(confState) }, data };
    return this.snap;
  }

  /**
   * Discards entries before index i (i becomes the placeholder). Only the prefix a snapshot already covers
   * may go: anything later may not yet be applied everywhere it matters, and the leader needs either the
   * entries or a snapshot to catch up a follower.
   */
  compact(i: number): void {
    const offset = this.ents[0]!.index;
    if (i <= offset) return;
    if (i > this.snap.metadata.index) {
      throw new BrineError("RAFT_UNAVAILABLE", `compact(${i}) beyond snapshot ${this.snap.metadata.index}`);
    }
    const placeholder = this.ents[i - offset]!;
    this.ents = [{ index: placeholder.index, term: placeholder.term, type: "normal", data: new Uint8Array(0) }, ...this.ents.slice(i - offset + 1)];
  }

  /**
   * Appends entries, replacing any existing suffix from entries[0].index on. Entries at or below the
   * compacted prefix are ignored (they are committed, hence identical).
   */
  append(entries: readonly Entry[]): void {
    if (entries.length === 0) return;
    const first = this.firstIndex();
    let ents = entries;
    if (ents[0]!.index < first) {
      if (ents[ents.length - 1]!.index < first) return;
      ents = ents.slice(first - ents[0]!.index);
    }
    const offset = ents[0]!.index - this.ents[0]!.index;
    if (offset > this.ents.length) {
      throw new BrineError("RAFT_UNAVAILABLE", `append at ${ents[0]!.index} leaves a gap after ${this.lastIndex()}`);
    }
    if (offset < this.ents.length) this.ents.length = offset;
    for (const e of ents) this.ents.push(e);
  }

  /** A deep-enough copy for a crash/restart simulation (entries are immutable, so they are shared). */
  clone(): MemoryStorage {
    const c = new MemoryStorage();
    c.hardState = { ...this.hardState };
    c.confState = cloneConfState(this.confState);
    c.snap = this.snap;
    c.ents = this.ents.slice();
    return c;
  }
}

/** ents[lo, hi) cut by maxBytes, at least one entry. */
export function limitSize(ents: readonly Entry[], lo: number, hi: number, maxBytes: number): Entry[] {
  if (lo >= hi) return [];
  let size = entryBytes(ents[lo]!);
  let end = lo + 1;
  while (end < hi) {
    size += entryBytes(ents[end]!);
    if (size > maxBytes) break;
    end++;
  }
  return ents.slice(lo, end);
}
