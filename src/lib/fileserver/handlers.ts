/**
 * The fileserver AES commands (spec §5.3; Salt's AESFuncs → salt.fileserver.Fileserver → its backends),
 * with the reply shapes of the golden captures. Every handler answers bad input with Salt's "missing"
 * shape instead of throwing.
 *
 * Several backends (`fileserver_backend: [roots, gitfs]`) combine as Salt's Fileserver combines them: a
 * path is found in the first backend (in that order) that has it, `_file_envs`, `_file_list` and
 * `_dir_list` are the sorted unions, and `_symlink_list` is the last backend's answer (Salt overwrites
 * rather than merges there).
 */
import type { BigIntStats } from "node:fs";
import { getLogger } from "../../shared/log.js";
import type { WireValue } from "../../shared/protocol/msgpack.js";
import type { GitfsBackend } from "./gitfs.js";
import type { EnvLists } from "./list-cache.js";
import type { Found, RootsBackend } from "./roots.js";
import { sortCodePoints, withPrefix } from "./sorting.js";
import { chunkOffset, compressChunk, gzipLevel, readChunk } from "./serve.js";

const log = getLogger("brine.fileserver");

type Load = Record<string, WireValue>;

const num = (v: bigint): number | bigint => (v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v);

/** Python's `list(os.stat(p))`: mode, ino, dev, nlink, uid, gid, size, atime, mtime, ctime (ints). */
export function statList(st: BigIntStats): Array<number | bigint> {
  const sec = (ns: bigint) => num(ns / 1_000_000_000n);
  return [num(st.mode), num(st.ino), num(st.dev), num(st.nlink), num(st.uid), num(st.gid), num(st.size), sec(st.atimeNs), sec(st.mtimeNs), sec(st.ctimeNs)];
}

/** Salt strips `/` from both ends of the prefix, then keeps names starting with it. */
function prefixOf(load: Load): string {
  return typeof load.prefix === "string" ? load.prefix.replace(/^\/+|\/+$/g, "") : "";
}

const MISSING_FIND = { path: "", rel: "" };
const MISSING_SERVE = { data: "", dest: "" };

type Backend = RootsBackend | GitfsBackend;
type Hit = Found & { back: string; mode?: number };

export class FileserverHandlers {
  /** the enabled backends in fileserver_backend order */
  readonly backends: Backend[];
  private readonly merged = new Map<string, { parts: Array<EnvLists | null>; lists: EnvLists }>();

  constructor(
    readonly roots: RootsBackend,
    gitfs?: GitfsBackend,
    order: string[] = ["roots"],
  ) {
    const byName: Record<string, Backend | undefined> = { roots, gitfs, git: gitfs };
    const out: Backend[] = [];
    for (const n of order) {
      const b = byName[n];
      if (b && b.enabled && !out.includes(b)) out.push(b);
    }
    this.backends = out;
  }

  fileEnvs(): string[] {
    if (this.backends.length === 1) return this.backends[0]!.envs();
    return sortCodePoints(new Set(this.backends.flatMap((b) => b.envs())));
  }

  /** Salt's Fileserver.find_file: the first backend holding the path. */
  private async find(rawPath: unknown, saltenv: unknown): Promise<Hit | null> {
    for (const b of this.backends) {
      const f = await b.find(rawPath, saltenv);
      if (f) return { ...f, back: b.name };
    }
    return null;
  }

  /** `stat` as the backend reports it: roots the whole os.stat list, gitfs only the mode. */
  private statOf(f: Hit): Array<number | bigint> {
    return f.mode !== undefined ? [f.mode] : statList(f.stat);
  }

  async fileFind(load: Load): Promise<Record<string, unknown>> {
    if (!load.path) return MISSING_FIND;
    const f = await this.find(load.path, load.saltenv ?? "base");
    if (!f) return MISSING_FIND;
    return { path: f.path, rel: f.rel, stat: this.statOf(f), back: f.back };
  }

