/**
 * The disk and LMDB side of each state-sync channel (in the state-sync thread): scanning what this master holds
 * into a manifest, reading items for a peer, installing a peer's items and removing tombstoned ones. Decisions
 * (which paths are acceptable, what differs) are manifest.ts's; this file only does what they say, and refuses
 * what only the disk can show: a symlink or a non-directory on the way to an item.
 *
 * - Directory channels (`keys`, `denied_keys`: the minion key directories of `minionPkiDir`; `file_roots`,
 *   `pillar_roots`: the first root of each saltenv receives, every root is scanned, the first one wins a path
 *   clash, as Salt's collect_root_tree): the manifest is kept in `cachedir/brine-state-sync/<node id>/` with each
 *   file's (size, mtime, inode), so a rescan hashes only what changed, and removals become tombstones.
 *   Symlinks and non-regular files are not carried (Salt's collector skips symlinks too).
 * - Installs go to a partial file `.brine-part-<hash>` beside the target, written in order, so an interrupted
 *   transfer resumes from its length; the whole file's sha256 is checked before the rename onto the target.
 * - Bank channels (`bank:jobs/loads` …): the job cache's LMDB databases, paged straight from LMDB (nothing kept
 *   in memory); an item is a key, its content the value in the one CBOR codec.
 */
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { chmod, lstat, mkdir, open, readFile, readdir, rename, stat, unlink } from "node:fs/promises";
import path from "node:path";
import type { Database } from "lmdb";
import { cbor } from "../../shared/cbor.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { getLogger } from "../../shared/log.js";
import { minionPkiDir } from "../../shared/shared-fs.js";
import type { Store } from "../../lib/store/lmdb-env.js";
import { isRsaPublicKeyPem } from "../../lib/pki/key-actions.js";
import { KEY_DIRS, type KeyState, type KeyStore } from "../../lib/pki/key-store.js";
import { itemBytesMax, PART_PREFIX, SKIPPED_DIRS, byPath, checkItemPath, chunkRanges, mergeScan, page as pageOf, tombstone, type Channel, type ManifestEntry } from "./manifest.js";

const log = getLogger("brine.cluster.state-sync");

/** A key file larger than this is not a key, bytes. */
const keyBytesMax = 64 * 1024;

export type FetchRange = (off: number, len: number) => Promise<Uint8Array>;

export interface Source {
  readonly ch: Channel;
  /** refresh the manifest from the disk (directory channels); cheap when nothing changed */
  scan(): Promise<void>;
  /** a scan is cheap enough for every tick of the key channels' timer */
  readonly cheapScan?: boolean;
  entry(p: string): ManifestEntry | undefined;
  /** entries after `after`, at most `n`, in this source's own order */
  page(after: string | undefined, n: number): Promise<{ entries: ManifestEntry[]; more: boolean }>;
  /** bytes of item `p` at [off, off+len) (a peer's fetch); throws when `p` is not here or changed from `h` (none: a whole item, checked by the puller) */
  read(p: string, h: string | undefined, off: number, len: number): Promise<Uint8Array>;
  /** install `e` fetched by ranges (resuming a partial file); resolves to the bytes fetched */
  install(e: ManifestEntry, fetch: FetchRange, chunk: number, window: number): Promise<number>;
  /** remove the item `e` tombstones, then record the tombstone */
  remove(e: ManifestEntry): Promise<void>;
  /** record a tombstone (or the stamp of identical content) without touching the item */
  adopt(e: ManifestEntry): void;
  /** persist the manifest if it changed */
  save(): void;
  /** a digest of the live content (paths and hashes, no stamps): equal digests, nothing to fetch */
  digest(): string;
}

interface Kept {
  e: ManifestEntry;
  /** size:mtimeMs:ino of the local file when `e` was taken (absent for tombstones) */
  sig?: string;
}

function sigOf(st: { size: number; mtimeMs: number; ino: number }): string {
  return `${st.size}:${st.mtimeMs}:${st.ino}`;
}

