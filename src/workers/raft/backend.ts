/**
 * The durable side of the Raft worker, as the group manager sees it: load every group at start, then commit
 * batches of writes. One `commit` is one atomic, durable unit: when its promise resolves, every write in it
 * survives a crash, and none of them is visible without the others. The manager puts the Ready of every group
 * (and any pending snapshot, compaction or genesis) into one commit: that is the group commit, one fsync for
 * everything that happened since the previous one.
 *
 * Implementations: LmdbBackend (lmdb-backend.ts) for the master, MemoryBackend below for tests.
 */
import type { ConfState, Entry, HardState, Snapshot } from "./core/types.js";

export type GroupKind = "cluster" | "ring";

/** What a group is. The group id is "cluster" for the control plane, the ring id for a ring's own group. */
export interface GroupMeta {
  id: string;
  kind: GroupKind;
  /** the node ids of its genesis configuration, sorted */
  founders: string[];
}

export interface DurableState {
  hardState: HardState;
  confState: ConfState;
}

/**
 * Writes for one group, applied in this order inside a commit: meta, snapshot, dropFrom, dropThrough,
 * entries, state. (Order inside one atomic commit only matters for keys that two steps touch: the drops come
 * before the puts that may re-create some of their keys.)
 */
export interface GroupWrite {
  group: string;
  /** (re)writes the group record: present in a genesis write */
  meta?: GroupMeta;
  snapshot?: Snapshot;
  /** deletes every stored entry with index >= dropFrom (a suffix replaced by a leader, or all, for a snapshot) */
  dropFrom?: number;
  /** deletes every stored entry with index <= dropThrough (compaction behind a snapshot) */
  dropThrough?: number;
  entries: Entry[];
  state?: DurableState;
  /**
   * `state` differs from the group's previous state in its commit index at most (no term, vote or membership
   * change): the writer may hold it back and let it ride a later commit (DurableWrites). Backends ignore it.
   */
  stateCommitOnly?: boolean;
}

/** A group as stored: enough to rebuild its Storage view exactly. */
export interface StoredGroup {
  meta: GroupMeta;
  state: DurableState;
  snapshot: Snapshot;
  /** every stored entry after the snapshot, in index order */
  entries: Entry[];
}

export interface RaftBackend {
  /** metas of every stored group */
  groups(): GroupMeta[];
  load(group: string): StoredGroup | undefined;
  /** atomic and durable on resolve; rejects (and the node must stop) if the disk refused the write */
  commit(writes: readonly GroupWrite[]): Promise<void>;
  /**
   * The same, without holding the calling thread while the disk works (a leader's own appends: the Raft
   * thread reads its followers' answers meanwhile). Appends and state only (no meta, snapshot or drop).
   * Background commits reach the disk in call order; the caller waits for them before a commit().
   */
  commitInBackground(writes: readonly GroupWrite[]): Promise<void>;
  close(): Promise<void>;
}

interface MemGroup {
  meta?: GroupMeta;
  state?: DurableState;
  snapshot?: Snapshot;
  entries: Map<number, Entry>;
}

/**
 * A backend in memory, for tests: it survives a simulated restart (a new manager over the same object), and
 * every commit can be observed (`onCommit`) or slowed down (`commitDelayMs`) to check what waits for it.
 */
export class MemoryBackend implements RaftBackend {
  private readonly data = new Map<string, MemGroup>();
  commits = 0;
  /** how many of `commits` came through commitInBackground */
  backgroundCommits = 0;
  onCommit: ((writes: readonly GroupWrite[]) => void) | undefined;
  commitDelayMs = 0;

  groups(): GroupMeta[] {
    return [...this.data.values()].flatMap((g) => (g.meta ? [structuredClone(g.meta)] : []));
  }

  load(group: string): StoredGroup | undefined {
    const g = this.data.get(group);
    if (!g?.meta || !g.state || !g.snapshot) return undefined;
    const snapIndex = g.snapshot.metadata.index;
    const entries = [...g.entries.values()].filter((e) => e.index > snapIndex).sort((a, b) => a.index - b.index);
    return structuredClone({ meta: g.meta, state: g.state, snapshot: g.snapshot, entries });
  }

  /** What is durable for `group` right now, cheaply: its HardState and last stored index (for checks). */
  durable(group: string): { hardState: DurableState["hardState"]; lastIndex: number } | undefined {
    const g = this.data.get(group);
    if (!g?.state || !g.snapshot) return undefined;
    let last = g.snapshot.metadata.index;
    for (const i of g.entries.keys()) if (i > last) last = i;
    return { hardState: { ...g.state.hardState }, lastIndex: last };
  }

  async commit(writes: readonly GroupWrite[]): Promise<void> {
    // Copy now: the caller may reuse its objects, and the disk holds what was written at commit time.
    const copy = structuredClone(writes) as GroupWrite[];
    if (this.commitDelayMs > 0) await new Promise((r) => setTimeout(r, this.commitDelayMs));
    for (const w of copy) {
      let g = this.data.get(w.group);
      if (!g) this.data.set(w.group, (g = { entries: new Map() }));
      if (w.meta) g.meta = w.meta;
      if (w.snapshot) g.snapshot = w.snapshot;
      if (w.dropFrom !== undefined) for (const i of [...g.entries.keys()]) if (i >= w.dropFrom) g.entries.delete(i);
      if (w.dropThrough !== undefined) for (const i of [...g.entries.keys()]) if (i <= w.dropThrough) g.entries.delete(i);
      for (const e of w.entries) g.entries.set(e.index, e);
      if (w.state) g.state = w.state;
    }
    this.commits++;
    this.onCommit?.(copy);
  }

  /** In memory the same as commit() (which already resolves later, after `commitDelayMs`, in call order). */
  commitInBackground(writes: readonly GroupWrite[]): Promise<void> {
    this.backgroundCommits++;
    return this.commit(writes);
  }

  async close(): Promise<void> {}
}