  async fileHash(load: Load): Promise<Record<string, unknown> | ""> {
    const [h] = await this.hashAndStat(load);
    return h;
  }

  async fileHashAndStat(load: Load): Promise<[Record<string, unknown> | "", Array<number | bigint> | null]> {
    return this.hashAndStat(load);
  }

  private async hashAndStat(load: Load): Promise<[Record<string, unknown> | "", Array<number | bigint> | null]> {
    if (!("path" in load) || !("saltenv" in load)) return ["", null];
    const f = await this.find(load.path, load.saltenv);
    if (!f) return ["", null];
    try {
      const hsum = await this.roots.hashes.hash(f.real, f.stat);
      return [{ hsum, hash_type: this.roots.hashType }, this.statOf(f)];
    } catch (e) {
      log.warning(`roots: could not hash ${f.path}: ${(e as Error).message}`);
      return ["", null];
    }
  }

  async serveFile(load: Load): Promise<Record<string, unknown>> {
    if (!("path" in load) || !("loc" in load) || !("saltenv" in load)) return MISSING_SERVE;
    const loc = chunkOffset(load.loc);
    if (loc === null) return MISSING_SERVE;
    const f = await this.find(load.path, load.saltenv);
    if (!f) return MISSING_SERVE;
    const left = Number(f.stat.size) - loc;
    const size = Math.max(0, Math.min(this.roots.bufferSize, left));
    let data: Buffer;
    try {
      data = size > 0 ? await readChunk(f.real, loc, size) : Buffer.alloc(0);
    } catch (e) {
      log.warning(`roots: could not read ${f.path}: ${(e as Error).message}`);
      return MISSING_SERVE;
    }
    const ret: Record<string, unknown> = { data: data.length ? data : "", dest: f.rel };
    const level = gzipLevel(load.gzip);
    if (level !== null && data.length) {
      ret.data = await compressChunk(data, level);
      ret.gzip = level;
    }
    return ret;
  }

  /** The lists of an environment over every backend (unions, sorted; symlinks of the last backend). */
  private async lists(load: Load): Promise<EnvLists | null> {
    if (!("saltenv" in load)) return null;
    if (this.backends.length === 1) return this.backends[0]!.envLists(load.saltenv);
    const parts = await Promise.all(this.backends.map((b) => b.envLists(load.saltenv)));
    if (parts.every((p) => p === null)) return null;
    const key = String(load.saltenv);
    const hit = this.merged.get(key);
    if (hit && hit.parts.length === parts.length && hit.parts.every((p, i) => p === parts[i])) return hit.lists;
    const present = parts.filter((p): p is EnvLists => p !== null);
    const lists: EnvLists = {
      files: sortCodePoints(new Set(present.flatMap((p) => p.files))),
      dirs: sortCodePoints(new Set(present.flatMap((p) => p.dirs))),
      emptyDirs: sortCodePoints(new Set(present.flatMap((p) => p.emptyDirs))),
      links: { ...(parts[parts.length - 1]?.links ?? {}) },
    };
    this.merged.set(key, { parts, lists });
    while (this.merged.size > 64) this.merged.delete(this.merged.keys().next().value!);
    return lists;
  }

  async fileList(load: Load): Promise<string[]> {
    const l = await this.lists(load);
    return l ? withPrefix(l.files, prefixOf(load)) : [];
  }

  async dirList(load: Load): Promise<string[]> {
    const l = await this.lists(load);
    return l ? withPrefix(l.dirs, prefixOf(load)) : [];
  }

  async fileListEmptydirs(load: Load): Promise<string[]> {
    const l = await this.lists(load);
    return l ? withPrefix(l.emptyDirs, prefixOf(load)) : [];
  }

  async symlinkList(load: Load): Promise<Record<string, string>> {
    const l = await this.lists(load);
    if (!l) return {};
    const prefix = prefixOf(load);
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(l.links)) if (k.startsWith(prefix)) out[k] = v;
    return out;
  }
}
