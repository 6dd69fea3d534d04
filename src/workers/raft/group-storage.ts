/**
 * The Storage the Raft core reads for one group, backed by the worker's durable backend (LMDB).
 *
 * Reads are synchronous (the core's interface) and served from an in-memory view of the stored log, a
 * MemoryStorage; the backend holds the same data durably. The view is bounded because the log is compacted
 * behind every snapshot (WorkerLimits.snapshotEveryEntries).
 *
 * Writes are staged: `stage(rd)` performs step 1 of the Ready contract on the view and returns the GroupWrite
 * that makes it durable. The manager commits the staged writes of every group in one backend commit and only
 * then sends the Ready's promises (step 2). The view may therefore run ahead of the disk between stage() and
 * the commit. What leaves the node in that window promises nothing the disk lacks: a leader's appends (their
 * receivers' acknowledgements are stepped only after the commit) and, for a deferred write, the applied
 * effects of a commit index that a quorum holds anyway.
 */
import { MemoryStorage, type InitialState, type Storage } from "./core/storage.js";
import type { ConfState, Entry, Ready, Snapshot } from "./core/types.js";
import type { GroupMeta, GroupWrite, StoredGroup } from "./backend.js";

export class GroupStorage implements Storage {
  private constructor(
    readonly group: string,
    private readonly view: MemoryStorage,
  ) {}

  /** Rebuilds the view from what the backend holds. */
  static fromStored(stored: StoredGroup): GroupStorage {
    const view = new MemoryStorage();
    if (stored.snapshot.metadata.index > 0) view.applySnapshot(stored.snapshot);
    view.append(stored.entries);
    view.setHardState(stored.state.hardState);
    view.setConfState(stored.state.confState);
    return new GroupStorage(stored.meta.id, view);
  }

  /**
   * A founding member's storage: the genesis snapshot at index 1, term 1 (MemoryStorage.bootstrap), whose
   * data is the group's state machine image after its founding configuration. Every founder builds the same
   * bytes from the same founders, so they agree on index 1 without exchanging anything. Returns the storage
   * and the write that creates the group durably.
   */
  static genesis(meta: GroupMeta, voterRaftIds: number[], stateImage: Uint8Array): { storage: GroupStorage; write: GroupWrite } {
    const boot = MemoryStorage.bootstrap(voterRaftIds);
    const metadata = boot.snapshot().metadata;
    const snapshot: Snapshot = { metadata, data: stateImage };
    const view = new MemoryStorage();
    view.applySnapshot(snapshot);
    view.setHardState(boot.initialState().hardState);
    const storage = new GroupStorage(meta.id, view);
    return { storage, write: { group: meta.id, meta, snapshot, dropFrom: 0, entries: [], state: view.initialState() } };
  }

  /**
   * A joiner's storage: nothing at all (index 0, no configuration); the leader's snapshot brings the group's
   * state. Returns the storage and the write that creates the group durably.
   */
  static empty(meta: GroupMeta): { storage: GroupStorage; write: GroupWrite } {
    const view = new MemoryStorage();
    const storage = new GroupStorage(meta.id, view);
    const snapshot: Snapshot = { metadata: { index: 0, term: 0, confState: { voters: [], learners: [], confIndex: 0 } }, data: new Uint8Array(0) };
    return { storage, write: { group: meta.id, meta, snapshot, entries: [], state: view.initialState() } };
  }

  initialState(): InitialState {
    return this.view.initialState();
  }
  entries(lo: number, hi: number, maxBytes: number): Entry[] {
    return this.view.entries(lo, hi, maxBytes);
  }
  term(i: number): number {
    return this.view.term(i);
  }
  firstIndex(): number {
    return this.view.firstIndex();
  }
  lastIndex(): number {
    return this.view.lastIndex();
  }
  snapshot(): Snapshot {
    return this.view.snapshot();
  }

  /**
   * Step 1 of the Ready contract on the view: snapshot, then entries (replacing any suffix they overlap), then
   * HardState and ConfState. Returns the durable form of the same change, or undefined when the Ready carries
   * nothing durable.
   */
  stage(rd: Ready): GroupWrite | undefined {
    if (!rd.snapshot && rd.entries.length === 0 && !rd.hardState && !rd.confState) return undefined;
    const w: GroupWrite = { group: this.group, entries: [] };
    // term and vote are promises (they must be on disk before anything leaves); a commit index alone is not
    let promiseMoved = false;
    if (rd.hardState) {
      const was = this.view.initialState().hardState;
      promiseMoved = rd.hardState.term !== was.term || rd.hardState.vote !== was.vote;
    }
    w.stateCommitOnly = !rd.snapshot && !rd.confState && !promiseMoved;
    if (rd.snapshot) {
      this.view.applySnapshot(rd.snapshot);
      w.snapshot = rd.snapshot;
      w.dropFrom = 0; // a received snapshot replaces the whole log
    }
    if (rd.entries.length > 0) {
      const first = this.view.firstIndex();
      const kept = rd.entries.filter((e) => e.index >= first); // below `first` is compacted, hence committed and identical
      if (kept.length > 0) {
        const from = kept[0]!.index;
        // entries at `from` and after are replaced (a leader's overwrite may also be shorter than what it replaces)
        if (from <= this.view.lastIndex() && w.dropFrom === undefined) w.dropFrom = from;
        this.view.append(kept);
        w.entries = kept;
      }
    }
    if (rd.hardState) this.view.setHardState(rd.hardState);
    if (rd.confState) this.view.setConfState(rd.confState);
    w.state = this.view.initialState();
    return w;
  }

  /**
   * Records the state machine image at applied index `applied` and compacts the log to keep `keep` entries
   * behind it. Snapshot and compaction go into one write, so the disk never lacks both the entries and an
   * image covering them. The write carries the group's state too: its commit index (>= `applied`) may still
   * be deferred, and the disk must never hold a snapshot beyond its durable commit index (the core refuses
   * to start from that).
   */
  stageSnapshot(applied: number, confState: ConfState, image: Uint8Array, keep: number): GroupWrite {
    const snapshot = this.view.createSnapshot(applied, confState, image);
    const compactTo = Math.max(this.view.firstIndex() - 1, applied - keep);
    this.view.compact(compactTo);
    return { group: this.group, snapshot, dropThrough: compactTo, entries: [], state: this.view.initialState() };
  }
}
