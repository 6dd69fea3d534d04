/**
 * `salt-run pki.migrate_to_mmap` (Salt 3009's runner, salt/runners/pki.py): every accepted, pending, rejected
 * and denied key of the localfs_key layout (the `minions*` directories of the minion pki dir) copied into the
 * indexed store (key-db.ts), each replacing what the store held for the same state and id, so running it
 * again changes nothing. Files are left where they are (switching `keys.cache_driver` back needs nothing).
 *
 * An entry that is not a key is counted as skipped and logged (the first `skipsLoggedMax` one by one): a
 * name that is not a valid minion id, a symlink, anything but a regular file, a file over `keyFileBytesMax`,
 * an unreadable file, or text that is not a PEM public key. Salt logs such entries and counts only what it
 * migrated; brine adds a `Skipped:` line to Salt's report when there were any. Dotfiles are not keys and are
 * neither migrated nor counted (Salt's `.key_cache`).
 */
import { lstatSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { validId } from "../../shared/protocol/ids.js";
import type { KeyDb } from "./key-db.js";
import { KEY_DIRS, type KeyState } from "./key-store.js";

/** Largest key file taken (a 16384-bit key's PEM is about 3 KiB). */
export const keyFileBytesMax = 64 * 1024;
/** Keys read into memory and written per transaction. */
export const migrateChunkKeys = 5000;
/** Skipped entries logged one by one per run; the rest are only counted. */
export const skipsLoggedMax = 20;

/** Salt's order in the report. */
const REPORT_ORDER: readonly KeyState[] = ["accepted", "pending", "rejected", "denied"];

export interface MigrateCounts {
  accepted: number;
  pending: number;
  rejected: number;
  denied: number;
  skipped: number;
}

export interface MigrateHooks {
  /** hears each skipped entry (the runner logs them) */
  skipped(file: string, reason: string): void;
}

const PEM_PUBLIC = /-----BEGIN (RSA )?PUBLIC KEY-----[\s\S]+-----END (RSA )?PUBLIC KEY-----/;

/** Why an entry of a key directory is not a key, or undefined when it is one (then `pub` is its text). */
function readKeyFile(file: string, name: string): { pub: string } | { reason: string } {
  if (!validId(name)) return { reason: "the name is not a valid minion id" };
  let st;
  try {
    st = lstatSync(file);
  } catch (e) {
    return { reason: (e as Error).message };
  }
  if (st.isSymbolicLink()) return { reason: "a symlink" };
  if (!st.isFile()) return { reason: "not a regular file" };
  if (st.size > keyFileBytesMax) return { reason: `larger than ${keyFileBytesMax} bytes` };
  let pub: string;
  try {
    pub = readFileSync(file, "utf8");
  } catch (e) {
    return { reason: (e as Error).message };
  }
  if (!PEM_PUBLIC.test(pub)) return { reason: "not a PEM public key" };
  return { pub };
}

/**
 * Copies the localfs layout under `pkiDir` into `db` (nothing is written with `dryRun`); returns what was
 * (or would be) migrated per state and how many entries were skipped.
 */
export function migrateToIndexed(pkiDir: string, db: KeyDb | undefined, dryRun: boolean, hooks: MigrateHooks): MigrateCounts {
  const counts: MigrateCounts = { accepted: 0, pending: 0, rejected: 0, denied: 0, skipped: 0 };
  for (const state of REPORT_ORDER) {
    const dir = path.join(pkiDir, KEY_DIRS[state]);
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") hooks.skipped(dir, `cannot be listed: ${(e as Error).message}`);
      continue;
    }
    let chunk: { state: KeyState; id: string; pub: string }[] = [];
    const flush = () => {
      if (!dryRun && chunk.length) db!.putMany(chunk);
      chunk = [];
    };
    for (const name of names) {
      if (name.startsWith(".")) continue;
      const file = path.join(dir, name);
      const r = readKeyFile(file, name);
      if ("reason" in r) {
        counts.skipped++;
        hooks.skipped(file, r.reason);
        continue;
      }
      counts[state]++;
      chunk.push({ state, id: name, pub: r.pub });
      if (chunk.length >= migrateChunkKeys) flush();
    }
    flush();
  }
  return counts;
}

/** Python's f"{n:,}". */
function thousands(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

/** Salt's report text (pki.migrate_to_mmap and pki.status), plus `Skipped:` when entries were skipped. */
export function migrateReport(c: MigrateCounts, dryRun: boolean): string {
  const total = c.accepted + c.pending + c.rejected + c.denied;
  const head = dryRun ? "PKI migration dry-run (no changes written):" : "PKI keys migrated to mmap_key backend successfully.";
  const lines = [
    head,
    `  Accepted: ${thousands(c.accepted)}`,
    `  Pending:  ${thousands(c.pending)}`,
    `  Rejected: ${thousands(c.rejected)}`,
    `  Denied:   ${thousands(c.denied)}`,
    `  Total:    ${thousands(total)}`,
  ];
  if (c.skipped) lines.push(`  Skipped:  ${thousands(c.skipped)} (not keys; see the master log)`);
  return lines.join("\n");
}
