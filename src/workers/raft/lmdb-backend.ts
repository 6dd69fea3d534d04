/**
 * The Raft worker's LMDB environment: separate from the job cache's (its fsync cadence is Raft's, and a
 * cache cleanup must never share a transaction with a vote), on local disk (`brine_raft_lmdb_dir`, default
 * `<cachedir>/brine-raft-lmdb`; LMDB's mmap and locks do not work over NFS). Values are CBOR (cbor-x).
 *
 *   groups   group id -> GroupMeta
 *   state    group id -> {hardState, confState}
 *   snaps    group id -> Snapshot (the latest; its data is the group's state machine image)
 *   log      [group id, index] -> Entry (ordered-binary keys: one group's entries are contiguous, by index)
 *
 * Durability: one commit() is one synchronous transaction (the group commit), returned from only after
 * LMDB's commit, fsync included (overlappingSync off). commitInBackground() is one lmdb-js batch: the puts are
 * encoded on the calling thread and run, committed and fsynced on LMDB's write thread; its promise resolves
 * after that commit, and batches commit in call order.
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import { open, type Database, type RootDatabase } from "lmdb";
import { BrineError } from "../../shared/errors.js";
import type { Entry, Snapshot } from "./core/types.js";
import type { DurableState, GroupMeta, GroupWrite, RaftBackend, StoredGroup } from "./backend.js";
import { LMDB_CBOR as CBOR } from "../../lib/store/lmdb-env.js";

/** the largest index, as the end of a key range */
const INDEX_MAX = Number.MAX_SAFE_INTEGER;

type LogKey = [string, number];

export function raftLmdbDir(cfg: { cachedir: string; brine_raft_lmdb_dir?: unknown }): string {
  return typeof cfg.brine_raft_lmdb_dir === "string" && cfg.brine_raft_lmdb_dir ? cfg.brine_raft_lmdb_dir : path.join(cfg.cachedir, "brine-raft-lmdb");
}

/** cbor-x hands byte strings back as Buffers; the core and the state machines want plain Uint8Array views. */
function bytes(b: Uint8Array): Uint8Array {
  return b.constructor === Uint8Array ? b : new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

function entryOut(e: Entry): Entry {
  return { term: e.term, index: e.index, type: e.type, data: bytes(e.data) };
}

export class LmdbBackend implements RaftBackend {
  private readonly root: RootDatabase;
  private readonly metas: Database<GroupMeta, string>;
  private readonly states: Database<DurableState, string>;
  private readonly snaps: Database<Snapshot, string>;
  private readonly log: Database<Entry, LogKey>;

  constructor(dir: string, mapBytes: number) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    try {
      this.root = open({ path: dir, encoding: CBOR, mapSize: mapBytes, maxDbs: 8, compression: false, overlappingSync: false });
    } catch (e) {
      throw new BrineError("RAFT_STORAGE", `cannot open ${dir}: ${(e as Error).message}`);
    }
    this.metas = this.root.openDB<GroupMeta, string>({ name: "raft/groups", encoding: CBOR });
    this.states = this.root.openDB<DurableState, string>({ name: "raft/state", encoding: CBOR });
    this.snaps = this.root.openDB<Snapshot, string>({ name: "raft/snaps", encoding: CBOR });
    this.log = this.root.openDB<Entry, LogKey>({ name: "raft/log", encoding: CBOR });
  }

  groups(): GroupMeta[] {
    return [...this.metas.getRange()].map(({ value }) => value);
  }

  load(group: string): StoredGroup | undefined {
    const meta = this.metas.get(group);
    const state = this.states.get(group);
    const snap = this.snaps.get(group);
    if (!meta || !state || !snap) return undefined;
    const snapshot: Snapshot = { metadata: snap.metadata, data: bytes(snap.data) };
    const entries = [...this.log.getRange({ start: [group, snapshot.metadata.index + 1], end: [group, INDEX_MAX] })].map(({ value }) => entryOut(value));
    return { meta, state, snapshot, entries };
  }

  /**
   * Synchronous on purpose: the Raft worker is a thread of its own and its pump waits for this commit anyway,
   * while an async lmdb-js transaction costs two thread hops (to LMDB's write thread and back) on every
   * commit: on a loaded 2-core box that was 0.5-1 ms per commit, on the follower's write in every Raft
   * commit's critical path. Inputs that arrive meanwhile wait in the worker's port, as they would in the
   * pump's inbox; a leader's appends were posted before the commit began.
   */
  commit(writes: readonly GroupWrite[]): Promise<void> {
    try {
      this.root.transactionSync(() => {
        for (const w of writes) this.write(w);
      });
    } catch (e) {
      return Promise.reject(new BrineError("RAFT_STORAGE", (e as Error).message));
    }
    return Promise.resolve();
  }

  /**
   * A leader's appends (and state) off the Raft thread, with `brine_raft_leader_write: background`: the thread
   * goes on reading its followers' answers while LMDB's write thread commits and fsyncs. Costs the two thread
   * hops commit() avoids, which is why only a leader's own appends go this way, and only when asked.
   */
  commitInBackground(writes: readonly GroupWrite[]): Promise<void> {
    // checked before the batch starts: a throw inside it would not take back the puts already queued
    const odd = writes.find((w) => w.meta || w.snapshot || w.dropFrom !== undefined || w.dropThrough !== undefined);
    if (odd) return Promise.reject(new BrineError("RAFT_STORAGE", `a background commit of ${odd.group} carries more than appends and state`));
    let done: Promise<unknown>;
    try {
      done = this.root.batch(() => {
        for (const w of writes) {
          for (const e of w.entries) void this.log.put([w.group, e.index], e);
          if (w.state) void this.states.put(w.group, w.state);
        }
      });
    } catch (e) {
      return Promise.reject(new BrineError("RAFT_STORAGE", (e as Error).message));
    }
    return done.then(
      () => undefined,
      (e: unknown) => Promise.reject(new BrineError("RAFT_STORAGE", (e as Error).message)),
    );
  }

  /** Runs inside the transaction: every put/remove below is part of it. */
  private write(w: GroupWrite): void {
    const g = w.group;
    if (w.meta) this.metas.putSync(g, w.meta);
    if (w.snapshot) this.snaps.putSync(g, w.snapshot);
    if (w.dropFrom !== undefined) this.dropRange(g, w.dropFrom, INDEX_MAX);
    if (w.dropThrough !== undefined) this.dropRange(g, 0, w.dropThrough);
    for (const e of w.entries) this.log.putSync([g, e.index], e);
    if (w.state) this.states.putSync(g, w.state);
  }

  private dropRange(group: string, lo: number, hi: number): void {
    // collect first: removing while a range cursor is open over the same keys is not allowed
    const keys = [...this.log.getKeys({ start: [group, lo], end: [group, hi + 1] })];
    for (const k of keys) this.log.removeSync(k);
  }

  async close(): Promise<void> {
    await this.root.close();
  }
}
