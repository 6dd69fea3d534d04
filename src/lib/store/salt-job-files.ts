/**
 * Each job's load, also written where Salt's own tools look for it: the `local_cache` returner's layout
 * under `cachedir/jobs/<h[:2]>/<h[2:]>/` (h = the jid hashed with `hash_type`), files `jid` and
 * `.load.p` and `.minions.p` (msgpack), as salt/returners/local_cache.py writes them. brine's job cache is LMDB; this is
 * only so a Python salt-api or Salt's own `salt` CLI pointed at brine finds the job it published
 * (Salt's LocalClient asks `get_load(jid)` before it waits for returns, and gives up on "jid does not
 * exist" when it is empty). Returns are not written here: those clients read them from the bus.
 *
 * `brine_salt_job_files: False` turns it off (one directory and two small files per publish);
 * the loop_interval cleanup removes job directories older than `keep_jobs_seconds`.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { encodeWire } from "../../shared/protocol/msgpack.js";

/** Job directories removed per cleanup pass at most. */
export const saltJobDirsPruneMax = 10_000;

export interface SaltJobFilesConfig {
  cachedir: string;
  hash_type: string;
  brine_salt_job_files?: unknown;
}

export function saltJobFilesOn(cfg: SaltJobFilesConfig): boolean {
  return cfg.brine_salt_job_files !== false;
}

/** Salt's `jid_dir`: `<cachedir>/jobs/<h[:2]>/<h[2:]>`. */
export function saltJobDir(cachedir: string, hashType: string, jid: string): string {
  const h = createHash(hashType).update(jid).digest("hex");
  return path.join(cachedir, "jobs", h.slice(0, 2), h.slice(2));
}

/** Writes `jid`, `.load.p` and `.minions.p` for one job (best effort: a failure is the caller's to log). */
export function writeSaltJobLoad(cfg: SaltJobFilesConfig, jid: string, load: Record<string, unknown>, minions: readonly string[]): void {
  const dir = saltJobDir(cfg.cachedir, cfg.hash_type, jid);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  writeFileSync(path.join(dir, "jid"), jid, { mode: 0o600 });
  writeFileSync(path.join(dir, ".load.p"), encodeWire(load), { mode: 0o600 });
  writeFileSync(path.join(dir, ".minions.p"), encodeWire([...minions]), { mode: 0o600 });
}

/** Removes job directories whose `jid` file is older than keepSeconds; returns how many. */
export function pruneSaltJobFiles(cachedir: string, keepSeconds: number, nowMs: number): number {
  const root = path.join(cachedir, "jobs");
  let removed = 0;
  let tops: string[];
  try {
    tops = readdirSync(root);
  } catch {
    return 0;
  }
  for (const top of tops) {
    let subs: string[];
    try {
      subs = readdirSync(path.join(root, top));
    } catch {
      continue;
    }
    for (const sub of subs) {
      const dir = path.join(root, top, sub);
      try {
        if (nowMs - statSync(path.join(dir, "jid")).mtimeMs <= keepSeconds * 1000) continue;
      } catch {
        // no jid file: a directory Salt itself would not have made; leave it
        continue;
      }
      rmSync(dir, { recursive: true, force: true });
      if (++removed >= saltJobDirsPruneMax) return removed;
    }
  }
  return removed;
}
