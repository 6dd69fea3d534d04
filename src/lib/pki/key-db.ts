/**
 * The indexed key store (`keys.cache_driver: mmap_key`): every minion key, its state and its digest in one
 * memory-mapped LMDB environment, `<minion pki dir>/brine-keys/` (where Salt's mmap_key keeps its
 * `.mmap_keys.idx`: beside the key directories it replaces). With this driver the store is authoritative, as
 * in Salt's design: the key directories are no longer read or written (a file dropped into `minions/` by
 * hand is not a key; `salt-run pki.migrate_to_mmap` brings the files in).
 *
 * Layout (one environment, three databases):
 * - `keys`: `<state>/<id>` → {pub, sha256, at} for state accepted, pending, rejected, denied. An id may sit in
 *   several states at once, exactly as it may have a file in several directories (a denied key beside the
 *   accepted one), so every operation of the file layout has the same meaning here.
 * - `meta`: `gen`, a generation counter every write transaction increments.
 * - `changes`: gen → `<state>/<id>` changed in that transaction, the last `changesKeptMax`.
 *
 * Readers (request workers, runner threads, salt-key, another master's process on the same disk) keep each
 * state's ids in memory (`SortedIds`) with the generation they saw: a listing costs one LMDB read of `gen`
 * (a memory read, no syscall) when nothing changed, and the changes since when something did; a reader
 * further behind than the change log reloads the state from the store. LMDB serialises writers across
 * threads and processes; a reader sees a consistent snapshot, renewed by lmdb-js on the timer turn after it
 * was taken (so another process's write is seen by the next request, not within the turn that is reading). LMDB's lock and mmap do
 * not work on a network filesystem: the master refuses this driver on one (prepareKeyStore, key-store.ts).
 */
import { createHash } from "node:crypto";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { open, type Database, type RootDatabase } from "lmdb";
import { SortedIds } from "./sorted-ids.js";
import type { KeyState } from "./key-store.js";

/** The store's directory name under the minion pki dir. */
export const KEY_DB_DIR = "brine-keys";
/** LMDB map size (address space reserved, not disk used): about 4M keys of a 4096-bit key's size. */
export const keyDbMapBytes = 8 * 1024 * 1024 * 1024;
/** Changes kept for readers that are behind; one further behind reloads the state it lists. */
export const changesKeptMax = 100_000;
/** A reader applies at most this many changes one by one; more, it reloads the state (cheaper by then). */
export const changesAppliedMax = 20_000;
/** Old change records removed per write transaction once over changesKeptMax (the trim is spread out). */
const changesTrimPerWrite = 64;

export interface KeyRecord {
  pub: string;
  /** sha256 of `pub`, hex */
  sha256: string;
  /** when it was written, ms since the epoch */
  at: number;
}

const LMDB_CBOR = "cbor" as unknown as "msgpack";

export function keyDbDir(pkiDir: string): string {
  return path.join(pkiDir, KEY_DB_DIR);
}

export function pubDigest(pub: string): string {
  return createHash("sha256").update(pub, "utf8").digest("hex");
}

/** An error with an errno-style code, as a missing file's (key-actions.ts passes on ENOENT). */
function enoent(what: string): NodeJS.ErrnoException {
  const e = new Error(`ENOENT: no such key, ${what}`) as NodeJS.ErrnoException;
  e.code = "ENOENT";
  return e;
}

export class KeyDb {
  private readonly root: RootDatabase;
  private readonly keys: Database<KeyRecord, string>;
  private readonly meta: Database<number, string>;
  private readonly changes: Database<string, number>;
  private readonly views = new Map<KeyState, { gen: number; ids: SortedIds }>();

  constructor(
    readonly dir: string,
    private readonly now: () => number = Date.now,
    /** the change log's bounds (tests make them small) */
    private readonly limits = { kept: changesKeptMax, applied: changesAppliedMax },
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.root = open({ path: dir, mapSize: keyDbMapBytes, maxDbs: 4, compression: false });
    this.keys = this.root.openDB<KeyRecord, string>({ name: "keys", encoding: LMDB_CBOR });
    this.meta = this.root.openDB<number, string>({ name: "meta", encoding: LMDB_CBOR });
    this.changes = this.root.openDB<string, number>({ name: "changes", encoding: LMDB_CBOR });
  }

  close(): Promise<void> {
    return this.root.close();
  }