/** Files up to this size are hashed from one read, bytes; larger ones streamed (memory stays flat). */
const hashReadWholeMax = 1024 * 1024;

export async function sha256File(file: string, size = Infinity): Promise<string> {
  if (size <= hashReadWholeMax) return createHash("sha256").update(await readFile(file)).digest("hex");
  const h = createHash("sha256");
  for await (const c of createReadStream(file)) h.update(c as Buffer);
  return h.digest("hex");
}

function sha256(b: Uint8Array): string {
  return createHash("sha256").update(b).digest("hex");
}

/** One lstat-checked directory step: refuses a symlink or a non-directory; creates it when `create`. */
async function checkDir(dir: string, create: boolean, again = true): Promise<void> {
  try {
    const st = await lstat(dir);
    if (st.isSymbolicLink()) throw new Error(`${dir} is a symlink (refused: it could lead out of the root)`);
    if (!st.isDirectory()) throw new Error(`${dir} is not a directory`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ENOENT" || !create) throw e;
    try {
      await mkdir(dir, { mode: 0o755 });
    } catch (m) {
      // made meanwhile (another install into the same new directory): check what is there now
      if ((m as NodeJS.ErrnoException).code !== "EEXIST" || !again) throw m;
      await checkDir(dir, false, false);
    }
  }
}

/**
 * A directory channel. `layout` maps an item path's segments to the directory it lives in here (the receiving
 * root) and lists the roots to scan: `[prefix, dir]` pairs, the prefix being the item path of the directory.
 */
export class DirSource implements Source {
  protected kept = new Map<string, Kept>();
  private sorted: string[] | undefined;
  private dirty = false;
  private scanning: Promise<void> | undefined;
  /** a scan costs next to nothing when nothing changed (the engine's timer may scan every tick) */
  readonly cheapScan: boolean = false;
  private readonly file: string;

  constructor(
    readonly ch: Channel,
    private readonly roots: () => { prefix: string; dir: string; depth: number }[],
    /** the receiving directory for an item path's first segments, and the rest below it */
    private readonly target: (parts: string[]) => { root: string; rest: string[] } | { error: string },
    stateDir: string,
    protected readonly now: () => number = Date.now,
  ) {
    this.file = path.join(stateDir, `manifest-${ch}.cbor`);
    try {
      if (existsSync(this.file)) {
        const rows = cbor.decode(readFileSync(this.file)) as Kept[];
        for (const k of rows) this.kept.set(k.e.p, k);
      }
    } catch (e) {
      log.warning(`state-sync ${ch}: the saved manifest ${this.file} could not be read (${(e as Error).message}); rescanning from nothing`);
    }
  }

  scan(): Promise<void> {
    // one scan at a time; a caller during a scan waits for it
    this.scanning ??= this.doScan().finally(() => (this.scanning = undefined));
    return this.scanning;
  }

  protected async doScan(): Promise<void> {
    const found = new Map<string, ManifestEntry>();
    const sigs = new Map<string, string>();
    for (const r of this.roots()) {
      if (await this.walk(r.dir, r.prefix, r.depth, found, sigs)) {
        this.missing.delete(r.dir);
        continue;
      }
      // an unreadable or vanished root (unmounted, wiped) is not "every item deleted": its items stay as they were
      let kept = 0;
      for (const [p, k] of this.kept) {
        if (k.e.d || found.has(p) || !p.startsWith(`${r.prefix}/`)) continue;
        found.set(p, k.e);
        if (k.sig !== undefined) sigs.set(p, k.sig);
        kept++;
      }
      if (kept > 0 && !this.missing.has(r.dir)) log.warning(`state-sync ${this.ch}: ${r.dir} cannot be read; its ${kept} item(s) are kept as they were, not taken as removed`);
      if (kept > 0) this.missing.add(r.dir);
    }
    this.mergeFound(found, sigs);
  }

  /** receiving roots this source has made sure exist */
  private readonly made = new Set<string>();
  /** roots found unreadable by the last scans (logged once until they are back) */
  private readonly missing = new Set<string>();

  /** A scan's live entries (and their local signatures) into the manifest: vanished items become tombstones. */
  protected mergeFound(found: Map<string, ManifestEntry>, sigs: Map<string, string>): void {
    const prev = new Map<string, ManifestEntry>([...this.kept].map(([p, k]) => [p, k.e]));
    const merged = mergeScan(prev, found, this.now());
    let changed = merged.size !== this.kept.size;
    const next = new Map<string, Kept>();
    for (const [p, e] of merged) {
      const old = this.kept.get(p);
      const sig = sigs.get(p);
      if (!old || old.e !== e || old.sig !== sig) changed = true;
      next.set(p, sig === undefined ? { e } : { e, sig });
    }
    this.kept = next;
    if (changed) {
      this.sorted = undefined;
      this.dirty = true;
      this.save();
    }
  }

  /** Walks `dir` (item prefix `prefix`); `depth` > 0 limits how deep (keys: 1, the files of one directory). */
  private async walk(dir: string, prefix: string, depth: number, found: Map<string, ManifestEntry>, sigs: Map<string, string>): Promise<boolean> {
    let names: string[];
    try {
      names = await readdir(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") log.warning(`state-sync ${this.ch}: cannot read ${dir}: ${(e as Error).message}`);
      return false;
    }
    names.sort(byPath);
    for (const name of names) {
      if (name.startsWith(PART_PREFIX)) continue;
      const p = `${prefix}/${name}`;
      const full = path.join(dir, name);
      let st;
      try {
        st = await lstat(full);
      } catch {
        continue; // gone meanwhile
      }
      if (st.isDirectory()) {
        if (depth !== 1 && !SKIPPED_DIRS.has(name)) await this.walk(full, p, depth > 1 ? depth - 1 : 0, found, sigs);
        continue;
      }
      if (!st.isFile() || found.has(p)) continue; // symlinks and devices are not carried; the first root wins
      if ("error" in checkItemPath(this.ch, p)) continue; // a name a peer would refuse (a hidden key file …)
      if (st.size > itemBytesMax) {
        log.warning(`state-sync ${this.ch}: ${full} is larger than ${itemBytesMax} bytes; not carried`);
        continue;
      }
      const sig = sigOf(st);
      const old = this.kept.get(p);
      if (old && !old.e.d && old.sig === sig) {
        found.set(p, old.e);
      } else {
        try {
          found.set(p, { p, s: st.size, h: await sha256File(full, st.size), m: st.mode & 0o777, t: Math.max(Math.floor(st.mtimeMs), Math.floor(st.ctimeMs)) });
        } catch {
          continue;
        }
      }
      sigs.set(p, sig);
    }
    return true;
  }

  entry(p: string): ManifestEntry | undefined {
    return this.kept.get(p)?.e;
  }

  private paths(): string[] {
    this.sorted ??= [...this.kept.keys()].sort(byPath);
    return this.sorted;
  }

  async page(after: string | undefined, n: number): Promise<{ entries: ManifestEntry[]; more: boolean }> {
    const r = pageOf(this.paths(), after, n);
    return { entries: r.paths.map((p) => this.kept.get(p)!.e), more: r.more };
  }

  /** Where item `p` lives here, each directory on the way lstat-checked (created when `create`). */
  private async locate(p: string, create: boolean): Promise<string> {
    const c = checkItemPath(this.ch, p);
    if ("error" in c) throw new Error(`refused path ${JSON.stringify(p)}: ${c.error}`);
    const t = this.target(c.parts);
    if ("error" in t) throw new Error(t.error);
    if (create && !this.made.has(t.root)) {
      await mkdir(t.root, { recursive: true, mode: 0o755 });
      this.made.add(t.root);
    }
    await checkDir(t.root, false);
    let dir = t.root;
    for (const seg of t.rest.slice(0, -1)) {
      dir = path.join(dir, seg);
      await checkDir(dir, create);
    }
    return path.join(dir, t.rest[t.rest.length - 1]!);
  }

  async read(p: string, h: string | undefined, off: number, len: number): Promise<Uint8Array> {
    const k = this.kept.get(p);
    if (!k || k.e.d) throw new Error(`${p} is not here`);
    if (h !== undefined && k.e.h !== h) throw new Error(`${p} changed here since that manifest`);
    const file = await this.locateServed(p);
    const fh = await open(file, "r");
    try {
      const buf = Buffer.alloc(Math.max(0, Math.min(len, k.e.s - off)));
      const { bytesRead } = await fh.read(buf, 0, buf.length, off);
      return buf.subarray(0, bytesRead);
    } finally {
      await fh.close();
    }
  }

  /** The file serving item `p` (any scanned root, the first that has it; never through a symlink). */
  private async locateServed(p: string): Promise<string> {
    for (const r of this.roots()) {
      if (!p.startsWith(`${r.prefix}/`)) continue;
      const rest = p.slice(r.prefix.length + 1).split("/");
      let dir = r.dir;
      let ok = true;
      for (const seg of rest.slice(0, -1)) {
        dir = path.join(dir, seg);
        try {
          const st = await lstat(dir);
          if (!st.isDirectory()) ok = false;
        } catch {
          ok = false;
        }
        if (!ok) break;
      }
      if (!ok) continue;
      const file = path.join(dir, rest[rest.length - 1]!);
      try {
        if ((await lstat(file)).isFile()) return file;
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
      const now = this.kept.get(e.p)?.e;
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
    const file = await this.locate(e.p, true);
    // named by the target and the content: items with the same bytes in one directory get partial files of their own
    const part = path.join(path.dirname(file), `${PART_PREFIX}${createHash("sha256").update(`${path.basename(file)}\0${e.h}`).digest("hex").slice(0, 32)}`);
    const hash = createHash("sha256");
    let from = 0;
    try {
      const st = await lstat(part);
      if (st.isFile() && st.size <= e.s) {
        from = st.size;
        for await (const c of createReadStream(part)) hash.update(c as Buffer);
        if (from > 0) log.info(`state-sync ${this.ch}: resuming ${e.p} at byte ${from} of ${e.s}`);
      } else await unlink(part);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    const fh = await open(part, from > 0 ? "a" : "w", 0o600);
    let fetched = 0;
    try {
      // up to `window` ranges in flight, written in order: the partial file is always a prefix
      const ranges = chunkRanges(e.s, chunk, from);
      const inFlight: Promise<Uint8Array>[] = [];
      let next = 0;
      const fill = () => {
        while (inFlight.length < window && next < ranges.length) {
          const r = ranges[next++]!;
          const pr = fetch(r.off, r.len);
          pr.catch(() => undefined); // awaited in order below
          inFlight.push(pr);
        }
      };
      fill();
      while (inFlight.length) {
        const data = await inFlight.shift()!;
        await fh.write(data);
        hash.update(data);
        fetched += data.byteLength;
        fill();
      }
    } finally {
      await fh.close();
    }
    const got = hash.digest("hex");
    if (got !== e.h) {
      await unlink(part).catch(() => undefined);
      throw new Error(`sha256 ${got} does not match the manifest's ${e.h} (not installed)`);
    }
    if (this.ch === "keys" || this.ch === "denied_keys") {
      if (e.s > keyBytesMax || !isRsaPublicKeyPem(readFileSync(part, "utf8"))) {
        await unlink(part).catch(() => undefined);
        throw new Error(`not an RSA public key (not installed)`);
      }
    }
    await chmod(part, e.m & 0o777);
    try {
      await rename(part, file); // onto a directory: EISDIR, nothing replaced
    } catch (err) {
      await unlink(part).catch(() => undefined);
      throw (err as NodeJS.ErrnoException).code === "EISDIR" ? new Error("a directory is in the way") : err;
    }
    const st = await stat(file);
    this.kept.set(e.p, { e: { p: e.p, s: e.s, h: e.h, m: e.m, t: e.t }, sig: sigOf(st) });
    this.touched();
    return fetched;
  }

  async remove(e: ManifestEntry): Promise<void> {
    const file = await this.locate(e.p, false);
    try {
      const st = await lstat(file);
      if (st.isDirectory()) throw new Error("a directory, not removed");
      await unlink(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
    }
    this.adopt(e);
  }

  adopt(e: ManifestEntry): void {
    const k = this.kept.get(e.p);
    if (e.d) this.kept.set(e.p, { e: tombstone(e.p, e.t) });
    else if (k && k.sig) this.kept.set(e.p, { e: { ...k.e, t: e.t }, sig: k.sig });
    this.touched();
  }

  protected touched(): void {
    this.sorted = undefined;
    this.dirty = true;
  }

  save(): void {
    if (!this.dirty) return;
    this.dirty = false;
    try {
      mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
      const tmp = `${this.file}.${randomBytes(4).toString("hex")}.tmp`;
      writeFileSync(tmp, cbor.encode([...this.kept.values()]) as Uint8Array, { mode: 0o600 });
      renameSync(tmp, this.file);
    } catch (e) {
      log.warning(`state-sync ${this.ch}: saving the manifest failed: ${(e as Error).message}`);
    }
  }

  digest(): string {
    const h = createHash("sha256");
    for (const p of this.paths()) {
      const e = this.kept.get(p)!.e;
      if (!e.d) h.update(`${p}\0${e.h}\0${e.m}\n`);
    }
    return h.digest("hex");
  }
}

/**
 * A key channel over the indexed key store (`keys.cache_driver: mmap_key`, src/lib/pki/key-store.ts), which is
 * then the source of truth instead of the directories: items and checks as DirSource's, the store's own sha256
 * as the signature, a scan skipped while the store's generation is unchanged (so the engine's timer scans it
 * every tick), and a changed or new key stamped when the scan sees it.
 */
export class IndexedKeySource extends DirSource {
  override readonly cheapScan = true;
  private generation: number | undefined;

  constructor(
    ch: Channel,
    private readonly keys: KeyStore,
    stateDir: string,
    now: () => number = Date.now,
  ) {
    super(ch, () => [], () => ({ error: "not a directory channel" }), stateDir, now);
  }

  private states(): KeyState[] {
    return this.ch === "denied_keys" ? ["denied"] : ["accepted", "pending", "rejected"];
  }

  protected override async doScan(): Promise<void> {
    const gen = this.keys.generation();
    if (gen !== undefined && gen === this.generation) return;
    this.generation = gen;
    const found = new Map<string, ManifestEntry>();
    const sigs = new Map<string, string>();
    const now = this.now();
    for (const state of this.states()) {
      for (const id of this.keys.list(state)) {
        const p = `${state}/${id}`;
        if ("error" in checkItemPath(this.ch, p)) continue;
        const sha = this.keys.digest(state, id);
        if (sha === undefined) continue;
        const old = this.kept.get(p);
        if (old && !old.e.d && old.sig === sha) found.set(p, old.e);
        else {
          const pub = this.keys.read(state, id) ?? "";
          found.set(p, { p, s: Buffer.byteLength(pub), h: sha, m: 0o644, t: now });
        }
        sigs.set(p, sha);
      }
    }
    this.mergeFound(found, sigs);
  }

  private parts(p: string): [KeyState, string] {
    const c = checkItemPath(this.ch, p);
    if ("error" in c) throw new Error(`refused path ${JSON.stringify(p)}: ${c.error}`);
    return [c.parts[0] as KeyState, c.parts[1]!];
  }

  override async read(p: string, h: string | undefined, off: number, len: number): Promise<Uint8Array> {
    const [state, id] = this.parts(p);
    const pub = this.keys.read(state, id);
    if (pub === undefined) throw new Error(`${p} is not here`);
    const b = Buffer.from(pub, "utf8");
    if (h !== undefined && sha256(b) !== h) throw new Error(`${p} changed here since that manifest`);
    return b.subarray(off, off + len);
  }

  override async install(e: ManifestEntry, fetch: FetchRange, chunk: number): Promise<number> {
    const [state, id] = this.parts(e.p);
    if (e.s > keyBytesMax) throw new Error("not an RSA public key (not installed)");
    const parts: Uint8Array[] = [];
    for (const r of chunkRanges(e.s, chunk)) parts.push(await fetch(r.off, r.len));
    const all = Buffer.concat(parts);
    if (sha256(all) !== e.h) throw new Error("sha256 does not match the manifest's (not installed)");
    const pub = all.toString("utf8");
    if (!isRsaPublicKeyPem(pub)) throw new Error("not an RSA public key (not installed)");
    this.keys.write(state, id, pub);
    this.kept.set(e.p, { e: { p: e.p, s: e.s, h: e.h, m: e.m, t: e.t }, sig: e.h });
    this.touched();
    return all.byteLength;
  }

  override async remove(e: ManifestEntry): Promise<void> {
    const [state, id] = this.parts(e.p);
    this.keys.remove(state, id);
    this.adopt(e);
  }
}

/** A job-cache bank: LMDB keys are the items; the content is the value in the one CBOR codec. */
export class BankSource implements Source {
  constructor(
    readonly ch: Channel,
    private readonly db: Database<unknown, string>,
  ) {}

  async scan(): Promise<void> {}

  private bytesOf(p: string): Uint8Array | undefined {
    const v = this.db.get(p);
    return v === undefined ? undefined : (cbor.encode(v) as Uint8Array);
  }

  entry(p: string): ManifestEntry | undefined {
    const b = this.bytesOf(p);
    return b === undefined ? undefined : { p, s: b.byteLength, h: sha256(b), m: 0, t: 0 };
  }

  async page(after: string | undefined, n: number): Promise<{ entries: ManifestEntry[]; more: boolean }> {
    const entries: ManifestEntry[] = [];
    let more = false;
    for (const { key, value } of this.db.getRange(after === undefined ? {} : { start: after })) {
      if (after !== undefined && key === after) continue;
      if (entries.length === n) {
        more = true;
        break;
      }
      if (typeof key !== "string") continue;
      const b = cbor.encode(value) as Uint8Array;
      entries.push({ p: key, s: b.byteLength, h: sha256(b), m: 0, t: 0 });
    }
    return { entries, more };
  }

  async read(p: string, h: string | undefined, off: number, len: number): Promise<Uint8Array> {
    const b = this.bytesOf(p);
    if (!b) throw new Error(`${p} is not here`);
    if (h !== undefined && sha256(b) !== h) throw new Error(`${p} changed here since that manifest`);
    return b.subarray(off, off + len);
  }

  async install(e: ManifestEntry, fetch: FetchRange, chunk: number): Promise<number> {
    const parts: Uint8Array[] = [];
    for (const r of chunkRanges(e.s, chunk)) parts.push(await fetch(r.off, r.len));
    const all = Buffer.concat(parts);
    if (sha256(all) !== e.h) throw new Error(`sha256 does not match the manifest's (not installed)`);
    // only what is missing here (policy "add"): never overwrite a record this master has
    const ok = await this.db.ifNoExists(e.p, () => this.db.put(e.p, cbor.decode(all)));
    if (!ok) log.debug(`state-sync ${this.ch}: ${e.p} was written here meanwhile; kept`);
    return all.byteLength;
  }

  async remove(): Promise<void> {}
  adopt(): void {}
  save(): void {}
  digest(): string {
    return "";
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
