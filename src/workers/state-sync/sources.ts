/**
 * The disk and LMDB side of each state-sync channel (in the state-sync thread): scanning what this master holds
 * into a manifest, reading items for a peer, installing a peer's items and removing tombstoned ones. Decisions
 * (which paths are acceptable, what differs) are manifest.ts's; this file only does what they say, and refuses
 * what only the disk can show: a symlink or a non-directory on the way to an item.
 *
 * - Directory channels (`keys`, `denied_keys`: the minion key directories of `minionPkiDir`; `file_roots`,
 *   `pillar_roots`: the first root of each saltenv receives, every root is scanned, the first one wins a path
 *   clash, as Salt's collect_root_tree): the manifest is kept in LMDB (`<brine_lmdb_dir>/state-sync/`, one
 *   database a channel, keyed by item path (manifestKey), so in the manifest's order) with each file's (size, mtime, inode),
 *   so a rescan hashes only what changed, and removals become tombstones. Nothing of it is held in memory: a
 *   rescan walks the directories (one directory's names sorted at a time: in memory up to dirNamesInMemoryMax, a
 *   larger one through a scratch database that LMDB keeps in order) and the database side by side, pages
 *   and range summaries are read from the database as they are sent, a peer's page is diffed by point lookups.
 *   Symlinks and non-regular files are not carried (Salt's collector skips symlinks too). A path longer than an LMDB
 *   key can be (up to the 4,096 bytes checkItemPath allows) is kept under manifest.ts's manifestKey, its path in the
 *   stored value.
 * - Installs (dir-install.ts) go to a partial file `.brine-part-<hash>` beside the target, written in order, so an interrupted
 *   transfer resumes from its length; the whole file's sha256 is checked before the rename onto the target.
 * - Bank channels (`bank:jobs/loads` …) and the indexed key store: store-sources.ts.
 */
import { createHash } from "node:crypto";
import { closeSync, createReadStream, existsSync, lstatSync, mkdirSync, openSync, readFileSync, readSync, unlinkSync } from "node:fs";
import { access, constants, open, readFile, stat } from "node:fs/promises";
import path from "node:path";
import { cbor } from "../../shared/cbor.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { getLogger } from "../../shared/log.js";
import { minionPkiDir } from "../../shared/shared-fs.js";
import { KEY_DIRS, type KeyState } from "../../lib/pki/key-store.js";
import { ContentDigest, afterScan, itemBytesMax, byPath, checkItemPath, manifestKey, type Channel, type ManifestEntry } from "./manifest.js";

import type { Stretch } from "./range-tree.js";
import { pagePathCharsMax } from "./messages.js";
import { inDir, installByRanges, installWhole, partFileIn, partFileOf, sha256, sigOf, type FetchRange } from "./dir-install.js";

import { DirWalk, collisions, inKeyOrder, type Found } from "./dir-walk.js";
import { sameStored, scanWriteBatch, storedOf, toEntry, toStored, walkDb, type ManifestDb, type ScanWrite, type ScratchDb, type Stored } from "./manifest-store.js";

const log = getLogger("brine.cluster.state-sync");


