/**
 * The master's LMDB environment: one per node, on local disk (LMDB's locking and mmap do not work on a
 * network filesystem, so even when `cachedir` is a shared mount brine keeps this under a local path:
 * `brine_lmdb_dir`, default `<cachedir>/brine-lmdb`). Each thread opens its own handle (lmdb-js shares
 * the environment within a process); writes from all threads are batched by lmdb-js into transactions
 * — group commit, never one fsync per record. A write's promise resolves when its transaction is
 * committed (visible); its `flushed` promise when that transaction is on disk (see `durable`).
 *
 * Values are CBOR (cbor-x) — our own format; Salt's msgpack layouts are for Salt's files, not ours.
 */
import { open, type RootDatabase, type Database } from "lmdb";
import { mkdirSync } from "node:fs";
import path from "node:path";

export interface StoreConfig {
  cachedir: string;
  brine_lmdb_dir?: unknown;
  brine_lmdb_map_bytes: number;
}

export function lmdbDir(cfg: StoreConfig): string {
  return typeof cfg.brine_lmdb_dir === "string" && cfg.brine_lmdb_dir ? cfg.brine_lmdb_dir : path.join(cfg.cachedir, "brine-lmdb");
}

export interface Store {
  root: RootDatabase;
  /** jobs/loads: jid → publish load (without `key`) */
  loads: Database<Record<string, unknown>, string>;
  /**
   * jobs/listed: jid → the job's jobs.list_jobs entry, msgpack bytes (job-listing.ts) in a CBOR byte string, written with its load; a
   * job whose load came in without one (a raw bank copy, an older cache) is listed from its load and its entry
   * written then (JobCache.listing)
   */
  listed: Database<Uint8Array, string>;
  /** jobs/listed read as its stored bytes (the CBOR byte strings themselves: JobCache.listing unwraps them) */
  listedRaw: Database<Buffer, string>;
  /** jobs/minions: jid → expected minion ids */
  minions: Database<string[], string>;
  /** jobs/returns: `<jid>/<id>` → return record */
  returns: Database<Record<string, unknown>, string>;
  /** jobs/endtimes: jid → jid_to_time text */
  endtimes: Database<string, string>;
  /** jobs/nocache: jid → true */
  nocache: Database<boolean, string>;
  /**
   * jobs/handoff: the placement outbox (jobs routed to a ring, job-handoff.ts): `<jid>` (the job's load, minions,
   * end time, nocache) or `<jid>/<id>` (a return) → a random stamp, rewritten before each write of that record,
   * removed once every owner of the jid has the record durably
   */
  handoff: Database<number, string>;
  /**
   * jobs/pruned: `before` → the keep_jobs cutoff (ms since the epoch) of the last prune: every job whose jid is older
   * is pruned, whether or not its records are deleted yet (JobCache hides them; they are deleted in the background)
   */
  pruned: Database<number, string>;
  /**
   * jobs/placed-by: ring → the table this master's job copies were last placed by (job-placement.ts), so a
   * master that was down while the ring's owners changed rebalances when it starts again
   */
  placedBy: Database<Record<string, unknown>, string>;
  /** minions/<id>/data: id → {grains, pillar} */
  minionData: Database<{ grains?: unknown; pillar?: unknown }, string>;
  /** minions/<id>/mine: id → {fun: data} */
  mine: Database<Record<string, unknown>, string>;
  /** minions/stamps: `d/<id>` / `m/<id>` → [time ms, origin master] of the last data / mine write (minion-cache.ts) */
  stamps: Database<[number, string], string>;
  /** minions/presence: `<master>/<part>` → a master's connected set (presence-board.ts) */
  presence: Database<unknown, string>;
  /** auth/tokens: eauth tokens and their tombstones (src/lib/auth/tokens.ts) */
  tokens: Database<unknown, string>;
  close(): Promise<void>;
}

/** lmdb-js supports "cbor" (through cbor-x) though its typings list only the built-in encodings. */
export const LMDB_CBOR = "cbor" as unknown as "msgpack";


/**
 * A named database a read-only store does not hold (an older master's environment): read as empty. A read-only
 * store has no write methods (lmdb-js leaves them out), this stand-in neither.
 */
const ABSENT_DB = { get: () => undefined, getKeys: () => [], getRange: () => [], getValues: () => [], doesExist: () => false, getCount: () => 0 } as unknown as Database<never, string>;

/**
 * The job cache's LMDB environment. With `readOnly` (another master's environment that must not change, such as
 * a removed master's for cluster.recover_outbox) it is opened with LMDB's MDB_RDONLY: data.mdb is never written
 * (lock.mdb's reader table is, as for any reader), the directory is not created, and a named database it lacks
 * reads as empty.
 */
export function openStore(cfg: StoreConfig, opts: { readOnly?: boolean } = {}): Store {
  const dir = lmdbDir(cfg);
  const readOnly = opts.readOnly === true;
  if (!readOnly) mkdirSync(dir, { recursive: true, mode: 0o700 });
  // overlappingSync (lmdb-js's default on Linux) lets a commit resolve before its fsync, so the next
  // transaction can start while the disk flushes; separateFlushed gives every write a `flushed` promise for
  // the writes that must be durable before a reply (job returns: job-cache.ts waits for it).
  const root = readOnly
    ? open({ path: dir, encoding: LMDB_CBOR, mapSize: cfg.brine_lmdb_map_bytes, maxDbs: 32, compression: false, readOnly: true })
    : open({ path: dir, encoding: LMDB_CBOR, mapSize: cfg.brine_lmdb_map_bytes, maxDbs: 32, compression: false, overlappingSync: true, separateFlushed: true });
  const db = <V>(name: string) => (root.openDB<V, string>({ name, encoding: LMDB_CBOR }) as Database<V, string> | undefined) ?? (ABSENT_DB as Database<V, string>);
  return {
    root,
    loads: db("jobs/loads"),
    listed: db("jobs/listed"),
    listedRaw: (root.openDB<Buffer, string>({ name: "jobs/listed", encoding: "binary" }) as Database<Buffer, string> | undefined) ?? (ABSENT_DB as Database<Buffer, string>),
    minions: db("jobs/minions"),
    returns: db("jobs/returns"),
    endtimes: db("jobs/endtimes"),
    nocache: db("jobs/nocache"),
    handoff: db("jobs/handoff"),
    pruned: db("jobs/pruned"),
    placedBy: db("jobs/placed-by"),
    minionData: db("minions/data"),
    mine: db("minions/mine"),
    // opened here with the rest, never at first use: lmdb-js opens a named database in a write transaction of
    // its own, which waits (blocking the thread) while another process holds the environment's write lock
    stamps: db("minions/stamps"),
    presence: db("minions/presence"),
    tokens: db("auth/tokens"),
    close: () => root.close(),
  };
}

/** What lmdb-js returns for a write with `separateFlushed`: committed, and `flushed` once on disk. */
type FlushedPromise<T> = Promise<T> & { flushed?: PromiseLike<unknown> };

/**
 * The write's result once its transaction is on disk (fsync done), not merely committed: what a reply
 * that promises durability (a job return) must wait for.
 */
export function durable<T>(write: Promise<T>): Promise<T> {
  const flushed = (write as FlushedPromise<T>).flushed;
  if (!flushed) return write;
  return write.then((v) => Promise.resolve(flushed).then(() => v));
}
