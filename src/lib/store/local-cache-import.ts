/**
 * Reads a job cache written by Salt's `local_cache` returner (salt/returners/local_cache.py, Salt 3007) into
 * brine's job cache (job-cache.ts): `cluster.migrate_jobs_to_cache`. The tree is `<root>/<h[:2]>/<h[2:]>/`,
 * h the jid hashed with the writing master's `hash_type` (sha256: 2 + 62 hex characters; md5: 2 + 30; the
 * length says which), and each job directory holds:
 *
 * | file                     | what it is (msgpack unless said)                           | brine's bank      |
 * |--------------------------|------------------------------------------------------------|-------------------|
 * | `jid`                    | the jid, text                                              | (the key)         |
 * | `.load.p`                | the publish load                                           | jobs/loads        |
 * | `.minions.p`, `.minions.<syndic>.p` | expected minions (merged, as get_load merges them) | jobs/minions  |
 * | `<minion>/return.p`      | `{return, retcode?, success?}` (an old bare value: `{return: x}`) | jobs/returns |
 * | `<minion>/out.p`         | the outputter name, kept as the return's `out`             | jobs/returns      |
 * | `endtime`                | end time, text (job_cache_store_endtime)                   | jobs/endtimes     |
 * | `nocache`                | present: the job keeps no returns                          | jobs/nocache      |
 *
 * Nothing in the tree is trusted: a directory whose name is not the hash of its jid, without `.load.p`
 * (Salt's own reading skips those too), with a file that is not msgpack of the right shape, or over
 * migrateFileBytesMax, is skipped and counted with its reason; one bad return skips only itself. A job whose
 * load brine already holds is not written again (so a second run migrates nothing new), but returns brine lacks
 * are added to it. The tree is read with directory streams, one job at a time (synchronous reads: a runner
 * thread has nothing else to serve, and thousands of small files cost less so), with at most
 * migrateJobsInFlightMax jobs' writes awaiting their commit: memory does not grow with the tree. The writes are
 * committed as they go and flushed to disk once at the end. The source is never changed.
 */
import { createHash } from "node:crypto";
import { opendirSync, readFileSync, statSync, type Dir, type Dirent } from "node:fs";
import path from "node:path";
import { decodeWire, isMap, wireLimits } from "../../shared/protocol/msgpack.js";
import { validId, validJid } from "../../shared/protocol/ids.js";
import type { JobCache, ReturnRecord } from "./job-cache.js";

/** A file of the tree bigger than this is not read (the job or return is skipped), bytes. */
export const migrateFileBytesMax = 64 * 1024 * 1024;
/** Jobs whose writes may await their commit at once (each holds its decoded load and returns meanwhile). */
export const migrateJobsInFlightMax = 64;
/** Expected minions one job may list. */
const minionsMax = 1_000_000;

/** hash_type by the length of its hex digest (Salt accepts any hashlib name; these are the ones it documents). */
const HASH_BY_HEX_LENGTH: Record<number, string> = { 32: "md5", 40: "sha1", 56: "sha224", 64: "sha256", 96: "sha384", 128: "sha512" };
const HEX_RE = /^[0-9a-f]+$/;

export interface MigrateResult {
  /** "ok", or "skipped" when there is no tree to read (`reason` says why) */
  status: "ok" | "skipped";
  /** job directories seen (every entry two levels below the root) */
  scanned: number;
  /** jobs whose load was added to the job cache (dry run: would be) */
  migrated: number;
  /** job directories not migrated: malformed, or already in the job cache */
  skipped: number;
  /** returns added (dry run: would be), to migrated jobs and to jobs already present */
  returns_migrated: number;
  /** beyond Salt: returns not migrated because their files are malformed */
  returns_skipped: number;
  /** beyond Salt: how many were skipped for each reason (jobs and returns) */
  skipped_reasons: Record<string, number>;
  dry_run: boolean;
  jobs_root: string;
  reason?: string;
}

