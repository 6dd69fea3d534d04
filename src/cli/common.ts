/** Pieces shared by brine's Salt-compatible command lines. */
import { loadMasterConfig } from "../shared/config/load.js";
import type { MasterConfig } from "../shared/config/defaults.js";
import { configureLogging } from "../shared/log.js";
import { exitEvenWithThreadsLeft } from "../shared/thread-kit.js";
import { isBrineError } from "../shared/errors.js";

export const DEFAULT_CONFIG_DIR = "/etc/salt";

/** The configuration's warnings (unknown or unimplemented options), kept for the caller to log once logging is set up. */
export const configWarnings: string[] = [];

export function loadConfigOrExit(dir: string, overrides: Partial<MasterConfig> = {}): MasterConfig {
  try {
    return loadMasterConfig(dir, overrides, { warn: (m) => configWarnings.push(m) });
  } catch (e) {
    process.stderr.write(`Error: ${isBrineError(e) ? e.message : (e as Error).message}\n`);
    process.exit(2);
  }
}

export function setupCliLogging(level: string | undefined): void {
  configureLogging({ level: level ?? "warning" });
  quietOnClosedOutput();
}

/**
 * Exit with `code` once everything written to stdout and stderr has been taken by them. On Linux a pipe is
 * written asynchronously: process.exit() right after a large write drops all but the first 64 KiB or so that
 * the pipe took (`salt-run jobs.lookup_jid J | wc -c`), with exit status 0. A write's callback runs once the
 * bytes before it have gone, so an empty write after the output says when.
 */
export function exitWith(code: number): Promise<never> {
  process.exitCode = code;
  const flushed = (s: NodeJS.WriteStream) =>
    new Promise<void>((resolve) => {
      if (s.destroyed || !s.writable || s.writableLength === 0) return resolve();
      s.write("", () => resolve());
    });
  return Promise.all([flushed(process.stdout), flushed(process.stderr)]).then(() => process.exit(code));
}

/**
 * A reader that goes away (`salt ... | head -1`: EPIPE on stdout) ends the command quietly, as Salt's do, instead
 * of with an unhandled 'error' event and a stack trace.
 */
export function quietOnClosedOutput(): void {
  for (const s of [process.stdout, process.stderr]) {
    s.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "EPIPE" || e.code === "ERR_STREAM_DESTROYED") process.exit(process.exitCode ?? 0);
      throw e;
    });
  }
}

/**
 * The target type of Salt's target options (-E, -L, -G, ...): `flags` pairs commander's option name with
 * Salt's tgt_type. Two at once is Salt's parser error (exit 2); none is undefined (glob).
 */
export function targetTypeOf(prog: string, o: Record<string, unknown>, flags: [string, string][]): string | undefined {
  const chosen = flags.filter(([k]) => o[k]);
  if (chosen.length > 1) {
    const names = chosen.map(([k]) => "--" + k.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())).join("/");
    process.stderr.write(`${prog}: error: The options ${names} are mutually exclusive. Please only choose one of them\n`);
    process.exit(2);
  }
  return chosen[0]?.[1];
}

/** A -L target as Salt's CLIs split it: on commas when there is one, else on spaces. */
export function listTarget(raw: string): string[] {
  return raw.includes(",") ? raw.replaceAll(" ", "").split(",") : raw.split(/\s+/).filter(Boolean);
}

/**
 * A daemon's SIGTERM/SIGINT: log once, run `stop` (the first signal only), then `release` (the pidfile) and
 * exit 0, whether or not `stop` failed.
 */
export function stopOnSignals(log: { warning(m: string): void }, stop: () => Promise<void>, release: () => void): void {
  let stopping = false;
  const onSignal = async (sig: string) => {
    if (stopping) return;
    stopping = true;
    log.warning(`received ${sig}, shutting down`);
    try {
      await stop();
    } finally {
      release();
      exitEvenWithThreadsLeft(0);
    }
  };
  process.on("SIGTERM", () => void onSignal("SIGTERM"));
  process.on("SIGINT", () => void onSignal("SIGINT"));
}
