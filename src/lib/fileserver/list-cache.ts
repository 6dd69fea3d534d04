/**
 * The file list cache of the roots backend: per environment, the sorted files, directories, empty
 * directories and symlinks of all its roots (Salt's `roots._file_lists`), built by one walk and kept
 * until a change is noticed, so `_file_list` & co. never walk the tree per request.
 *
 * Noticing changes (a list depends only on directory entries, never on file contents):
 * - every directory walked is remembered with its mtime; adding, removing or renaming an entry changes
 *   its directory's mtime. A cached list older than `listRevalidateMs` is re-validated by stat'ing those
 *   directories (one stat each, no readdir) and rebuilt if any changed or vanished;
 * - up to `listWatchedDirsMax` directories per environment are also watched with `fs.watch` (inotify),
 *   which marks the list dirty at once; watching only shortens the delay, correctness rests on the mtimes.
 * Builds and validations are single-flight: concurrent requests share one walk.
 *
 * Walk rules: regular files only (and symlinks to them); a symlink whose real target leaves the real
 * root is left out entirely, as are broken symlinks (listed in neither files nor dirs nor links);
 * symlinked directories inside the root are followed when `fileserver_followsymlinks` (default, as Salt)
 * with loop protection; `fileserver_ignoresymlinks` drops all symlinks; ignore rules apply to each
 * relative path (ignored directories are still descended, as Salt's os.walk does).
 * Limits: `listEntriesMax` entries and `listDepthMax` levels per environment; beyond them the walk stops
 * and logs an error (the list is then partial).
 */
import { watch, type FSWatcher } from "node:fs";
import { readdir, readlink, realpath, stat } from "node:fs/promises";
import path from "node:path";
import { getLogger } from "../../shared/log.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { IgnoreRules } from "./ignore.js";
import { isInside, rootsFor } from "./paths.js";
import { sortCodePoints } from "./sorting.js";

const log = getLogger("brine.fileserver");

/** A cached list is trusted this long (ms) before its directories' mtimes are checked again. */
export const listRevalidateMs = 1000;
/** Directories watched with fs.watch per environment per worker thread (inotify watches). */
export const listWatchedDirsMax = 2048;
/** Files + directories + links one environment may list. */
export const listEntriesMax = 1_000_000;
/** Deepest directory level walked below a root. */
export const listDepthMax = 64;
/** Environments whose lists one cache keeps (LRU); `__env__` roots let minions name any environment. */
export const listEnvsMax = 64;
/** Directory stats issued at once while re-validating. */
const statBatch = 64;

export interface EnvLists {
  files: string[];
  dirs: string[];
  emptyDirs: string[];
  links: Record<string, string>;
}

/** The walk settings a master config gives (ignore rules, symlink options) for a set of roots. */
export function listOptionsFromConfig(roots: ReadonlyMap<string, string[]>, cfg: MasterConfig, ignore = new IgnoreRules(cfg.file_ignore_regex, cfg.file_ignore_glob)): ListOptions {
  return {
    roots,
    ignore,
    followSymlinks: cfg.fileserver_followsymlinks !== false,
    ignoreSymlinks: cfg.fileserver_ignoresymlinks === true,
  };
}

export interface ListOptions {
  roots: ReadonlyMap<string, string[]>;
  ignore: IgnoreRules;
  followSymlinks: boolean;
  ignoreSymlinks: boolean;
  now?: () => number;
  /** 0 disables fs.watch (tests of the mtime path) */
  watchDirsMax?: number;
  revalidateMs?: number;
}

/** mtime of a directory in ns, or -1 when it did not exist. */
type Stamp = bigint;

interface Entry {
  lists: EnvLists;
  stamps: Map<string, Stamp>;
  validatedAt: number;
  dirty: boolean;
  watchers: FSWatcher[];
  builtAt: number;
}

