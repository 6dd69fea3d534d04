/**
 * The fileserver AES commands (spec §5.3; Salt's AESFuncs → salt.fileserver.Fileserver → roots), with
 * the reply shapes of the golden captures. Every handler answers bad input with Salt's "missing"
 * shape instead of throwing.
 */
import type { BigIntStats } from "node:fs";
import { getLogger } from "../log.js";
import type { WireValue } from "../protocol/msgpack.js";
import type { RootsBackend } from "./roots.js";
import { withPrefix } from "./sorting.js";
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

export class FileserverHandlers {
  constructor(readonly roots: RootsBackend) {}

  fileEnvs(): string[] {
    return this.roots.envs();
  }

  async fileFind(load: Load): Promise<Record<string, unknown>> {
    if (!load.path) return MISSING_FIND;
    const f = await this.roots.find(load.path, load.saltenv ?? "base");
    if (!f) return MISSING_FIND;
    return { path: f.path, rel: f.rel, stat: statList(f.stat), back: "roots" };
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
    const f = await this.roots.find(load.path, load.saltenv);
    if (!f) return ["", null];
    try {
      const hsum = await this.roots.hashes.hash(f.real, f.stat);
      return [{ hsum, hash_type: this.roots.hashType }, statList(f.stat)];
    } catch (e) {
      log.warning(`roots: could not hash ${f.path}: ${(e as Error).message}`);
      return ["", null];
    }
  }

  async serveFile(load: Load): Promise<Record<string, unknown>> {
    if (!("path" in load) || !("loc" in load) || !("saltenv" in load)) return MISSING_SERVE;
    const loc = chunkOffset(load.loc);
    if (loc === null) return MISSING_SERVE;
    const f = await this.roots.find(load.path, load.saltenv);
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

  private async lists(load: Load) {
    if (!("saltenv" in load)) return null;
    return this.roots.envLists(load.saltenv);
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
