/**
 * The `roots` fileserver backend (Salt's salt/fileserver/roots.py behind salt/fileserver/__init__.py):
 * environments from `file_roots`, several roots per environment with the first root holding a path
 * winning, file lookup with the path rules of paths.ts, cached lists, cached hashes, chunked serving.
 *
 * One instance per worker thread; everything it caches is validated against the filesystem (stat or
 * directory mtimes), so threads never need to talk to each other.
 */
import { realpathSync, statSync, type BigIntStats } from "node:fs";
import path from "node:path";
import { getLogger } from "../../shared/log.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { HashCache, validHashType } from "./hash-cache.js";
import { IgnoreRules } from "./ignore.js";
import { FileListCache, listOptionsFromConfig, type EnvLists } from "./list-cache.js";
import { envName, isInside, normalizeRoots, parseRequestPath, rootsFor } from "./paths.js";
import { sortCodePoints } from "./sorting.js";

const log = getLogger("brine.fileserver");

/** What a successful lookup found (Salt's `fnd`). */
export interface Found {
  /** root + rel, as Salt reports it in `_file_find` */
  path: string;
  /** the real path opened for reading (inside the real root) */
  real: string;
  rel: string;
  saltenv: string;
  stat: BigIntStats;
}

export interface RootsOptions {
  now?: () => number;
  /** override the fs.watch budget (0 = mtime checks only) */
  watchDirsMax?: number;
}

/** fileserver_backend as a list of names (Salt takes a list, or a comma-separated string). */
export function backendNames(cfg: MasterConfig): string[] {
  const opt: unknown = cfg.fileserver_backend;
  return Array.isArray(opt) ? opt.map(String) : typeof opt === "string" ? opt.split(",").map((s) => s.trim()) : ["roots"];
}

export class RootsBackend {
  readonly name = "roots";
  readonly roots: Map<string, string[]>;
  readonly enabled: boolean;
  readonly lists: FileListCache;
  readonly hashes: HashCache;
  readonly hashType: string;
  readonly bufferSize: number;
  private readonly ignore: IgnoreRules;

  constructor(cfg: MasterConfig, o: RootsOptions = {}) {
    this.roots = normalizeRoots(cfg.file_roots);
    const backends = backendNames(cfg);
    this.enabled = backends.includes("roots");
    const others = backends.filter((b) => !["roots", "gitfs", "git"].includes(b));
    if (others.length) log.warning(`fileserver_backend: ${others.join(", ")} not supported by brine; only roots and gitfs are served`);
    if (!this.enabled && !backends.includes("gitfs") && !backends.includes("git")) log.warning("fileserver_backend includes neither roots nor gitfs: the fileserver serves nothing");
    this.ignore = new IgnoreRules(cfg.file_ignore_regex, cfg.file_ignore_glob);
    this.lists = new FileListCache({ ...listOptionsFromConfig(this.roots, cfg, this.ignore), now: o.now, watchDirsMax: o.watchDirsMax });
    this.hashType = validHashType(cfg.hash_type) ? cfg.hash_type : "sha256";
    if (this.hashType !== cfg.hash_type) log.error(`hash_type ${String(cfg.hash_type)} is not supported; using sha256`);
    this.hashes = new HashCache(this.hashType, typeof cfg.cachedir === "string" ? cfg.cachedir : null, o.now);
    const buf = Number(cfg.file_buffer_size);
    this.bufferSize = Number.isSafeInteger(buf) && buf > 0 ? Math.min(buf, fileBufferBytesMax) : 1048576;
  }

  /** Environment names, sorted (Salt's roots.envs). */
  envs(): string[] {
    return this.enabled ? sortCodePoints(this.roots.keys()) : [];
  }

  /**
   * Find a file: `rawPath` as the minion sent it (may carry `?saltenv=`), `saltenvArg` the load's
   * saltenv. Null means missing.
   */
  async find(rawPath: unknown, saltenvArg: unknown): Promise<Found | null> {
    if (!this.enabled) return null;
    const req = parseRequestPath(rawPath);
    if (!req) return null;
    const saltenv = req.saltenv ?? envName(saltenvArg);
    if (saltenv === null) return null;
    const roots = rootsFor(this.roots, saltenv);
    if (!roots) return null;
    if (this.ignore.ignored(req.rel)) return null;
    for (const root of roots) {
      const full = path.join(root, req.rel);
      if (!isInside(root, full) || this.ignore.ignored(full)) continue;
      // synchronous on purpose: three metadata calls answered from the dentry cache take a few µs,
      // while each async call would queue on libuv's small thread pool shared by all worker threads
      let real: string;
      let st: BigIntStats;
      try {
        real = realpathSync.native(full);
        if (!isInside(realpathSync.native(root), real)) {
          log.debug(`roots: ${req.rel} in ${saltenv} resolves outside its root; treated as missing`);
          continue;
        }
        st = statSync(real, { bigint: true });
      } catch {
        continue; // not in this root
      }
      if (!st.isFile()) continue;
      return { path: full, real, rel: req.rel, saltenv, stat: st };
    }
    return null;
  }

  /** The cached lists of an environment; null when unknown or the backend is off. */
  async envLists(saltenvArg: unknown): Promise<EnvLists | null> {
    if (!this.enabled) return null;
    const saltenv = envName(saltenvArg);
    if (saltenv === null) return null;
    return this.lists.get(saltenv);
  }
}

/** Largest chunk served whatever `file_buffer_size` says (bytes); a reply must fit a frame. */
export const fileBufferBytesMax = 16 * 1024 * 1024;
