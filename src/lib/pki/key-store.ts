/**
 * Minion keys, by `keys.cache_driver` (Salt's option):
 * - `localfs_key` (default): files in pki_dir, laid out as Salt's: `minions/` (accepted), `minions_pre/`
 *   (pending), `minions_rejected/`, `minions_denied/`. The directories are the source of truth, shared with
 *   `salt-key` (and another master's, or a human's `mv`) whether or not the master runs; listings are
 *   remembered per directory while its mtime says it is unchanged (`listCached`), a cache that never lies.
 * - `mmap_key`: the indexed store (key-db.ts) is the source of truth; the directories are not used.
 * `minions_autosign/` (one-shot autosign stubs) stays a directory with either driver. Every id reaching a
 * path or a store key here has passed validId first.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { compareIds, validId } from "../../shared/protocol/ids.js";
import { BrineError } from "../../shared/errors.js";
import { KeyDb, keyDbDir, pubDigest } from "./key-db.js";
import { minionPkiDir, onNetworkFs, type SharedFsConfig } from "../../shared/shared-fs.js";

export type KeyState = "accepted" | "pending" | "rejected" | "denied";
export const KEY_DIRS: Record<KeyState, string> = {
  accepted: "minions",
  pending: "minions_pre",
  rejected: "minions_rejected",
  denied: "minions_denied",
};
export const AUTOSIGN_DIR = "minions_autosign";

/** A directory listing is trusted from cache only when the directory changed longer ago than this (ms). */
export const racyMs = 1000;

/** Salt's `keys.cache_driver` values brine has. */
export const KEY_CACHE_DRIVERS = ["localfs_key", "mmap_key"] as const;
export type KeyCacheDriver = (typeof KEY_CACHE_DRIVERS)[number];

/** One KeyDb per store directory and thread: lmdb-js shares the environment, each handle keeps its own views. */
const keyDbs = new Map<string, KeyDb>();
function keyDbFor(pkiDir: string): KeyDb {
  const dir = keyDbDir(pkiDir);
  let db = keyDbs.get(dir);
  if (!db) keyDbs.set(dir, (db = new KeyDb(dir)));
  return db;
}

/** Closes this thread's handles on the indexed stores (tests, a CLI about to exit). */
export async function closeKeyDbs(): Promise<void> {
  const dbs = [...keyDbs.values()];
  keyDbs.clear();
  await Promise.all(dbs.map((d) => d.close()));
}

/** The configured driver (`keys.cache_driver`); the schema has already refused any other value. */
export function keyCacheDriver(cfg: { "keys.cache_driver"?: unknown }): KeyCacheDriver {
  return cfg["keys.cache_driver"] === "mmap_key" ? "mmap_key" : "localfs_key";
}

/** The minion keys of a master's configuration: its minion pki dir, with its driver. */
export function keyStoreFor(cfg: KeyStoreConfig): KeyStore {
  return new KeyStore(minionPkiDir(cfg), keyCacheDriver(cfg));
}

type KeyStoreConfig = Pick<SharedFsConfig, "pki_dir" | "cluster_pki_dir" | "cluster_id"> & { "keys.cache_driver"?: unknown };

/**
 * At the master's start: makes the key directories, refuses `mmap_key` on a network filesystem (LMDB's lock
 * and mmap are not safe there), and returns a warning when the indexed store is empty while the key
 * directories still hold keys (the driver was switched before `salt-run pki.migrate_to_mmap`: every minion
 * would be asked to sign in again as a new one).
 */
export function prepareKeyStore(cfg: KeyStoreConfig, networkFs: (dir: string) => boolean = onNetworkFs): string | undefined {
  const dir = minionPkiDir(cfg);
  const driver = keyCacheDriver(cfg);
  if (driver === "mmap_key" && networkFs(dir)) throw new BrineError("KEYS_STORE_NETWORK_FS", `${dir} (keys.cache_driver: mmap_key needs a local disk; use localfs_key)`);
  const store = new KeyStore(dir, driver);
  store.ensureDirs();
  if (driver !== "mmap_key" || store.generation() !== 0) return undefined;
  const files = new KeyStore(dir, "localfs_key");
  const waiting = (Object.keys(KEY_DIRS) as KeyState[]).reduce((n, s) => n + files.list(s).length, 0);
  return waiting ? `keys.cache_driver is mmap_key but its store in ${keyDbDir(dir)} is empty while ${dir} holds ${waiting} key files: run "salt-run pki.migrate_to_mmap" (until then every minion signs in as a new one)` : undefined;
}

export class KeyStore {
  /** the indexed store, with `mmap_key` */
  private readonly db: KeyDb | undefined;

  constructor(
    readonly pkiDir: string,
    readonly driver: KeyCacheDriver = "localfs_key",
  ) {
    this.db = driver === "mmap_key" ? keyDbFor(pkiDir) : undefined;
  }

  ensureDirs(): void {
    const dirs = this.db ? [AUTOSIGN_DIR] : [...Object.values(KEY_DIRS), AUTOSIGN_DIR];
    for (const d of dirs) mkdirSync(path.join(this.pkiDir, d), { recursive: true, mode: 0o700 });
  }

  file(state: KeyState, id: string): string {
    if (!validId(id)) throw new BrineError("BAD_ID", JSON.stringify(id));
    return path.join(this.pkiDir, KEY_DIRS[state], id);
  }

  exists(state: KeyState, id: string): boolean {
    if (this.db) return this.db.has(state, checkedId(id));
    return existsSync(this.file(state, id));
  }