export interface Source {
  readonly ch: Channel;
  /** refresh the manifest from the disk (directory channels); cheap when nothing changed */
  scan(): Promise<void>;
  /** a scan is cheap enough for every tick of the key channels' timer */
  readonly cheapScan?: boolean;
  entry(p: string): ManifestEntry | undefined;
  /** entries after `after` (else from `range.from`), before `range.to`, at most `n` (and up to pagePathCharsMax of paths: a directory channel), in the manifest's order */
  page(after: string | undefined, n: number, range?: { from?: string; to?: string }): Promise<{ entries: ManifestEntry[]; more: boolean }>;
  /** every entry (of the stretch `s`, else all) in the manifest's order, read as it goes (directory channels; banks have no summaries) */
  entries?(s?: Stretch): Iterable<ManifestEntry>;
  /** about how many entries the manifest holds (tombstones included) */
  count?(): number;
  /** bytes of item `p` at [off, off+len) (a peer's fetch); throws when `p` is not here or changed from `h` (none: a whole item, checked by the puller) */
  read(p: string, h: string | undefined, off: number, len: number): Promise<Uint8Array>;
  /** install `e` fetched by ranges (resuming a partial file); resolves to the bytes fetched */
  install(e: ManifestEntry, fetch: FetchRange, chunk: number, window: number): Promise<number>;
  /** install whole small items with their bytes in hand, recorded in one commit (directory channels: DirSource.installBatch) */
  installBatch?(items: readonly ManifestEntry[], data: readonly Uint8Array[], placed?: (i: number) => void): (Error | "later" | undefined)[];
  /** remove the item `e` tombstones, then record the tombstone */
  remove(e: ManifestEntry): Promise<void>;
  /** record a tombstone (or the stamp of identical content) without touching the item */
  adopt(e: ManifestEntry): void;
  /** a digest of the live content (paths and hashes, no stamps): equal digests, nothing to fetch */
  digest(): string;
  /** the thread stops: no manifest write from now on (a scan or an install fails at its next write); resolves once no scan runs */
  stop(): Promise<void>;
}

/** What a write after stop() throws. */
export class SourceStopped extends Error {
  constructor(ch: Channel) {
    super(`state-sync ${ch}: the state-sync thread is stopping`);
  }
}

/** Files up to this size are hashed from one read, bytes; larger ones streamed (memory stays flat). */
const hashReadWholeMax = 1024 * 1024;

/**
 * Items up to this size are hashed, served and installed with synchronous calls, bytes, and so is every lstat and
 * directory step: in this thread, which does nothing else meanwhile, a libuv pool round trip (two thread switches,
 * a wait for a free pool thread on a loaded host) cost far more than the call, and an install took eight of them
 * (a 100k-key pull: about a million). Larger items keep the asynchronous calls and their window of ranges.
 */
export const syncItemBytesMax = 64 * 1024;

export async function sha256File(file: string, size = Infinity): Promise<string> {
  if (size <= syncItemBytesMax) return sha256(readFileSync(file));
  if (size <= hashReadWholeMax) return createHash("sha256").update(await readFile(file)).digest("hex");
  const h = createHash("sha256");
  for await (const c of createReadStream(file)) h.update(c as Buffer);
  return h.digest("hex");
}

