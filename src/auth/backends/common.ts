/**
 * What every eauth backend shares: the check of the credentials a client sent (before any backend looks
 * at them), a constant-time string comparison, and the typed readers of the backends' options.
 *
 * Credentials arrive from the network (clear loads, the HTTP API) as whatever msgpack or JSON carried, so
 * nothing here assumes a string. A refused credential is logged (one line, never the password) and
 * answered `undefined`; it is never thrown.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { BrineError } from "../../errors.js";
import type { MasterConfig } from "../../config/defaults.js";
import type { EauthCredentials } from "../backend.js";
import type { Logger } from "../../log.js";

/** longest username accepted, characters (LDAP, PAM and htpasswd names are far shorter in practice) */
export const USERNAME_CHARS_MAX = 256;
/** longest password accepted, UTF-8 bytes: passlib's MAX_PASSWORD_SIZE, which Salt's file eauth inherits */
export const PASSWORD_BYTES_MAX = 4096;

export interface CheckedCredentials {
  username: string;
  password: string;
}

export interface CredentialRules {
  /** the backend accepts an empty or absent password (only `auto`) */
  emptyPasswordOk?: boolean;
  /** a tighter bound than PASSWORD_BYTES_MAX (pam: what the helper reads in one line) */
  passwordBytesMax?: number;
  /** characters refused in the password besides NUL (pam: line ends, which would end the helper's read) */
  passwordForbidden?: RegExp;
  /** an extra rule for the username (pam: no leading "-", which the helper would read as an option) */
  usernamePattern?: RegExp;
}

/** printable form of a username for a log line: control characters escaped, long names cut */
export function shown(v: unknown): string {
  if (typeof v !== "string") return `<${v === null ? "null" : typeof v}>`;
  const cut = v.length > 64 ? `${v.slice(0, 64)}…` : v;
  return JSON.stringify(cut);
}

/**
 * The credentials as strings both, or undefined (logged) when they cannot be valid for any backend:
 * a username that is not a non-empty string without control characters, a password that is not a
 * string, is empty (unless the backend allows it), too long, or holds NUL.
 */
export function checkCredentials(backend: string, creds: EauthCredentials, log: Logger, rules: CredentialRules = {}): CheckedCredentials | undefined {
  const refuse = (why: string): undefined => {
    log.warning(`eauth ${backend}: refused user ${shown(creds?.username)}: ${why}`);
    return undefined;
  };
  const username = checkUsername(backend, creds?.username, log, rules);
  if (username === undefined) return undefined;
  const password = creds.password ?? "";
  if (typeof password !== "string") return refuse("password is not a string");
  if (password.length === 0 && !rules.emptyPasswordOk) return refuse("empty password");
  const max = rules.passwordBytesMax ?? PASSWORD_BYTES_MAX;
  if (Buffer.byteLength(password, "utf8") > max) return refuse(`password longer than ${max} bytes`);
  if (password.includes("\u0000")) return refuse("password holds a NUL byte");
  if (rules.passwordForbidden && rules.passwordForbidden.test(password)) return refuse("password holds characters this backend cannot pass on");
  return { username, password };
}

