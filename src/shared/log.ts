/**
 * Logging in Salt's style: `2026-11-21 16:12:31,123 [brine.auth       :  ][INFO    ][1234] message`,
 * with Salt's level names (garbage, trace, debug, info, warning, error, critical, quiet).
 * Every thread logs through its own writer to the same file: one write(2) per line on a descriptor opened for
 * appending (O_APPEND: lines from several threads and processes never interleave), made before the call
 * returns, so a line logged just before the process exits is on disk (no stream buffer to lose). The
 * console copy goes to stderr. (This was winston: its packages cost every thread about 60 ms of CPU to
 * load at each start, for a level check and two writes.)
 *
 * One record is one line: control characters in a message (a newline in a minion id or an event tag, an
 * escape sequence, a stack trace's line breaks) are written escaped (`\n`, `\x1b`, `\u2028`), so nothing a
 * minion or a client sends can forge a log line or drive the terminal that reads the log.
 */
import { closeSync, mkdirSync, openSync, writeSync } from "node:fs";
import path from "node:path";
import { threadId } from "node:worker_threads";

export const SALT_LEVELS = { quiet: 0, critical: 1, error: 2, warning: 3, info: 4, profile: 5, debug: 6, trace: 7, garbage: 8, all: 9 } as const;
export type SaltLevel = keyof typeof SALT_LEVELS;

export interface LogConfig {
  level: string;
  file?: string | null;
  fileLevel?: string | null;
}

function normalize(level: string | null | undefined, fallback: SaltLevel): SaltLevel {
  const l = String(level ?? "").toLowerCase();
  if (l === "warn") return "warning";
  return l in SALT_LEVELS ? (l as SaltLevel) : fallback;
}

function stamp(d: Date): string {
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())},${p(d.getMilliseconds(), 3)}`;
}

/** C0 and C1 controls, DEL and the Unicode line/paragraph separators: what could end or forge a line. */
const LINE_BREAKERS = /[\x00-\x1f\x7f-\x9f\u2028\u2029]/g;
const NAMED_ESCAPES: Record<string, string> = { "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/** `text` as one log line: every character LINE_BREAKERS matches written as an escape. */
export function escapeLogText(text: string): string {
  LINE_BREAKERS.lastIndex = 0;
  if (!LINE_BREAKERS.test(text)) return text;
  return text.replace(LINE_BREAKERS, (c) => {
    const named = NAMED_ESCAPES[c];
    if (named) return named;
    const code = c.charCodeAt(0);
    return code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

function formatLine(level: SaltLevel, name: string, message: string): string {
  const n = name.padEnd(17).slice(0, 17);
  const lvl = level.toUpperCase().padEnd(8);
  return `${stamp(new Date())} [${n}][${lvl}][${process.pid}${threadId ? `:${threadId}` : ""}] ${escapeLogText(message)}\n`;
}

/** Where lines go: the console's level, and the log file's descriptor and level (none: no file). */
interface Sinks {
  console: number;
  file: { fd: number; level: number } | undefined;
}
let sinks: Sinks | undefined;
let current: LogConfig = { level: "warning" };
/** The most verbose level any sink writes: a call above it returns before a line nobody keeps is formatted. */
let maxLevel: number = SALT_LEVELS.warning;

export function configureLogging(cfg: LogConfig): void {
  current = cfg;
  const next: Sinks = { console: SALT_LEVELS[normalize(cfg.level, "warning")], file: undefined };
  if (cfg.file) {
    try {
      mkdirSync(path.dirname(cfg.file), { recursive: true });
      next.file = { fd: openSync(cfg.file, "a"), level: SALT_LEVELS[normalize(cfg.fileLevel ?? cfg.level, "warning")] };
    } catch {
      // an unwritable log directory must not stop the master; the console still gets everything
    }
  }
  if (sinks?.file) closeSync(sinks.file.fd);
  sinks = next;
  maxLevel = Math.max(next.console, next.file?.level ?? SALT_LEVELS.quiet);
}

function write(rank: number, level: SaltLevel, name: string, message: string): void {
  const s = sinks!;
  const text = formatLine(level, name, message);
  if (rank <= s.console) process.stderr.write(text);
  if (s.file && rank <= s.file.level) {
    try {
      writeSync(s.file.fd, text);
    } catch {
      // a full or vanished disk must not stop the master; the console copy (when its level lets it) still goes
    }
  }
}

export function loggingConfig(): LogConfig {
  return current;
}

export interface Logger {
  critical(msg: string): void;
  error(msg: string): void;
  warning(msg: string): void;
  info(msg: string): void;
  debug(msg: string): void;
  trace(msg: string): void;
}

/** A named logger; cheap to create, resolves the root lazily so modules can log before configuration. */
export function getLogger(name: string): Logger {
  const at = (level: SaltLevel) => {
    const rank = SALT_LEVELS[level];
    return (msg: string) => {
      if (!sinks) configureLogging(current);
      if (rank > maxLevel) return;
      write(rank, level, name, msg);
    };
  };
  return { critical: at("critical"), error: at("error"), warning: at("warning"), info: at("info"), debug: at("debug"), trace: at("trace") };
}
