/** Shared by the eauth backend tests: a logger that keeps its lines, and a config with external_auth. */
import type { Logger } from "../../../src/shared/log.js";
import type { MasterConfig } from "../../../src/shared/config/defaults.js";

export interface CapturingLogger extends Logger {
  lines: { level: string; msg: string }[];
  /** the lines at `level` or above that contain `part` */
  saw(part: string | RegExp, level?: "warning" | "error" | "info" | "debug"): boolean;
  clear(): void;
}

const ORDER = ["critical", "error", "warning", "info", "debug", "trace"];

export function capturingLogger(): CapturingLogger {
  const lines: { level: string; msg: string }[] = [];
  const at = (level: string) => (msg: string) => void lines.push({ level, msg });
  return {
    lines,
    critical: at("critical"),
    error: at("error"),
    warning: at("warning"),
    info: at("info"),
    debug: at("debug"),
    trace: at("trace"),
    saw(part, level = "debug") {
      const max = ORDER.indexOf(level);
      return lines.some((l) => ORDER.indexOf(l.level) <= max && (typeof part === "string" ? l.msg.includes(part) : part.test(l.msg)));
    },
    clear() {
      lines.length = 0;
    },
  };
}

/** a configuration holding only what the backends read */
export function cfgWith(extra: Record<string, unknown>): MasterConfig {
  return extra as unknown as MasterConfig;
}

/** credentials no backend may accept, each with what it tests */
export const BAD_CREDENTIALS: { what: string; creds: any }[] = [
  { what: "an empty username", creds: { username: "", password: "x" } },
  { what: "a username that is not a string", creds: { username: 42, password: "x" } },
  { what: "a missing username", creds: { password: "x" } },
  { what: "a username with a NUL byte", creds: { username: "alice\u0000", password: "x" } },
  { what: "a username with a newline", creds: { username: "alice\nbob", password: "x" } },
  { what: "a username of 10000 characters", creds: { username: "a".repeat(10_000), password: "x" } },
  { what: "a password with a NUL byte", creds: { username: "alice", password: "secret\u0000more" } },
  { what: "a password that is not a string", creds: { username: "alice", password: { $ne: "" } } },
  { what: "a password of 5000 bytes", creds: { username: "alice", password: "p".repeat(5000) } },
  { what: "an empty password", creds: { username: "alice", password: "" } },
  { what: "no password", creds: { username: "alice" } },
];