export interface MigrateOptions {
  dryRun: boolean;
  /** called for each skipped job directory or return (for a log line) */
  onSkip?: (where: string, reason: string) => void;
}

/** Unwinds the reading of one job directory to its skip report; never leaves this module (not a BrineError). */
class Skip extends Error {}

/** A job directory read from the tree, ready to store. */
interface ParsedJob {
  jid: string;
  load: Record<string, unknown>;
  minions: string[] | undefined;
  endtime: string | undefined;
  nocache: boolean;
  returns: { id: string; rec: ReturnRecord }[];
}

export async function migrateLocalCache(jobs: JobCache, root: string, opts: MigrateOptions): Promise<MigrateResult> {
  const res: MigrateResult = { status: "ok", scanned: 0, migrated: 0, skipped: 0, returns_migrated: 0, returns_skipped: 0, skipped_reasons: {}, dry_run: opts.dryRun, jobs_root: root };
  const skip = (where: string, reason: string, isReturn: boolean) => {
    if (isReturn) res.returns_skipped++;
    else res.skipped++;
    res.skipped_reasons[reason] = (res.skipped_reasons[reason] ?? 0) + 1;
    opts.onSkip?.(where, reason);
  };
  let top: Dir;
  try {
    top = opendirSync(root);
  } catch (e) {
    return { ...res, status: "skipped", reason: `cannot read ${root}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` };
  }
  const inFlight = new Set<Promise<void>>();
  for (const t of entries(top)) {
    if (!t.isDirectory()) continue; // Salt's walk skips what it cannot list as well
    let sub: Dir;
    try {
      sub = opendirSync(path.join(root, t.name));
    } catch {
      continue;
    }
    for (const s of entries(sub)) {
      res.scanned++;
      const dir = path.join(root, t.name, s.name);
      if (!s.isDirectory()) {
        skip(dir, "not a directory", false);
        continue;
      }
      let job: ParsedJob;
      try {
        job = readJob(dir, t.name, s.name, (where, reason) => skip(where, reason, true));
      } catch (e) {
        if (!(e instanceof Skip)) throw e;
        skip(dir, e.message, false);
        continue;
      }
      const p = storeJob(jobs, job, opts.dryRun).then((r) => {
        if (r.loadNew) res.migrated++;
        else skip(dir, "already in the job cache", false);
        res.returns_migrated += r.returnsNew;
      });
      inFlight.add(p);
      const done = () => inFlight.delete(p);
      p.then(done, done);
      if (inFlight.size >= migrateJobsInFlightMax) await Promise.race(inFlight);
    }
  }
  await Promise.all(inFlight);
  if (!opts.dryRun) await jobs.flush();
  return res;
}

async function storeJob(jobs: JobCache, job: ParsedJob, dryRun: boolean): Promise<{ loadNew: boolean; returnsNew: number }> {
  const loadNew = !jobs.hasLoad(job.jid);
  const missing = job.returns.filter((r) => !jobs.hasReturn(job.jid, r.id));
  if (dryRun) return { loadNew, returnsNew: missing.length };
  const writes: Promise<unknown>[] = [];
  if (loadNew) {
    writes.push(jobs.saveLoad(job.jid, job.load, job.minions));
    if (job.endtime !== undefined) writes.push(jobs.setEndtime(job.jid, job.endtime));
    if (job.nocache) writes.push(jobs.markNocache(job.jid));
  }
  const stored = missing.map((r) => jobs.addReturn(job.jid, r.id, r.rec));
  await Promise.all(writes);
  const returnsNew = (await Promise.all(stored)).filter(Boolean).length;
  return { loadNew, returnsNew };
}

/** A directory's entries, one at a time; the handle is closed when the walk ends (or is left). */
function* entries(d: Dir): Generator<Dirent> {
  try {
    for (let e = d.readSync(); e !== null; e = d.readSync()) yield e;
  } finally {
    d.closeSync();
  }
}

