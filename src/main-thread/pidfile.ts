/**
 * The master's pidfile (Salt's `pidfile` option, default /var/run/salt-master.pid, root_dir applies; the
 * salt-master CLI's `--pid-file` overrides it): written when the master starts, removed when it stops cleanly,
 * and held while it runs, so two masters on one pidfile cannot both start.
 *
 * The file is created exclusively (O_EXCL). When it already exists, the pid in it decides:
 * - that process is alive and is a salt-master: this master refuses to start, naming the file and the pid
 *   (BrineError PIDFILE_LOCKED);
 * - it is dead, the file holds no pid, or (Linux) the pid now belongs to a program that is not a salt-master
 *   (a reused pid after a crash): the file is stale, taken over with a warning.
 * Salt itself only checked and overwrote (a second master started beside the first). A directory or file this
 * user cannot create is logged as a warning and the master runs without a pidfile, as Salt does.
 */
import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from "node:fs";
import path from "node:path";
import type { MasterConfig } from "../shared/config/defaults.js";
import { optionDefault } from "../shared/config/options.js";
import { prependRoot } from "../shared/config/load.js";
import { BrineError } from "../shared/errors.js";
import { getLogger } from "../shared/log.js";

const log = getLogger("brine.pidfile");

export const PIDFILE_DEFAULT = optionDefault("pidfile") as string; // declared in src/shared/config/schema.ts
/** attempts to take a stale pidfile over while other masters race for it */
const takeoverAttempts = 5;

/** The pidfile path: `override` (the CLI's --pid-file) or `pidfile` (a non-empty string; root_dir applies). */
export function pidfilePath(cfg: MasterConfig, override?: string): string {
  if (override) return path.resolve(override);
  const v: unknown = (cfg as unknown as Record<string, unknown>).pidfile;
  if (v === undefined || v === null) return prependRoot(cfg.root_dir, PIDFILE_DEFAULT);
  if (typeof v !== "string" || v === "") throw new BrineError("CONFIG_INVALID", "pidfile: must be a file path");
  return prependRoot(cfg.root_dir, path.resolve(v));
}

/** Whether `pid` runs a process (EPERM: it does, as another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Linux: whether `pid` runs a salt-master (brine's or Salt's); elsewhere, or unreadable: assumed so. */
function looksLikeMaster(pid: number): boolean {
  let cmd: string;
  try {
    cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return true;
  }
  return /salt-master/.test(cmd);
}

function readPid(file: string): number | null {
  try {
    const n = Number.parseInt(readFileSync(file, "utf8").trim(), 10);
    return Number.isSafeInteger(n) && n > 0 ? n : null;
  } catch {
    return null;
  }
}

export interface PidfileHold {
  /** the file, or null when it could not be written (the master runs without one) */
  path: string | null;
  /** removes the file if it still names this process */
  release(): void;
}

/** Creates and holds `file` for `pid`, or throws PIDFILE_LOCKED when a running master holds it. */
export function acquirePidfile(file: string, pid = process.pid): PidfileHold {
  try {
    mkdirSync(path.dirname(file), { recursive: true });
  } catch (e) {
    log.warning(`pidfile ${file}: cannot create its directory (${(e as Error).message}); running without a pidfile`);
    return { path: null, release: () => {} };
  }
  for (let attempt = 0; attempt < takeoverAttempts; attempt++) {
    let fd: number;
    try {
      fd = openSync(file, "wx", 0o644);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== "EEXIST") {
        log.warning(`pidfile ${file}: cannot write it (${(e as Error).message}); running without a pidfile`);
        return { path: null, release: () => {} };
      }
      const held = readPid(file);
      if (held !== null && held !== pid && alive(held) && looksLikeMaster(held)) {
        throw new BrineError("PIDFILE_LOCKED", `${file} names pid ${held}, a salt-master that is running: this master does not start (stop that one, or give this one another pidfile)`);
      }
      const why = held === null ? "it holds no pid" : held === pid ? "it names this process" : alive(held) ? `pid ${held} is no salt-master` : `pid ${held} is not running`;
      log.warning(`pidfile ${file} is stale (${why}); taking it over`);
      try {
        unlinkSync(file);
      } catch {
        // another master removed it first: try again
      }
      continue;
    }
    try {
      writeSync(fd, `${pid}\n`);
    } finally {
      closeSync(fd);
    }
    log.debug(`pidfile ${file} written (pid ${pid})`);
    return {
      path: file,
      release: () => {
        if (readPid(file) !== pid) return;
        try {
          unlinkSync(file);
        } catch {
          // already gone
        }
      },
    };
  }
  throw new BrineError("PIDFILE_LOCKED", `${file}: other masters keep taking it over; not starting`);
}
