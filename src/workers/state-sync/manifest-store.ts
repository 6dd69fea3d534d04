/**
 * The kept manifests of the state-sync directory channels (sources.ts's DirSource reads and writes them): an LMDB
 * environment of its own, one database per channel keyed by item path (a long one by manifest.ts manifestKey), so a walk is in the manifest's order; the
 * stored form of an entry, and the batched walk that never holds a read transaction across an await.
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import { open as openLmdb, type Database, type RootDatabase } from "lmdb";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { LMDB_CBOR, lmdbDir } from "../../lib/store/lmdb-env.js";
import { isLongPath, manifestKey, tombstone, type Channel, type ManifestEntry } from "./manifest.js";

/** A manifest entry as the manifest database keeps it (the path is the key): the entry's fields and the local signature. */
export interface Stored {
  s: number;
  h: string;
  m: number;
  t: number;
  d?: 1;
  /** size:mtimeMs:ino of the local file when the entry was taken (the indexed key store: its sha256); absent for tombstones */
  g?: string;
  /** the item's path, when it is not its key (a path longer than shortPathBytesMax: manifest.ts manifestKey) */
  p?: string;
}

/** A channel's manifest database (openManifests). */
export type ManifestDb = Database<Stored, string>;

/** The manifest database of channel `ch`. */
export function manifestDb(root: RootDatabase, ch: Channel): ManifestDb {
  return root.openDB<Stored, string>({ name: ch, encoding: LMDB_CBOR });
}

/** A scan's scratch database: the names of a directory too large to sort in memory, kept in order by LMDB (sources.ts). */
export type ScratchDb = Database<number, string>;

/** The scratch database of the directory scans (every channel's, each under a key prefix of its own). */
export function scratchDb(root: RootDatabase): ScratchDb {
  return root.openDB<number, string>({ name: "scan-scratch", encoding: LMDB_CBOR });
}

/** The entry kept under manifest key `key`. */
export function toEntry(key: string, v: Stored): ManifestEntry {
  const p = v.p ?? key;
  return v.d ? tombstone(p, v.t) : { p, s: v.s, h: v.h, m: v.m, t: v.t };
}

export function toStored(e: ManifestEntry, sig?: string): Stored {
  const v: Stored = e.d ? { s: 0, h: "", m: 0, t: e.t, d: 1 } : sig === undefined ? { s: e.s, h: e.h, m: e.m, t: e.t } : { s: e.s, h: e.h, m: e.m, t: e.t, g: sig };
  if (isLongPath(e.p)) v.p = e.p;
  return v;
}

export function sameStored(a: Stored | undefined, b: Stored | undefined): boolean {
  if (!a || !b) return a === b;
  return a.s === b.s && a.h === b.h && a.m === b.m && a.t === b.t && a.d === b.d && a.g === b.g && a.p === b.p;
}

/** What the manifest keeps for item `p` (under its manifest key; another long path with the same key is not `p`'s). */
export function storedOf(db: ManifestDb, p: string): Stored | undefined {
  const key = manifestKey(p);
  const v = db.get(key);
  if (v === undefined || key === p) return v;
  return v.p === p ? v : undefined;
}

/** One write of a rescan: `next` (undefined: forget the item) if the item is still `was`. */
export interface ScanWrite {
  p: string;
  was: Stored | undefined;
  next: Stored | undefined;
}

/** Names of one directory a scan sorts in memory; a larger directory's names go through the scratch database this many at a time, count. */
export const dirNamesInMemoryMax = 4096;
/**
 * Entries read from the manifest database per batch (a walk over it holds this many at once, decoded), count.
 * Small for the same reason as scanWriteBatch: a batch alive across two scavenges is promoted (a page served from
 * batches of 512 promoted ~430 B an item of decoded rows).
 */
export const cursorBatchItems = 64;
/**
 * Manifest writes of a rescan per transaction, count. Small enough that a batch's rows (a row, its hex sha256 and
 * signature: ~250 B) die in the young generation: a scan allocates ~10 KiB an item, so the thread's 1 MiB
 * semi-space is scavenged every ~100 items and a batch of 256 outlived two scavenges (promoted: 2.8 MiB at 10k
 * items against 0.6–1.3 with 64).
 */
export const scanWriteBatch = 64;

/**
 * The kept manifests of the directory channels: an LMDB environment of its own (`<brine_lmdb_dir>/state-sync/`,
 * local disk like the job cache's, one database per channel, keyed by item path (manifestKey), so kept in the manifest's order),
 * written without fsync (a manifest lost in a crash is rebuilt by the next scan; only tombstones and stamps are
 * lost with it).
 */
export function openManifests(cfg: MasterConfig): RootDatabase {
  const dir = path.join(lmdbDir(cfg), "state-sync");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return openLmdb({ path: dir, encoding: LMDB_CBOR, mapSize: 256 * 1024 * 1024, maxDbs: 8, compression: false, noSync: true });
}

/** The entries of a manifest (or scratch) database in order, from `start` (inclusive, or after `after`) to `end` (exclusive), cursorBatchItems at a time. */
export function* walkDb<V = Stored>(db: Database<V, string>, opts: { after?: string; start?: string; end?: string } = {}): Generator<[string, V]> {
  let start = opts.after ?? opts.start;
  let skip = opts.after;
  for (;;) {
    // each batch read whole, so no read transaction stays open while the caller awaits between items
    const batch: [string, V][] = [];
    for (const { key, value } of db.getRange({ ...(start !== undefined ? { start } : {}), ...(opts.end !== undefined ? { end: opts.end } : {}), limit: cursorBatchItems + (skip !== undefined ? 1 : 0) })) {
      if (skip !== undefined && key === skip) continue;
      if (batch.length < cursorBatchItems) batch.push([key as string, value]);
    }
    yield* batch;
    if (batch.length < cursorBatchItems) return;
    start = skip = batch.at(-1)![0];
  }
}

