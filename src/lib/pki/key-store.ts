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
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { compareIds, validId } from "../../shared/protocol/ids.js";
import { BrineError } from "../../shared/errors.js";
import { KeyDb, keyDbDir, pubDigest } from "./key-db.js";
import { minionPkiDir, onNetworkFs, type SharedFsConfig } from "../../shared/shared-fs.js";
import { cleanKey } from "../../shared/protocol/pem.js";
import { KeyDirStamp } from "./key-dir-stamp.js";
import { KeyView, keyIdBytesMax, type KeyRecord, type KeyTable } from "../../shared/key-table.js";

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

  /**
   * Writes a key file whole: a temp file (a dotfile, which listings skip) renamed into place, so a reader
   * never sees half a key and the directory's mtime moves even when a key is replaced (KeyDirStamp).
   */
  write(state: KeyState, id: string, pub: string): void {
    if (this.db) return this.db.put(state, checkedId(id), pub);
    const f = this.file(state, id);
    mkdirSync(path.dirname(f), { recursive: true, mode: 0o700 });
    const tmp = path.join(path.dirname(f), `.brine-${process.pid}-${Math.random().toString(36).slice(2)}.tmp`);
    try {
      writeFileSync(tmp, pub, { mode: 0o644 });
      renameSync(tmp, f);
    } catch (e) {
      rmSync(tmp, { force: true });
      throw e;
    }
    this.changed(state);
  }

  /** Moves a key between states; throws ENOENT (as a rename does) when it is not in `from`. */
  move(from: KeyState, to: KeyState, id: string): void {
    if (this.db) return this.db.move(from, to, checkedId(id));
    const dst = this.file(to, id);
    mkdirSync(path.dirname(dst), { recursive: true, mode: 0o700 });
    renameSync(this.file(from, id), dst);
    this.changed(from);
    this.changed(to);
  }

  remove(state: KeyState, id: string): boolean {
    if (this.db) return this.db.remove(state, checkedId(id));
    const f = this.file(state, id);
    try {
      unlinkSync(f);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw e;
    }
    this.changed(state);
    return true;
  }

  private readonly stamps = new Map<KeyState, KeyDirStamp>();

  /**
   * The per-thread change stamp of a state's directory (localfs_key only: the indexed store has its
   * generation), shared by the caches built on this KeyStore; this object's own writes make it look again.
   */
  dirStamp(state: KeyState): KeyDirStamp | undefined {
    if (this.db) return undefined;
    let s = this.stamps.get(state);
    if (!s) {
      const dir = path.join(this.pkiDir, KEY_DIRS[state]);
      s = new KeyDirStamp(() => {
        try {
          return statSync(dir).mtimeMs;
        } catch {
          return undefined;
        }
      });
      this.stamps.set(state, s);
    }
    return s;
  }

  private changed(state: KeyState): void {
    this.stamps.get(state)?.touch();
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

/** How long a thread keeps an accepted key its directory's stamp vouches for, ms: bounds an in-place rewrite of the file. */
export const acceptedKeyTrustMsMax = 10_000;

/** A minion's accepted key: its text (Salt's clean_key form) and the tag naming that text (KeyTable's; 0: none kept). */
export interface AcceptedKey {
  readonly pem: string;
  /** changes exactly when the text does; what a thread derives from the key (a verified tok, ciphertexts) is keyed by it */
  readonly tag: number;
}

/** A copy this thread keeps itself: an id the shared table cannot hold (too long, the table full), or no table. */
interface LocalEntry {
  pem: string;
  tag: number;
  readAt: number;
  gen: number;
  dirMtime: number;
  file: KeyRecord["file"];
  /** the tok verified against this text, latin1; "" when none */
  tok: string;
}

/**
 * The accepted public keys (Salt's clean_key form) of a master's minions as its request threads see them: every
 * `_auth` compares the key a minion presents with it, and the v3 `tok` check needs it on every request. With the
 * master's KeyTable (src/shared/key-table.ts) a minion's key and its verified tok are held once per master, not
 * once per thread that served the minion (issue 17); an id the table cannot hold gets a copy of this thread's own.
 * When a copy is still good, whichever thread read it:
 * - `get` (the request path), with `localfs_key`: while the accepted directory's mtime is the one the reading
 *   thread's stamp vouched for before its read and this thread's stamp still vouches for (KeyDirStamp: read at most
 *   every 250 ms per thread), up to `trustMsMax`: a key deleted, rejected or replaced by salt-key (a rename or
 *   unlink in `minions/`) stops working within 250 ms, with no system call per request. While a stamp cannot
 *   vouch (the directory changed within the last second, or cannot be read) a copy lives `ttlMs` (1 s). A file
 *   rewritten in place (no rename) is seen within `trustMsMax`.
 * - `getFresh` (a sign-in, which Salt answers from the file every time): one stat of the key file instead of
 *   reading it: the copy is used only while the file is the one it was read from (inode, size, mtime, ctime)
 *   and was over `racyMs` old when read, so a deleted, replaced or rewritten key is seen at once.
 * - With the indexed store a copy lives exactly as long as the store's generation is unchanged, so a key
 *   deleted or replaced anywhere stops working at the next request.
 * - `invalidate(id)` (this master wrote, moved or removed the key) drops the copy for every thread.
 * Absent keys are never kept (a minion whose key was just accepted is recognised at its very next request).
 */
export class AcceptedKeyCache {
  private readonly local = new Map<string, LocalEntry>();
  private readonly stamp: KeyDirStamp | undefined;
  private readonly view = new KeyView();
  private localTags = 0;
  private fullWarned = false;
  constructor(
    private readonly store: KeyStore,
    private readonly ttlMs: number,
    /** copies this thread keeps itself (ids the table cannot hold), count */
    private readonly entriesMax: number,
    private readonly now: () => number = Date.now,
    private readonly trustMsMax = acceptedKeyTrustMsMax,
    /** the master's shared table; absent: this thread keeps every key it read itself */
    private readonly table?: KeyTable,
    private readonly warn: (line: string) => void = () => {},
  ) {
    this.stamp = store.dirStamp("accepted");
  }

  /** Copies this thread keeps itself (tests). */
  get ownCopies(): number {
    return this.local.size;
  }

  /** The accepted key of `id`, or undefined when it has none: the request path's copy. */
  get(id: string): AcceptedKey | undefined {
    if (!validId(id)) return undefined; // no key file can have this name (a request's id is checked later)
    const t = this.now();
    const gen = this.store.generation();
    // taken before any read: a change after it moves the directory's mtime on
    const dirMtime = gen === undefined ? this.stamp?.vouchedMtime(t) : undefined;
    const v = this.table?.look(id, this.view) ? this.view : this.local.get(id);
    if (v && this.good(v, t, gen, dirMtime)) {
      const pem = v === this.view ? this.table!.text(this.view) : (v as LocalEntry).pem;
      if (pem !== undefined) return { pem, tag: v.tag };
    }
    return this.read(id, t, gen, dirMtime);
  }

  /** `get` as fresh as a read of the key file (a sign-in): one stat of the file, the copy only while it is the same file. */
  getFresh(id: string): AcceptedKey | undefined {
    if (!validId(id)) return undefined;
    const t = this.now();
    const gen = this.store.generation();
    if (gen !== undefined) return this.get(id);
    const dirMtime = this.stamp?.vouchedMtime(t);
    const v = this.table?.look(id, this.view) ? this.view : this.local.get(id);
    const file = v === undefined ? undefined : v === this.view ? (Number.isNaN(v.ino) ? undefined : (v as KeyView)) : (v as LocalEntry).file;
    if (v && file) {
      const st = statSync(this.store.file("accepted", id), { throwIfNoEntry: false });
      if (!st) {
        this.invalidate(id);
        return undefined;
      }
      if (st.ino === file.ino && st.size === file.size && st.mtimeMs === file.mtimeMs && st.ctimeMs === file.ctimeMs) {
        const pem = v === this.view ? this.table!.text(this.view) : (v as LocalEntry).pem;
        if (pem !== undefined) return { pem, tag: v.tag };
      }
    }
    return this.read(id, t, gen, dirMtime);
  }

  /** Whether `tok` is the tok last verified for `id` against `key` (the accepted key `get` answered). */
  tokVerified(id: string, key: AcceptedKey, tok: Uint8Array): boolean {
    if (key.tag === 0) return false;
    const own = this.local.get(id);
    if (own) return own.tag === key.tag && own.tok.length === tok.length && own.tok === Buffer.from(tok.buffer, tok.byteOffset, tok.length).toString("latin1");
    return this.table !== undefined && this.table.look(id, this.view) && this.view.tag === key.tag && this.table.tokIs(this.view, tok);
  }

  /** `tok` was verified for `id` against `key`: kept while the key's text is unchanged (one tok per minion). */
  tokVerifiedNow(id: string, key: AcceptedKey, tok: Uint8Array): void {
    if (key.tag === 0) return;
    const own = this.local.get(id);
    if (own) {
      if (own.tag === key.tag) own.tok = Buffer.from(tok.buffer, tok.byteOffset, tok.length).toString("latin1");
    } else this.table?.setTok(id, key.tag, tok);
  }

  /** Whether a copy (a table record or this thread's own) may answer at `t`. */
  private good(v: { readAt: number; gen: number; dirMtime: number }, t: number, gen: number | undefined, dirMtime: number | undefined): boolean {
    if (gen !== undefined) return v.gen === gen;
    const age = t - v.readAt;
    return age >= 0 && (dirMtime !== undefined ? v.dirMtime === dirMtime && age < this.trustMsMax : age < this.ttlMs);
  }

  private read(id: string, t: number, gen: number | undefined, dirMtime: number | undefined): AcceptedKey | undefined {
    let raw: string | undefined;
    let file: LocalEntry["file"];
    if (gen === undefined) {
      // the file's identity before its text: a change after the stat makes the next stat differ
      const st = statSync(this.store.file("accepted", id), { throwIfNoEntry: false });
      raw = st ? this.store.read("accepted", id) : undefined;
      if (st && st.isFile() && t - st.ctimeMs > racyMs && t - st.mtimeMs > racyMs) file = { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs };
    } else raw = this.store.read("accepted", id);
    // Only keys that exist are kept: a minion whose key was just (re)accepted by another thread
    // (the clear lane) must be recognised by its very next request, which real minions send at once.
    if (raw === undefined) {
      this.invalidate(id);
      return undefined;
    }
    const pem = cleanKey(raw);
    const rec: KeyRecord = { text: pem, readAt: t, gen: gen ?? NaN, dirMtime: dirMtime ?? NaN, file };
    const own = this.local.get(id);
    const shared = own ? 0 : (this.table?.put(id, rec) ?? 0);
    if (shared > 0) return { pem, tag: shared };
    if (shared < 0) return { pem, tag: 0 }; // another thread is writing its record now: this answer is not kept
    if (this.table && !own && !this.fullWarned && id.length <= keyIdBytesMax) {
      this.fullWarned = true;
      this.warn(`The accepted-key table is full (brine_key_table_minions): each request thread keeps its own copy of the accepted keys past it`);
    }
    const same = own !== undefined && own.pem === pem;
    const tag = same ? own.tag : (this.table?.newTag() ?? (this.localTags = (this.localTags % 0x7fff_ffff) + 1));
    const keep: LocalEntry = { pem, tag, readAt: t, gen: rec.gen, dirMtime: rec.dirMtime, file, tok: same ? own.tok : "" };
    this.local.delete(id);
    if (this.local.size >= this.entriesMax) this.local.delete(this.local.keys().next().value!);
    this.local.set(id, keep);
    return { pem, tag: keep.tag };
  }

  /** Every thread reads `id`'s key again before using it (this master wrote, moved or removed it); no id: every key. */
  invalidate(id?: string): void {
    if (id === undefined) {
      this.local.clear();
      this.table?.dropAll();
      return;
    }
    this.local.delete(id);
    this.table?.drop(id);
  }
}
