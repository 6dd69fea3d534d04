/**
 * The job cache's LMDB file is checked before the master starts anything that opens it (request workers,
 * runner threads, the mirror), because a damaged `data.mdb` is not an error LMDB reports: a truncated file
 * maps pages past its end (SIGBUS on first touch), a torn page sends a cursor to a wild offset (SIGSEGV),
 * and both kill the whole process, after it printed "ready", at the first request that reads there. A
 * zero-length file is worse: LMDB takes it for a new one and the master serves a silently empty cache.
 *
 * Two steps, both before "ready":
 * 1. the header, read here (cheap, exact messages): the file is not empty, holds both meta pages, and each
 *    carries LMDB's magic, data version and a sane page size (a zeroed or overwritten file fails here);
 * 2. a walk in a child process (`lmdb-check-child.ts`) that opens the environment read-only and reads every
 *    key and value of every database with the same library the workers use. LMDB has no page checksums, so
 *    the only way to know whether reading a page crashes is to read it; a child takes the signal instead of
 *    the master. It costs a process start (~0.2 s) plus one pass over the file (about 1 s per million records
 *    here), once per start; `brine_job_cache_check: header` skips it, `off` skips both.
 *
 * A damaged cache stops the start with one message naming the file, what is wrong and what to do
 * (`brine_job_cache_damaged: refuse`, the default), or, with `move_aside`, is renamed to
 * `<dir>.damaged-<time>` and the master starts with an empty cache and says so in a warning.
 */