async function dirStamp(dir: string): Promise<Stamp> {
  try {
    const st = await stat(dir, { bigint: true });
    return st.isDirectory() ? st.mtimeNs : -1n;
  } catch {
    return -1n;
  }
}

class Walk {
  readonly files = new Set<string>();
  readonly dirs = new Set<string>();
  readonly emptyDirs = new Set<string>();
  readonly links: Record<string, string> = {};
  readonly stamps = new Map<string, Stamp>();
  entries = 0;
  truncated = false;

  constructor(private readonly o: ListOptions) {}

  async root(root: string): Promise<void> {
    let realRoot: string;
    try {
      realRoot = await realpath(root);
    } catch {
      this.stamps.set(root, -1n); // notice when it appears
      return;
    }
    await this.dir(root, realRoot, realRoot, "", 0, new Set([realRoot]), false);
  }

  private count(): boolean {
    if (++this.entries > listEntriesMax) {
      this.truncated = true;
      return false;
    }
    return true;
  }

  private async dir(abs: string, real: string, realRoot: string, relDir: string, depth: number, onPath: Set<string>, markEmpty: boolean): Promise<void> {
    if (depth > listDepthMax) {
      this.truncated = true;
      return;
    }
    // stamp before reading, so a change racing the readdir shows up at the next validation
    this.stamps.set(abs, await dirStamp(abs));
    let names;
    try {
      names = await readdir(abs, { withFileTypes: true });
    } catch (e) {
      log.debug(`roots: unable to list ${abs}: ${(e as Error).message}`);
      return;
    }
    if (names.length === 0 && markEmpty) this.emptyDirs.add(relDir);
    for (const d of names) {
      if (this.truncated) return;
      const childAbs = path.join(abs, d.name);
      const rel = relDir ? `${relDir}/${d.name}` : d.name;
      const isLink = d.isSymbolicLink();
      let isDir = d.isDirectory();
      let isFile = d.isFile();
      let childReal = path.join(real, d.name);
      if (isLink) {
        if (this.o.ignoreSymlinks) continue;
        let target: string;
        try {
          childReal = await realpath(childAbs);
          target = await readlink(childAbs);
          const st = await stat(childReal);
          isDir = st.isDirectory();
          isFile = st.isFile();
        } catch {
          continue; // broken link: neither a file nor a directory
        }
        if (!isInside(realRoot, childReal)) continue; // leaves the root: missing
        if (!this.o.ignore.ignored(rel)) this.links[rel] = target;
      }
      if (isDir) {
        if (!this.count()) return;
        const ignored = this.o.ignore.ignored(rel);
        if (!ignored) this.dirs.add(rel);
        if (isLink) {
          if (!this.o.followSymlinks || onPath.has(childReal)) {
            if (!ignored && (await isEmptyDir(childReal))) this.emptyDirs.add(rel);
            continue; // not followed, or a symlink loop
          }
        }
        onPath.add(childReal);
        await this.dir(isLink ? childReal : childAbs, childReal, realRoot, rel, depth + 1, onPath, !ignored);
        onPath.delete(childReal);
      } else if (isFile) {
        if (!this.count()) return;
        if (!this.o.ignore.ignored(rel)) this.files.add(rel);
      }
    }
  }
}

async function isEmptyDir(dir: string): Promise<boolean> {
  try {
    return (await readdir(dir)).length === 0;
  } catch {
    return false;
  }
}

export class FileListCache {
  private readonly entries = new Map<string, Entry>();
  private readonly inflight = new Map<string, Promise<EnvLists | null>>();
  private readonly now: () => number;
  private readonly watchMax: number;
  private readonly revalidateMs: number;
  /** walks done (for tests and the bench) */
  builds = 0;

  constructor(private readonly o: ListOptions) {
    this.now = o.now ?? Date.now;
    this.watchMax = o.watchDirsMax ?? listWatchedDirsMax;
    this.revalidateMs = o.revalidateMs ?? listRevalidateMs;
  }