  generation(): number {
    return this.meta.get("gen") ?? 0;
  }

  get(state: KeyState, id: string): KeyRecord | undefined {
    return this.keys.get(`${state}/${id}`);
  }

  has(state: KeyState, id: string): boolean {
    return this.keys.doesExist(`${state}/${id}`);
  }

  /** Writes (or replaces) a key. */
  put(state: KeyState, id: string, pub: string): void {
    this.write([[`${state}/${id}`, { pub, sha256: pubDigest(pub), at: this.now() }]]);
  }

  /**
   * Writes many keys in one transaction (the migration), each replacing what the store held for it; returns
   * how many were written.
   */
  putMany(entries: readonly { state: KeyState; id: string; pub: string }[]): number {
    const at = this.now();
    this.write(entries.map((e) => [`${e.state}/${e.id}`, { pub: e.pub, sha256: pubDigest(e.pub), at }]));
    return entries.length;
  }

  /** Moves a key between states (replacing one already there); ENOENT when it is not in `from`. */
  move(from: KeyState, to: KeyState, id: string): void {
    this.root.transactionSync(() => {
      const rec = this.keys.get(`${from}/${id}`);
      if (rec === undefined) throw enoent(`${from}/${id}`);
      if (from === to) return;
      this.keys.putSync(`${to}/${id}`, { ...rec, at: this.now() });
      this.keys.removeSync(`${from}/${id}`);
      this.logChanges([`${to}/${id}`, `${from}/${id}`]);
    });
  }

  /** Removes a key; false when it was not there. */
  remove(state: KeyState, id: string): boolean {
    return this.root.transactionSync(() => {
      if (!this.keys.removeSync(`${state}/${id}`)) return false;
      this.logChanges([`${state}/${id}`]);
      return true;
    });
  }

  /** The ids in one state, sorted; the same array until the state changes (do not modify it). */
  ids(state: KeyState): readonly string[] {
    const gen = this.generation();
    let v = this.views.get(state);
    if (v && v.gen === gen) return v.ids.ids;
    if (v && gen > v.gen && gen - v.gen <= this.limits.applied && this.caughtUpFrom(v.gen)) {
      const prefix = `${state}/`;
      const changed: [string, boolean][] = [];
      for (const { value } of this.changes.getRange({ start: v.gen + 1, end: gen + 1 })) {
        if (value.startsWith(prefix)) changed.push([value.slice(prefix.length), this.keys.doesExist(value)]);
      }
      v.ids.apply(changed);
      v.gen = gen;
      return v.ids.ids;
    }
    const ids = new SortedIds();
    ids.reset(this.scan(state));
    v = { gen, ids };
    this.views.set(state, v);
    return ids.ids;
  }

  /** Every key of one state with its record, in key order (the migration's report, a peer's manifest). */
  *entries(state: KeyState): IterableIterator<{ id: string; record: KeyRecord }> {
    const prefix = `${state}/`;
    for (const { key, value } of this.keys.getRange({ start: prefix, end: `${state}0` })) yield { id: key.slice(prefix.length), record: value };
  }

  private *scan(state: KeyState): IterableIterator<string> {
    const prefix = `${state}/`;
    for (const key of this.keys.getKeys({ start: prefix, end: `${state}0` })) yield key.slice(prefix.length);
  }

  /** True when the change log still holds every change after `gen`. */
  private caughtUpFrom(gen: number): boolean {
    for (const key of this.changes.getKeys({ limit: 1 })) return key <= gen + 1;
    return false;
  }

  private write(puts: readonly (readonly [string, KeyRecord])[]): void {
    this.root.transactionSync(() => {
      for (const [k, rec] of puts) this.keys.putSync(k, rec);
      this.logChanges(puts.map(([k]) => k));
    });
  }

  /** Inside a write transaction: one generation per change, each named in the change log, then the trim. */
  private logChanges(keys: readonly string[]): void {
    let gen = this.generation();
    for (const k of keys) this.changes.putSync(++gen, k);
    this.meta.putSync("gen", gen);
    // the oldest records past the bound, collected before any is removed (no cursor walks a changing tree)
    const stale: number[] = [];
    for (const old of this.changes.getKeys({ limit: changesTrimPerWrite + keys.length })) {
      if (old > gen - this.limits.kept) break;
      stale.push(old);
    }
    for (const old of stale) this.changes.removeSync(old);
  }
}