import { spawnSync } from "node:child_process";
import { closeSync, existsSync, fstatSync, openSync, readSync, renameSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { BrineError } from "../shared/errors.js";
import { getLogger } from "../shared/log.js";
import { lmdbDir, type StoreConfig } from "../lib/store/lmdb-env.js";
import { readOption } from "../shared/config/options.js";
import path from "node:path";

const log = getLogger("brine.store");

/** LMDB's MDB_MAGIC and the data version of the LMDB lmdb-js 3 embeds (MDB_DATA_VERSION). */
const MDB_MAGIC = 0xbeefc0de;
const MDB_DATA_VERSION = 2;
/** LMDB 1.0's page header: pgno (8), txnid (8), pad (2), flags (2), lower/upper (4). */
const PAGE_HEADER_BYTES = 24;
const P_META = 0x08;
/** how long the walk may take before the start is refused as "could not be checked" */
export const walkTimeoutMs = 10 * 60_000;

export type CheckMode = "full" | "header" | "off";
export type DamagedMode = "refuse" | "move_aside";

export interface CheckOptions {
  check: CheckMode;
  damaged: DamagedMode;
}

/** `brine_job_cache_check` (full | header | off) and `brine_job_cache_damaged` (refuse | move_aside), as declared in the schema. */
export function checkOptions(cfg: object): CheckOptions {
  return { check: readOption(cfg, "brine_job_cache_check") as CheckMode, damaged: readOption(cfg, "brine_job_cache_damaged") as DamagedMode };
}

/** files whose header says they are shorter than their pages in use (headerProblem), with the words for it */
const shortBy = new Map<string, string>();

/** What is wrong with the header of `file` (an LMDB data file), or undefined when it looks whole. */
export function headerProblem(file: string): string | undefined {
  const fd = openSync(file, "r");
  try {
    const size = fstatSync(fd).size;
    if (size === 0) return "it is empty (0 bytes): LMDB would take it for a new file and the job cache would be silently empty";
    const head = Buffer.alloc(Math.min(size, 2 * 65536));
    readSync(fd, head, 0, head.length, 0);
    const meta = (at: number): { ok: true; psize: number; lastPg: bigint; txnid: bigint } | { ok: false; why: string } => {
      if (head.length < at + PAGE_HEADER_BYTES + 144) return { ok: false, why: "is cut off" };
      const flags = head.readUInt16LE(at + 18);
      const m = at + PAGE_HEADER_BYTES;
      if ((flags & P_META) === 0 || head.readUInt32LE(m) !== MDB_MAGIC) return { ok: false, why: "has no LMDB magic (zeroed or overwritten)" };
      if (head.readUInt32LE(m + 4) !== MDB_DATA_VERSION) return { ok: false, why: `has data version ${head.readUInt32LE(m + 4)}, not ${MDB_DATA_VERSION}` };
      const psize = head.readUInt32LE(m + 24); // mm_dbs[FREE_DBI].md_pad
      if (psize < 512 || psize > 65536 || (psize & (psize - 1)) !== 0) return { ok: false, why: `names a page size of ${psize}` };
      return { ok: true, psize, lastPg: head.readBigUInt64LE(m + 120), txnid: head.readBigUInt64LE(m + 128) };
    };
    const m0 = meta(0);
    if (!m0.ok) return `it is not an LMDB file any more: its first meta page ${m0.why}`;
    const m1 = meta(m0.psize);
    if (!m1.ok) return size < 2 * m0.psize ? `it is truncated to ${size} bytes, shorter than its two meta pages` : `its second meta page ${m1.why}`;
    if (m1.psize !== m0.psize) return "its two meta pages disagree on the page size";
    // the newest meta's last page in use must lie inside the file (LMDB may leave a few never-written pages at
    // the end, so only the walk can say whether this matters; in `header` mode it is reported)
    const newest = m1.txnid > m0.txnid ? m1 : m0;
    const needBytes = (newest.lastPg + 1n) * BigInt(newest.psize);
    if (BigInt(size) < needBytes) shortBy.set(file, `it is truncated: ${size} bytes, but its pages in use reach ${needBytes}`);
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** Reads every record in a child process; what went wrong, or undefined when every read succeeded. */
export function walkProblem(dir: string, mapBytes: number, timeoutMs = walkTimeoutMs): string | undefined {
  const child = fileURLToPath(new URL("./lmdb-check-child.js", import.meta.url));
  const r = spawnSync(process.execPath, [child, dir, String(mapBytes)], { encoding: "utf8", timeout: timeoutMs, stdio: ["ignore", "pipe", "pipe"], maxBuffer: 1 << 20 });
  if (r.error) return `it could not be checked: ${r.error.message}`;
  if (r.signal) return `reading it crashed the checking process (${r.signal}): a page is torn or the file is truncated`;
  if (r.status !== 0) {
    const why = (r.stdout.trim().split("\n").pop() ?? "") || r.stderr.trim().split("\n").slice(-1)[0] || `exit code ${r.status}`;
    return `reading it failed: ${why}`;
  }
  return undefined;
}

/**
 * Checks the job cache of `cfg` before anything opens it. Throws STORE_DAMAGED (one message: the file, what
 * is wrong, what to do) or, with `brine_job_cache_damaged: move_aside`, moves the directory aside and returns
 * the warning it logged.
 */
export function checkJobCache(cfg: StoreConfig): string | undefined {
  const opts = checkOptions(cfg);
  if (opts.check === "off") return undefined;
  const dir = lmdbDir(cfg);
  const file = path.join(dir, "data.mdb");
  if (!existsSync(file)) return undefined; // a first start
  shortBy.delete(file);
  let problem = headerProblem(file);
  if (!problem && opts.check === "full") {
    const walk = walkProblem(dir, cfg.brine_lmdb_map_bytes);
    if (walk) problem = shortBy.has(file) ? `${shortBy.get(file)}, and ${walk.replace(/^it /, "")}` : walk;
  } else if (!problem) problem = shortBy.get(file);
  if (!problem) return undefined;
  if (opts.damaged === "move_aside") {
    const aside = `${dir}.damaged-${new Date().toISOString().replace(/[:.]/g, "-")}`;
    renameSync(dir, aside);
    const msg = `The job cache ${file} is damaged (${problem}). It was moved to ${aside} (brine_job_cache_damaged: move_aside) and the master starts with an empty job cache and minion data cache.`;
    log.warning(msg);
    return msg;
  }
  throw new BrineError(
    "STORE_DAMAGED",
    `${file}: ${problem}. The master will not start on it. Move ${dir} aside (the master then starts with an empty job cache and minion data cache, which minions refill) or restore it from a backup; or set brine_job_cache_damaged: move_aside to have the master do that itself.`,
  );
}