/** Whether `dir` is a directory this process can list (a root that is not is kept as it was, not emptied). */
async function readableDir(dir: string): Promise<boolean> {
  try {
    if (!(await stat(dir)).isDirectory()) return false;
    await access(dir, constants.R_OK | constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** One lstat-checked directory step: refuses a symlink or a non-directory; creates it when `create`. */
function checkDir(dir: string, create: boolean, again = true): void {
  try {
    const st = lstatSync(dir);
    if (st.isSymbolicLink()) throw new Error(`${dir} is a symlink (refused: it could lead out of the root)`);
    if (!st.isDirectory()) throw new Error(`${dir} is not a directory`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT" || !create) throw e;
    try {
      mkdirSync(dir, { mode: 0o755 });
    } catch (m) {
      // made meanwhile (another process): check what is there now
      if ((m as NodeJS.ErrnoException).code !== "EEXIST" || !again) throw m;
      checkDir(dir, false, false);
    }
  }
}


/**
 * A directory channel. `layout` maps an item path's segments to the directory it lives in here (the receiving
 * root) and lists the roots to scan: `[prefix, dir]` pairs, the prefix being the item path of the directory.
 * Nothing of the manifest is held in memory: it is in `db`, and a scan walks the directories and the database
 * side by side in the manifest's order (one directory's names sorted at a time, a large one through the scratch database).
 */
export class DirSource implements Source {
  /** bumped by every write, so the digest is computed once per change */
  private generation = 0;
  private digestOf: { generation: number; digest: string } | undefined;
  private scanning: Promise<void> | undefined;
  /** a scan costs next to nothing when nothing changed (the engine's timer may scan every tick) */
  readonly cheapScan: boolean = false;

  constructor(
    readonly ch: Channel,
    private readonly roots: () => { prefix: string; dir: string; depth: number }[],
    /** the receiving directory for an item path's first segments, and the rest below it */
    private readonly target: (parts: string[]) => { root: string; rest: string[] } | { error: string },
    protected readonly db: ManifestDb,
    /** where an earlier version kept this channel's manifest (a CBOR file): imported once, then removed */
    legacyFile: string,
    protected readonly now: () => number = Date.now,
    /** where a directory of more than dirNamesInMemoryMax names is sorted (none: in memory, whatever its size) */
    scratch?: ScratchDb,
  ) {
    this.walker = new DirWalk(ch, scratch, () => this.writable(), () => this.stopped);
    this.importLegacy(legacyFile);
    if (scratch) this.walker.clearScratch(`${ch}/`, `${ch}0`); // left by a scan a crash cut short
  }

  /** the scan's walk of the roots (dir-walk.ts) */
  private readonly walker: DirWalk;

  private importLegacy(file: string): void {
    if (!existsSync(file)) return;
    try {
      const rows = cbor.decode(readFileSync(file)) as { e: ManifestEntry; sig?: string }[];
      let n = 0;
      this.db.transactionSync(() => {
        for (const k of rows) {
          if (typeof k?.e?.p !== "string" || this.db.get(manifestKey(k.e.p)) !== undefined) continue;
          this.db.putSync(manifestKey(k.e.p), toStored(k.e, k.sig));
          n++;
        }
      });
      log.info(`state-sync ${this.ch}: imported ${n} item(s) of the manifest an earlier version kept in ${file}`);
    } catch (e) {
      log.warning(`state-sync ${this.ch}: the saved manifest ${file} could not be read (${(e as Error).message}); rescanning from nothing`);
    }
    try {
      unlinkSync(file);
    } catch {
      // left: imported again (nothing new) next start
    }
  }

  protected wrote(): void {
    this.generation++;
  }

  scan(): Promise<void> {
    if (this.stopped) return Promise.reject(new SourceStopped(this.ch));
    // one scan at a time; a caller during a scan gets the next one, which starts when it ends (the running one may
    // have listed its directories before the caller's change: a pull of a key just deleted would not see it),
    // shared by every caller meanwhile
    if (!this.scanning) {
      this.scanning = this.doScan().finally(() => (this.scanning = undefined));
      return this.scanning;
    }
    this.nextScan ??= this.scanning.then(
      () => this.startNext(),
      () => this.startNext(),
    );
    return this.nextScan;
  }

  /** the scan callers during a running scan wait for */
  private nextScan: Promise<void> | undefined;

  private startNext(): Promise<void> {
    this.nextScan = undefined;
    return this.scan();
  }

  /** set by stop(): every manifest write throws SourceStopped */
  private stopped = false;

  async stop(): Promise<void> {
    this.stopped = true;
    await this.scanning?.catch(() => undefined);
  }

  /** Throws once the thread stops: a manifest write never starts after stop() (the manifests close next). */
  protected writable(): void {
    if (this.stopped) throw new SourceStopped(this.ch);
  }

  /** roots found unreadable by the last scans (logged once until they are back) */
  private readonly missing = new Set<string>();

  protected async doScan(): Promise<void> {
    // the roots grouped by item prefix, in the manifest's order (a prefix's items all start with `<prefix>/`)
    const groups = new Map<string, { dir: string; depth: number }[]>();
    for (const r of this.roots()) groups.set(r.prefix, [...(groups.get(r.prefix) ?? []), r]);
    const prefixes = [...groups.keys()].sort((a, b) => byPath(`${a}/`, `${b}/`));
    // a prefix with a root that cannot be read keeps its items as they were
    const keep = new Set<string>();
    for (const [prefix, rs] of groups) {
      for (const r of rs) {
        if (await readableDir(r.dir)) {
          this.missing.delete(r.dir);
          continue;
        }
        keep.add(prefix);
        if (!this.missing.has(r.dir) && !walkDb(this.db, { start: `${prefix}/`, end: `${prefix}0` }).next().done) log.warning(`state-sync ${this.ch}: ${r.dir} cannot be read; its items are kept as they were, not taken as removed`);
        this.missing.add(r.dir);
      }
    }
    const walk = inKeyOrder(this.ch, (async function* (self: DirSource) {
      for (const prefix of prefixes) yield* self.walker.mergeRoots(groups.get(prefix)!.map((r) => self.walker.walk(r.dir, prefix, r.depth)));
    })(this));
    const kept = walkDb(this.db);
    const ops: ScanWrite[] = [];
    const flush = () => this.apply(ops);
    const now = this.now();
    let w = await walk.next();
    let k = kept.next();
    while (!w.done || !k.done) {
      this.writable(); // a stopping thread ends a rescan here, not only at its next write (a rescan of unchanged keys writes nothing)
      const c = w.done ? 1 : k.done ? -1 : byPath(w.value.key, k.value[0]);
      if (c > 0) {
        // kept here, not found by the walk
        const [key, v] = k.value as [string, Stored];
        const p = v.p ?? key;
        // the walk listed its directory before this item arrived (an install from a peer while the scan ran, or a
        // file written since): it is not gone, and a tombstone stamped now would beat the peer's item everywhere
        if (!v.d && this.servedNow(p)) {
          k = kept.next();
          continue;
        }
        const next = afterScan(toEntry(p, v), undefined, now, keep.has(p.slice(0, p.indexOf("/"))));
        if (!next) ops.push({ p, was: v, next: undefined });
        else if (next.t !== v.t || next.d !== v.d) ops.push({ p, was: v, next: toStored(next) });
        k = kept.next();
      } else {
        const f = w.value as Found & { key: string };
        const v = c === 0 ? (k.value as [string, Stored])[1] : undefined;
        if (v?.p !== undefined && v.p !== f.p) {
          // another long path holds this key (a 128-bit collision of their hashes): the one kept first stays
          collisions.line(`state-sync ${this.ch}: ${f.full} is not carried: its manifest key is held by ${v.p}`);
          w = await walk.next();
          continue;
        }
        const sig = sigOf(f.st);
        if (!v || v.d || v.g !== sig) {
          try {
            const e = { p: f.p, s: f.st.size, h: await sha256File(f.full, f.st.size), m: f.st.mode & 0o777, t: Math.max(Math.floor(f.st.mtimeMs), Math.floor(f.st.ctimeMs)) };
            ops.push({ p: f.p, was: v, next: toStored(e, sig) });
          } catch {
            // gone meanwhile: the next scan sees it
          }
        }
        w = await walk.next();
        if (c === 0) k = kept.next();
      }
      if (ops.length >= scanWriteBatch) flush();
    }
    flush();
  }

  /** A scan's writes in one transaction (then `ops` is emptied); an item changed since the scan read it is left alone. */
  protected apply(ops: ScanWrite[]): void {
    if (!ops.length) return;
    this.writable();
    this.db.transactionSync(() => {
      for (const o of ops) {
        // changed meanwhile (an install from a peer): that write stands, the next scan looks again
        const key = manifestKey(o.p);
        if (!sameStored(this.db.get(key), o.was)) continue;
        if (o.next) this.db.putSync(key, o.next);
        else this.db.removeSync(key);
      }
    });
    ops.length = 0;
    this.wrote();
  }

  entry(p: string): ManifestEntry | undefined {
    const v = storedOf(this.db, p);
    return v && toEntry(p, v);
  }

  async page(after: string | undefined, n: number, range: { from?: string; to?: string } = {}): Promise<{ entries: ManifestEntry[]; more: boolean }> {
    const entries: ManifestEntry[] = [];
    let chars = 0;
    for (const [p, v] of walkDb(this.db, { ...(after !== undefined ? { after: manifestKey(after) } : range.from !== undefined ? { start: manifestKey(range.from) } : {}), ...(range.to !== undefined ? { end: manifestKey(range.to) } : {}) })) {
      if (entries.length === n || chars >= pagePathCharsMax) return { entries, more: true };
      const e = toEntry(p, v);
      entries.push(e);
      chars += e.p.length; // the path's, not its key's (a long path is keyed by a prefix and a hash: manifestKey)
    }
    return { entries, more: false };
  }

  *entries(s: Stretch = {}): Generator<ManifestEntry> {
    for (const [p, v] of walkDb(this.db, { ...(s.from !== undefined ? { start: manifestKey(s.from) } : {}), ...(s.to !== undefined ? { end: manifestKey(s.to) } : {}) })) yield toEntry(p, v);
  }

  count(): number {
    return (this.db.getStats() as { entryCount: number }).entryCount;
  }

  /** Where item `p` lives here, each directory on the way lstat-checked (created when `create`). */
  private locate(p: string, create: boolean): string {
    const at = this.locateIn(p, create);
    return inDir(at.dir, at.name);
  }

  /**
   * locate() as its directory and file name. `checked`: directories already lstat-checked by this synchronous run of
   * installs (one fetched batch, installBatch): not checked again (a batch's items share their directories; nothing
   * of this thread runs between its items).
   */
  private locateIn(p: string, create: boolean, checked?: Set<string>): { dir: string; name: string } {
    const c = checkItemPath(this.ch, p);
    if ("error" in c) throw new Error(`refused path ${JSON.stringify(p)}: ${c.error}`);
    const t = this.target(c.parts);
    if ("error" in t) throw new Error(t.error);
    if (create && !this.made.has(t.root)) {
      mkdirSync(t.root, { recursive: true, mode: 0o755 });
      this.made.add(t.root);
    }
    // the segments are checked (no separator, `.` or `..`): joined as they are; the root once normalised
    let dir = path.normalize(t.root);
    if (!checked?.has(dir)) {
      checkDir(dir, false);
      checked?.add(dir);
    }
    for (let i = 0; i < t.rest.length - 1; i++) {
      dir = inDir(dir, t.rest[i]!);
      if (checked?.has(dir)) continue;
      checkDir(dir, create);
      checked?.add(dir);
    }
    return { dir, name: t.rest[t.rest.length - 1]! };
  }

  /** receiving roots this source has made sure exist */
  private readonly made = new Set<string>();

  async read(p: string, h: string | undefined, off: number, len: number): Promise<Uint8Array> {
    const k = this.entry(p);
    if (!k || k.d) throw new Error(`${p} is not here`);
    if (h !== undefined && k.h !== h) throw new Error(`${p} changed here since that manifest`);
    const file = this.locateServed(p);
    const want = Math.max(0, Math.min(len, k.s - off));
    if (want <= syncItemBytesMax) {
      const fd = openSync(file, "r");
      try {
        // from node's shared pool below 4 KiB (not an ArrayBuffer, and its native block, per item served); only the bytes read are returned
        const buf = Buffer.allocUnsafe(want);
        return buf.subarray(0, readSync(fd, buf, 0, want, off));
      } finally {
        closeSync(fd);
      }
    }
    const fh = await open(file, "r");
    try {
      const buf = Buffer.alloc(Math.max(0, Math.min(len, k.s - off)));
      const { bytesRead } = await fh.read(buf, 0, buf.length, off);
      return buf.subarray(0, bytesRead);
    } finally {
      await fh.close();
    }
  }

  /** Whether a file the walk would carry serves item `p` now (a regular file within the size bound, not through a symlink). */
  private servedNow(p: string): boolean {
    try {
      return lstatSync(this.locateServed(p)).size <= itemBytesMax;
    } catch {
      return false;
    }
  }

  /** The file serving item `p` (any scanned root, the first that has it; never through a symlink). */
  private locateServed(p: string): string {
    for (const r of this.roots()) {
      if (!p.startsWith(`${r.prefix}/`)) continue;
      const rest = p.slice(r.prefix.length + 1).split("/");
      let dir = r.dir;
      let ok = true;
      for (const seg of rest.slice(0, -1)) {
        dir = inDir(dir, seg);
        try {
          const st = lstatSync(dir);
          if (!st.isDirectory()) ok = false;
        } catch {
          ok = false;
        }
        if (!ok) break;
      }
      if (!ok) continue;
      const file = inDir(dir, rest[rest.length - 1]!);
      try {
        if (lstatSync(file).isFile()) return file;
      } catch {
        // not in this root
      }
    }
    throw new Error(`${p} is not here`);
  }

  /** installs in progress, by item path: two pulls (from two peers) of one item never write the same partial file */
  private readonly installing = new Map<string, Promise<number>>();

  async install(e: ManifestEntry, fetch: FetchRange, chunk: number, window: number): Promise<number> {
    for (let running = this.installing.get(e.p); running; running = this.installing.get(e.p)) {
      await running.catch(() => undefined);
      const now = this.entry(e.p);
      if (now && !now.d && now.h === e.h && now.m === e.m) return 0; // the other pull installed it
    }
    const run = this.installFile(e, fetch, chunk, window);
    this.installing.set(e.p, run);
    try {
      return await run;
    } finally {
      this.installing.delete(e.p);
    }
  }

  private async installFile(e: ManifestEntry, fetch: FetchRange, chunk: number, window: number): Promise<number> {
    if (e.s <= syncItemBytesMax && e.s <= chunk) {
      const data = e.s === 0 ? new Uint8Array(0) : await fetch(0, e.s);
      this.put(e.p, this.placeWhole(e, data));
      return data.byteLength;
    }
    const file = this.locate(e.p, true);
    const r = await installByRanges(this.ch, e, fetch, chunk, window, file, partFileOf(file, e.h));
    this.put(e.p, { s: e.s, h: e.h, m: e.m, t: e.t, g: r.sig });
    return r.fetched;
  }

  /**
   * Item `e`, whole in `data`, put in its place with synchronous calls (a partial file, checked, renamed); what the
   * manifest is to record for it. `checked`: as locateIn's.
   */
  protected placeWhole(e: ManifestEntry, data: Uint8Array, checked?: Set<string>): Stored {
    const { dir, name } = this.locateIn(e.p, true, checked);
    return { s: e.s, h: e.h, m: e.m, t: e.t, g: installWhole(this.ch, e, data, inDir(dir, name), partFileIn(dir, name, e.h)) };
  }

  /**
   * Whole small items with their bytes in hand (one fetched batch), each put in its place with synchronous calls
   * (placeWhole: a partial file, checked, renamed), then all recorded in the manifest in one transaction after the
   * last rename (one LMDB commit a batch, not one an item). A thread that dies between the renames and the commit
   * leaves files the manifest does not list yet: the next scan (every pull starts with one) finds them, and an item
   * found with the peer's bytes is not fetched again. `placed(i)` after each item is in place. Per item: undefined
   * (installed and recorded), "later" (another pull is installing it, or it is too large for synchronous calls: the
   * caller installs it alone, install()) or why it was not installed.
   */
  installBatch(items: readonly ManifestEntry[], data: readonly Uint8Array[], placed?: (i: number) => void): (Error | "later" | undefined)[] {
    this.writable();
    const out: (Error | "later" | undefined)[] = new Array(items.length);
    const rows: Stored[] = new Array(items.length);
    const checked = new Set<string>();
    for (let i = 0; i < items.length; i++) {
      const e = items[i]!;
      if (e.s > syncItemBytesMax || this.installing.has(e.p)) {
        out[i] = "later";
        continue;
      }
      try {
        rows[i] = this.placeWhole(e, data[i]!, checked);
        placed?.(i);
      } catch (err) {
        out[i] = err as Error;
      }
    }
    this.writable();
    this.db.transactionSync(() => {
      for (let i = 0; i < items.length; i++) {
        if (rows[i] === undefined) continue;
        const why = this.putRow(items[i]!.p, rows[i]!);
        if (why) out[i] = new Error(why);
      }
    });
    this.wrote();
    return out;
  }

  async remove(e: ManifestEntry): Promise<void> {
    const file = this.locate(e.p, false);
    try {
      const st = lstatSync(file);
      if (st.isDirectory()) throw new Error("a directory, not removed");
      unlinkSync(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    this.adopt(e);
  }

  adopt(e: ManifestEntry): void {
    if (e.d) this.put(e.p, toStored(e));
    else {
      const v = storedOf(this.db, e.p);
      if (v && !v.d && v.g !== undefined) this.put(e.p, { ...v, t: e.t });
    }
  }

  protected put(p: string, v: Stored): void {
    this.writable();
    const why = this.putRow(p, v);
    if (why) throw new Error(why);
    this.wrote();
  }

  /** Records `v` for item `p` (in a transaction or alone); why not, when another long path holds its key. */
  private putRow(p: string, v: Stored): string | undefined {
    const key = manifestKey(p);
    if (key !== p) {
      const held = this.db.get(key);
      // a 128-bit collision of two long paths' hashes: the one kept first stays
      if (held?.p !== undefined && held.p !== p) return `its manifest key is held by ${held.p} (not recorded)`;
      v = { ...v, p };
    }
    this.db.putSync(key, v);
    return undefined;
  }

  digest(): string {
    if (this.digestOf?.generation !== this.generation) {
      const d = new ContentDigest();
      for (const e of this.entries()) d.add(e);
      this.digestOf = { generation: this.generation, digest: d.hex() };
    }
    return this.digestOf.digest;
  }
}

/** The roots to scan and the receiving directory of each directory channel, from the config. */
export function dirLayout(cfg: MasterConfig, ch: Channel): { roots: () => { prefix: string; dir: string; depth: number }[]; target: (parts: string[]) => { root: string; rest: string[] } | { error: string } } {
  if (ch === "keys" || ch === "denied_keys") {
    const pki = minionPkiDir(cfg);
    const states = ch === "keys" ? ["accepted", "pending", "rejected"] : ["denied"];
    return {
      roots: () => states.map((s) => ({ prefix: s, dir: path.join(pki, KEY_DIRS[s as KeyState]), depth: 1 })),
      target: (parts) => ({ root: path.join(pki, KEY_DIRS[parts[0] as KeyState]), rest: parts.slice(1) }),
    };
  }
  const map = () => ((ch === "file_roots" ? cfg.file_roots : cfg.pillar_roots) ?? {}) as Record<string, unknown>;
  const dirsOf = (env: string): string[] => {
    const v = map()[env];
    return Array.isArray(v) ? v.filter((d): d is string => typeof d === "string" && d !== "") : [];
  };
  return {
    roots: () => Object.keys(map()).flatMap((env) => dirsOf(env).map((dir) => ({ prefix: env, dir, depth: 0 }))),
    target: (parts) => {
      const dirs = dirsOf(parts[0]!);
      if (dirs.length === 0) return { error: `saltenv '${parts[0]}' has no ${ch} on this master` };
      return { root: dirs[0]!, rest: parts.slice(1) };
    },
  };
}