/** the username when it is a non-empty string without control characters (and fits `rules`), else undefined (logged) */
export function checkUsername(backend: string, username: unknown, log: Logger, rules: CredentialRules = {}): string | undefined {
  const refuse = (why: string): undefined => {
    log.warning(`eauth ${backend}: refused user ${shown(username)}: ${why}`);
    return undefined;
  };
  if (typeof username !== "string") return refuse("username is not a string");
  if (username.length === 0) return refuse("empty username");
  if (username.length > USERNAME_CHARS_MAX) return refuse(`username longer than ${USERNAME_CHARS_MAX} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(username)) return refuse("username holds control characters");
  if (rules.usernamePattern && !rules.usernamePattern.test(username)) return refuse("username has a form this backend cannot pass on safely");
  return username;
}

/**
 * a === b in time that depends on neither content nor length: both sides are hashed first, so the
 * comparison is always of 32 bytes.
 */
export function safeEqual(a: string | Buffer, b: string | Buffer): boolean {
  const ha = createHash("sha256").update(a).digest();
  const hb = createHash("sha256").update(b).digest();
  return timingSafeEqual(ha, hb);
}

/**
 * Typed reads of one backend's options, each failing with BrineError("CONFIG_INVALID", "<option>: <why>").
 * `get` says where an option lives (top-level `auth.ldap.port`, or `external_auth: file: ^filename`).
 */
export class OptionReader {
  constructor(private readonly get: (name: string) => unknown) {}

  static top(cfg: MasterConfig): OptionReader {
    return new OptionReader((name) => (cfg as Record<string, unknown>)[name]);
  }

  raw(name: string): unknown {
    return this.get(name);
  }

  has(name: string): boolean {
    const v = this.get(name);
    return v !== undefined && v !== null;
  }

  bad(name: string, why: string): BrineError {
    return new BrineError("CONFIG_INVALID", `${name}: ${why}`);
  }

  string(name: string, dflt: string): string;
  string(name: string, dflt?: string): string | undefined;
  string(name: string, dflt?: string): string | undefined {
    const v = this.get(name);
    if (v === undefined || v === null) return dflt;
    if (typeof v === "number") return String(v);
    if (typeof v !== "string") throw this.bad(name, `must be a string, got ${typeof v}`);
    return v;
  }

  required(name: string, why: string): string {
    const v = this.string(name);
    if (v === undefined || v === "") throw this.bad(name, `required ${why}`);
    return v;
  }

  bool(name: string, dflt: boolean): boolean {
    const v = this.get(name);
    if (v === undefined || v === null) return dflt;
    if (typeof v === "boolean") return v;
    // Salt reads these with Python truthiness from YAML; a quoted "True"/"False" is common in the wild
    if (typeof v === "string" && /^(true|yes|on|1)$/i.test(v)) return true;
    if (typeof v === "string" && /^(false|no|off|0|)$/i.test(v)) return false;
    if (v === 0 || v === 1) return v === 1;
    throw this.bad(name, `must be true or false, got ${JSON.stringify(v)}`);
  }

  int(name: string, dflt: number, min: number, max: number): number {
    const v = this.get(name);
    if (v === undefined || v === null) return dflt;
    const n = typeof v === "string" && /^\s*-?\d+\s*$/.test(v) ? Number(v) : v;
    if (typeof n !== "number" || !Number.isInteger(n)) throw this.bad(name, `must be an integer, got ${JSON.stringify(v)}`);
    if (n < min || n > max) throw this.bad(name, `must be between ${min} and ${max}, got ${n}`);
    return n;
  }

  /** seconds (integer or fractional) as milliseconds */
  seconds(name: string, dfltSeconds: number, minSeconds: number, maxSeconds: number): number {
    const v = this.get(name);
    if (v === undefined || v === null) return dfltSeconds * 1000;
    const n = typeof v === "string" && v.trim() !== "" ? Number(v) : v;
    if (typeof n !== "number" || !Number.isFinite(n) || n < minSeconds || n > maxSeconds) {
      throw this.bad(name, `must be a number of seconds between ${minSeconds} and ${maxSeconds}, got ${JSON.stringify(v)}`);
    }
    return Math.round(n * 1000);
  }

  oneOf<T extends string>(name: string, dflt: T, allowed: readonly T[]): T {
    const v = this.string(name, dflt).toLowerCase();
    if (!(allowed as readonly string[]).includes(v)) throw this.bad(name, `must be one of ${allowed.join(", ")}, got ${JSON.stringify(v)}`);
    return v as T;
  }

  stringList(name: string): string[] {
    const v = this.get(name);
    if (v === undefined || v === null) return [];
    if (typeof v === "string") return [v];
    if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) throw this.bad(name, "must be a list of strings");
    return v as string[];
  }
}

/** the `external_auth` mapping of the configuration (empty when absent or not a mapping) */
export function externalAuth(cfg: MasterConfig): Record<string, unknown> {
  const ea = (cfg as Record<string, unknown>).external_auth;
  return ea && typeof ea === "object" && !Array.isArray(ea) ? (ea as Record<string, unknown>) : {};
}

/**
 * At most `runningMax` calls at once, at most `waitingMax` more waiting their turn; a call beyond that is
 * refused at once with BrineError("EAUTH_BACKEND") (a flood of logins must not fork without bound).
 */
export class Gate {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly what: string, private readonly runningMax: number, private readonly waitingMax: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.running >= this.runningMax) {
      if (this.waiting.length >= this.waitingMax) {
        throw new BrineError("EAUTH_BACKEND", `${this.what}: ${this.runningMax} checks running and ${this.waitingMax} waiting, refused`);
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else {
      this.running++;
    }
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next(); // the slot passes straight to the next waiter
      else this.running--;
    }
  }
}