  /** Salt's quirk: a directory where a key file should be (never, in the indexed store). */
  isDirectory(state: KeyState, id: string): boolean {
    if (this.db) return false;
    try {
      return statSync(this.file(state, id)).isDirectory();
    } catch {
      return false;
    }
  }

  read(state: KeyState, id: string): string | undefined {
    if (this.db) return this.db.get(state, checkedId(id))?.pub;
    try {
      return readFileSync(this.file(state, id), "utf8");
    } catch {
      return undefined;
    }
  }

  /** sha256 of a key's text (hex), or undefined when there is none. */
  digest(state: KeyState, id: string): string | undefined {
    if (this.db) return this.db.get(state, checkedId(id))?.sha256;
    const pub = this.read(state, id);
    return pub === undefined ? undefined : pubDigest(pub);
  }

  write(state: KeyState, id: string, pub: string): void {
    if (this.db) return this.db.put(state, checkedId(id), pub);
    const f = this.file(state, id);
    mkdirSync(path.dirname(f), { recursive: true, mode: 0o700 });
    writeFileSync(f, pub, { mode: 0o644 });
  }

  /** Moves a key between states; throws ENOENT (as a rename does) when it is not in `from`. */
  move(from: KeyState, to: KeyState, id: string): void {
    if (this.db) return this.db.move(from, to, checkedId(id));
    const dst = this.file(to, id);
    mkdirSync(path.dirname(dst), { recursive: true, mode: 0o700 });
    renameSync(this.file(from, id), dst);
  }

  remove(state: KeyState, id: string): boolean {
    if (this.db) return this.db.remove(state, checkedId(id));
    const f = this.file(state, id);
    if (!existsSync(f)) return false;
    rmSync(f, { force: true });
    return true;
  }

  /** Ids in one state, sorted; dotfiles and invalid names are ignored (Salt skips dotfiles). */
  list(state: KeyState): string[] {
    if (this.db) return this.db.ids(state).slice();
    const dir = path.join(this.pkiDir, KEY_DIRS[state]);
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return [];
    }
    return names.filter((n) => !n.startsWith(".") && validId(n)).sort(compareIds);
  }

  /**
   * `list`, remembered while the directory is unchanged: a publish asks for the accepted ids every time,
   * and a readdir of 100k keys per publish is tens of milliseconds. The directory's mtime changes with
   * every key added or removed; a listing is trusted only when that mtime is over `racyMs` old, so two
   * changes within one tick of the filesystem's clock (a stat cannot tell them apart) are never missed.
   */
  listCached(state: KeyState, nowMs = Date.now()): readonly string[] {
    if (this.db) return this.db.ids(state);
    const dir = path.join(this.pkiDir, KEY_DIRS[state]);
    let mtimeMs: number;
    try {
      mtimeMs = statSync(dir).mtimeMs;
    } catch {
      this.listings.delete(state);
      return [];
    }
    const hit = this.listings.get(state);
    if (hit && hit.mtimeMs === mtimeMs && hit.readAtMs - mtimeMs > racyMs) return hit.names;
    const names = this.list(state);
    this.listings.set(state, { mtimeMs, readAtMs: nowMs, names });
    return names;
  }

  private readonly listings = new Map<KeyState, { mtimeMs: number; readAtMs: number; names: readonly string[] }>();

  /** The indexed store's generation (changes since it was made), or undefined with `localfs_key`. */
  generation(): number | undefined {
    return this.db?.generation();
  }

  /** States an id has a key in (normally zero or one). */
  statesOf(id: string): KeyState[] {
    return (Object.keys(KEY_DIRS) as KeyState[]).filter((s) => this.exists(s, id));
  }

  /** The indexed store itself, with `mmap_key` (the migration writes into it). */
  indexed(): KeyDb | undefined {
    return this.db;
  }

  autosignStub(id: string): string {
    if (!validId(id)) throw new BrineError("BAD_ID", JSON.stringify(id));
    return path.join(this.pkiDir, AUTOSIGN_DIR, id);
  }
}

function checkedId(id: string): string {
  if (!validId(id)) throw new BrineError("BAD_ID", JSON.stringify(id));
  return id;
}

/**
 * A per-thread cache of accepted public keys for the hot request path (the v3 `tok` check needs the
 * minion's key on every request). Entries live `ttlMs`; a key deleted by salt-key stops working within
 * that time (Salt reads the file every time; a 1 s window costs nothing and saves a syscall per request).
 * With the indexed store an entry lives exactly as long as the store's generation is unchanged, so a key
 * deleted or replaced anywhere stops working at the next request. Absent keys are never cached.
 */
export class AcceptedKeyCache {
  private readonly entries = new Map<string, { pem: string | undefined; at: number; gen: number | undefined }>();
  constructor(
    private readonly store: KeyStore,
    private readonly ttlMs: number,
    private readonly entriesMax: number,
    private readonly now: () => number = Date.now,
  ) {}

  get(id: string): string | undefined {
    const t = this.now();
    const gen = this.store.generation();
    const e = this.entries.get(id);
    if (e && (gen === undefined ? t - e.at < this.ttlMs : e.gen === gen)) return e.pem;
    const pem = this.store.read("accepted", id);
    this.entries.delete(id);
    // Only keys that exist are cached: a minion whose key was just (re)accepted by another thread
    // (the clear lane) must be recognised by its very next request, which real minions send at once.
    if (pem === undefined) return undefined;
    if (this.entries.size >= this.entriesMax) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(id, { pem, at: t, gen });
    return pem;
  }

  invalidate(id?: string): void {
    if (id === undefined) this.entries.clear();
    else this.entries.delete(id);
  }
}