  /** The lists of an environment, or null for an unknown environment. */
  get(saltenv: string): Promise<EnvLists | null> {
    const e = this.entries.get(saltenv);
    if (e) {
      this.entries.delete(saltenv); // LRU refresh
      this.entries.set(saltenv, e);
    }
    if (e && !e.dirty && this.now() - e.validatedAt < this.revalidateMs) return Promise.resolve(e.lists);
    const running = this.inflight.get(saltenv);
    if (running) return running;
    const p = this.refresh(saltenv, e).finally(() => this.inflight.delete(saltenv));
    this.inflight.set(saltenv, p);
    return p;
  }

  /** Environments cached now. */
  get size(): number {
    return this.entries.size;
  }

  /** Forget everything (config reload, tests). */
  clear(): void {
    for (const e of this.entries.values()) this.unwatch(e);
    this.entries.clear();
  }

  private async refresh(saltenv: string, e: Entry | undefined): Promise<EnvLists | null> {
    const roots = rootsFor(this.o.roots, saltenv);
    if (!roots) return null;
    if (e && !e.dirty) {
      const started = this.now();
      if (await this.unchanged(e)) {
        e.validatedAt = started;
        return e.lists;
      }
    }
    return this.build(saltenv, roots, e);
  }

  private async unchanged(e: Entry): Promise<boolean> {
    const dirs = [...e.stamps];
    for (let i = 0; i < dirs.length; i += statBatch) {
      const batch = dirs.slice(i, i + statBatch);
      const now = await Promise.all(batch.map(([d]) => dirStamp(d)));
      for (let j = 0; j < batch.length; j++) if (now[j] !== batch[j]![1]) return false;
      if (e.dirty) return false;
    }
    return !e.dirty;
  }

  private async build(saltenv: string, roots: string[], old: Entry | undefined): Promise<EnvLists> {
    if (old) this.unwatch(old);
    const started = this.now();
    const entry: Entry = {
      lists: { files: [], dirs: [], emptyDirs: [], links: {} },
      stamps: new Map(),
      validatedAt: started,
      dirty: false,
      watchers: [],
      builtAt: started,
    };
    const w = new Walk(this.o);
    for (const r of roots) await w.root(r);
    this.builds += 1;
    if (w.truncated) log.error(`roots: environment ${saltenv} exceeds listEntriesMax (${listEntriesMax}) or listDepthMax (${listDepthMax}); its file list is partial`);
    entry.lists = {
      files: sortCodePoints(w.files),
      dirs: sortCodePoints(w.dirs),
      emptyDirs: sortCodePoints(w.emptyDirs),
      links: w.links,
    };
    entry.stamps = w.stamps;
    this.watchAll(entry);
    this.entries.delete(saltenv);
    this.entries.set(saltenv, entry);
    while (this.entries.size > listEnvsMax) {
      const [oldest, oe] = this.entries.entries().next().value!;
      this.unwatch(oe);
      this.entries.delete(oldest);
    }
    log.debug(`roots: listed environment ${saltenv}: ${entry.lists.files.length} files, ${entry.lists.dirs.length} directories`);
    return entry.lists;
  }

  private watchAll(e: Entry): void {
    if (this.watchMax <= 0 || e.stamps.size > this.watchMax) return;
    for (const [dir, stamp] of e.stamps) {
      if (stamp < 0n) continue;
      try {
        const w = watch(dir, { persistent: false }, () => {
          e.dirty = true;
        });
        w.on("error", () => {
          e.dirty = true;
        });
        e.watchers.push(w);
      } catch {
        // out of inotify watches or the directory vanished: the mtime check still covers it
      }
    }
  }

  private unwatch(e: Entry): void {
    for (const w of e.watchers) {
      try {
        w.close();
      } catch {
        // already closed
      }
    }
    e.watchers = [];
  }
}
