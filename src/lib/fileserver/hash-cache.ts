/**
 * File hashes for `_file_hash` without re-hashing unchanged files.
 *
 * A hash is keyed by the file's real path and validated by its stat signature (device, inode, size,
 * mtime and ctime in ns): any write, replace or `touch` changes the signature, and the file is hashed
 * again. Unchanged files are hashed once per worker thread (memory LRU, `hashCacheEntriesMax` entries),
 * and files of `diskHashMinBytes` or more also once per master: their hash is kept under
 * `<cachedir>/roots/brine-hash/` where the other worker threads find it.
 *
 * Racy files: a file modified less than `racyWindowMs` before it was hashed could be modified again
 * within the same timestamp tick without changing its signature, so such hashes are not cached (the
 * next request hashes again), as git does for racily-clean index entries.
 * Concurrent requests for the same file version share one hashing pass.
 */
import { createHash, getHashes } from "node:crypto";
import { createReadStream, type BigIntStats } from "node:fs";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { getLogger } from "../../shared/log.js";

const log = getLogger("brine.fileserver");

/** File hashes kept in memory per worker thread (entries; ~200 bytes each). */
export const hashCacheEntriesMax = 65_536;
/** Files at least this large (bytes) also get their hash stored on disk for the other threads. */
export const diskHashMinBytes = 1024 * 1024;
/** A file modified this recently (ms) before hashing is not cached (see "Racy files"). */
export const racyWindowMs = 2000;
/** Files up to this size (bytes) are read in one call instead of streamed. */
const readWholeMax = 256 * 1024;

/** Salt's `hash_type` values. */
export const HASH_TYPES = ["md5", "sha1", "sha224", "sha256", "sha384", "sha512"] as const;

export function validHashType(t: unknown): t is string {
  return typeof t === "string" && (HASH_TYPES as readonly string[]).includes(t) && getHashes().includes(t);
}

export function statSignature(st: BigIntStats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

async function hashFile(file: string, type: string, size: bigint): Promise<string> {
  const h = createHash(type);
  if (size <= BigInt(readWholeMax)) {
    h.update(await readFile(file));
    return h.digest("hex");
  }
  await new Promise<void>((resolve, reject) => {
    const s = createReadStream(file, { highWaterMark: 1024 * 1024 });
    s.on("data", (chunk) => h.update(chunk));
    s.on("error", reject);
    s.on("end", () => resolve());
  });
  return h.digest("hex");
}

export class HashCache {
  private readonly mem = new Map<string, { sig: string; hsum: string }>();
  private readonly inflight = new Map<string, Promise<string>>();
  private readonly diskDir: string | null;
  /** files actually hashed (for tests and the bench) */
  hashed = 0;

  constructor(
    readonly hashType: string,
    cachedir: string | null,
    private readonly now: () => number = Date.now,
    private readonly entriesMax = hashCacheEntriesMax,
  ) {
    this.diskDir = cachedir ? path.join(cachedir, "roots", "brine-hash", hashType) : null;
  }

  /** The hex digest of the file at `real` whose current stat is `st`. */
  hash(real: string, st: BigIntStats): Promise<string> {
    const sig = statSignature(st);
    const hit = this.mem.get(real);
    if (hit && hit.sig === sig) {
      this.mem.delete(real);
      this.mem.set(real, hit); // LRU refresh
      return Promise.resolve(hit.hsum);
    }
    const key = `${real}\0${sig}`;
    const running = this.inflight.get(key);
    if (running) return running;
    const p = this.compute(real, st, sig).finally(() => this.inflight.delete(key));
    this.inflight.set(key, p);
    return p;
  }

  private diskPath(real: string): string | null {
    if (!this.diskDir) return null;
    const k = createHash("sha256").update(real).digest("hex");
    return path.join(this.diskDir, k.slice(0, 2), k);
  }

  private async compute(real: string, st: BigIntStats, sig: string): Promise<string> {
    const big = st.size >= BigInt(diskHashMinBytes);
    const disk = big ? this.diskPath(real) : null;
    if (disk) {
      try {
        const [dsig, dsum] = (await readFile(disk, "utf8")).split("\n");
        if (dsig === sig && dsum) {
          this.remember(real, sig, dsum);
          return dsum;
        }
      } catch {
        // no stored hash yet
      }
    }
    const startedMs = this.now();
    const hsum = await hashFile(real, this.hashType, st.size);
    this.hashed += 1;
    if (startedMs - Number(st.mtimeNs / 1_000_000n) < racyWindowMs) return hsum; // racy: do not cache
    this.remember(real, sig, hsum);
    if (disk) {
      try {
        await mkdir(path.dirname(disk), { recursive: true });
        const tmp = `${disk}.${process.pid}.${Math.random().toString(36).slice(2)}`;
        await writeFile(tmp, `${sig}\n${hsum}\n`);
        await rename(tmp, disk);
      } catch (e) {
        log.debug(`roots: could not store the hash of ${real}: ${(e as Error).message}`);
      }
    }
    return hsum;
  }

  private remember(real: string, sig: string, hsum: string): void {
    this.mem.delete(real);
    this.mem.set(real, { sig, hsum });
    while (this.mem.size > this.entriesMax) {
      const oldest = this.mem.keys().next();
      if (oldest.done) break;
      this.mem.delete(oldest.value);
    }
  }

  get size(): number {
    return this.mem.size;
  }
}