function readJob(dir: string, top: string, tail: string, skipReturn: (where: string, reason: string) => void): ParsedJob {
  const h = top + tail;
  const hashType = HASH_BY_HEX_LENGTH[h.length];
  if (top.length !== 2 || !hashType || !HEX_RE.test(h)) throw new Skip("not a job directory name");
  const loadBytes = readSmall(path.join(dir, ".load.p"));
  if (loadBytes === undefined) throw new Skip("no .load.p");
  const load = decode(loadBytes, ".load.p");
  if (!isMap(load)) throw new Skip(".load.p is not a map");
  const jidBytes = readSmall(path.join(dir, "jid"));
  const jidText = jidBytes?.toString("utf8").trim();
  const jid = jidText ?? load.jid;
  if (!validJid(jid)) throw new Skip("no valid jid");
  if (load.jid !== undefined && load.jid !== jid) throw new Skip("jid and .load.p disagree");
  if (createHash(hashType).update(jid).digest("hex") !== h) throw new Skip("directory is not the hash of its jid");

  let minions: Set<string> | undefined;
  let endtime: string | undefined;
  let nocache = false;
  const returnDirs: string[] = [];
  let listing: Dir;
  try {
    listing = opendirSync(dir);
  } catch (e) {
    throw new Skip(`unreadable: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  for (const e of entries(listing)) {
    const n = e.name;
    if (n === ".minions.p" || (n.startsWith(".minions.") && n.endsWith(".p"))) {
      const bytes = readSmall(path.join(dir, n));
      if (bytes === undefined) continue;
      const list = decode(bytes, n);
      if (!Array.isArray(list) || !list.every(validId)) throw new Skip(`${n === ".minions.p" ? n : ".minions.<syndic>.p"} is not a list of minion ids`);
      minions ??= new Set();
      for (const id of list) minions.add(id);
      if (minions.size > minionsMax) throw new Skip("too many expected minions");
    } else if (n === "endtime") {
      endtime = readSmall(path.join(dir, n))?.toString("utf8").replace(/\n+$/, "");
    } else if (n === "nocache") {
      nocache = true;
    } else if (!n.startsWith(".") && e.isDirectory()) {
      returnDirs.push(n);
    }
  }

  const returns: ParsedJob["returns"] = [];
  for (const id of returnDirs) {
    const where = path.join(dir, id);
    try {
      if (!validId(id)) throw new Skip("return of an invalid minion id");
      const retBytes = readSmall(path.join(where, "return.p"));
      if (retBytes === undefined) throw new Skip("no return.p");
      const raw = decode(retBytes, "return.p");
      // Salt's get_jid reads an old bare value as {return: value}
      const rec: ReturnRecord = isMap(raw) && "return" in raw ? { ...raw, return: raw.return } : { return: raw };
      const outBytes = readSmall(path.join(where, "out.p"));
      if (outBytes !== undefined) rec.out = decode(outBytes, "out.p");
      returns.push({ id, rec });
    } catch (e) {
      if (!(e instanceof Skip)) throw e;
      skipReturn(where, e.message);
    }
  }
  const { key: _key, ...rest } = load;
  return { jid, load: { ...rest, jid }, minions: minions ? [...minions].sort() : undefined, endtime, nocache, returns };
}

/** A file's bytes; undefined when it does not exist. */
function readSmall(file: string): Buffer | undefined {
  let size: number;
  try {
    const st = statSync(file);
    if (!st.isFile()) throw new Skip(`${path.basename(file)} is not a file`);
    size = st.size;
  } catch (e) {
    if (e instanceof Skip) throw e;
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw new Skip(`${path.basename(file)} unreadable: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  if (size > migrateFileBytesMax) throw new Skip(`${path.basename(file)} over ${migrateFileBytesMax} bytes`);
  try {
    return readFileSync(file);
  } catch (e) {
    throw new Skip(`${path.basename(file)} unreadable: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

function decode(b: Buffer, name: string): unknown {
  try {
    return decodeWire(b, { ...wireLimits, bytesMax: migrateFileBytesMax });
  } catch {
    throw new Skip(`${name} is not msgpack`);
  }
}
