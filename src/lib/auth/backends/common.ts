/**
 * What every eauth backend shares: the check of the credentials a client sent (before any backend looks
 * at them), a constant-time string comparison, and the typed readers of the backends' options.
 *
 * Credentials arrive from the network (clear loads, the HTTP API) as whatever msgpack or JSON carried, so
 * nothing here assumes a string. A refused credential is logged (one line, never the password) and
 * answered `undefined`; it is never thrown.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { BrineError } from "../../../shared/errors.js";
import type { TSchema } from "@sinclair/typebox";
import type { MasterConfig } from "../../../shared/config/defaults.js";
import { checkOption } from "../../../shared/config/options.js";
import { optionSchema } from "../../../shared/config/schema.js";
import type { EauthCredentials } from "../backend.js";
import type { Logger } from "../../../shared/log.js";

/** longest username accepted, characters (LDAP, PAM and htpasswd names are far shorter in practice) */
export const usernameCharsMax = 256;
/** longest password accepted, UTF-8 bytes: passlib's MAX_PASSWORD_SIZE, which Salt's file eauth inherits */
export const passwordBytesMax = 4096;

export interface CheckedCredentials {
  username: string;
  password: string;
}

export interface CredentialRules {
  /** the backend accepts an empty or absent password (only `auto`) */
  emptyPasswordOk?: boolean;
  /** a tighter bound than passwordBytesMax (pam: what the helper reads in one line) */
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
  const max = rules.passwordBytesMax ?? passwordBytesMax;
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
  if (username.length > usernameCharsMax) return refuse(`username longer than ${usernameCharsMax} characters`);
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
 * `get` says where an option lives (top-level `auth.ldap.port`, or `external_auth: file: ^filename`);
 * `schemaOf` where it is declared: type, bounds and default come from src/shared/config/schema.ts and values are
 * checked and coerced by its checkOption, the same rules the configuration loader applies.
 */
export class OptionReader {
  constructor(
    private readonly get: (name: string) => unknown,
    private readonly schemaOf: (name: string) => TSchema | undefined = optionSchema,
  ) {}

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

  private schema(name: string): TSchema {
    const s = this.schemaOf(name);
    if (!s) throw new BrineError("CONFIG_UNDECLARED", `option ${name} is read but not declared in src/shared/config/schema.ts`);
    return s;
  }

  /** the value checked against the declared schema; the declared default (maybe undefined) when absent */
  private value(name: string, v: unknown = this.get(name)): unknown {
    const s = this.schema(name);
    if (v === undefined || v === null) return (s as { default?: unknown }).default;
    return checkOption(name, s, v);
  }

  /** a string option (undefined when absent and it has no default) */
  string(name: string): string | undefined {
    return this.value(name) as string | undefined;
  }

  /** a string option that has a declared default */
  stringOrDefault(name: string): string {
    const v = this.value(name);
    if (typeof v !== "string") throw new BrineError("CONFIG_UNDECLARED", `option ${name} has no declared default`);
    return v;
  }

  required(name: string, why: string): string {
    const v = this.string(name);
    if (v === undefined || v === "") throw this.bad(name, `required ${why}`);
    return v;
  }

  bool(name: string): boolean {
    return this.value(name) as boolean;
  }

  int(name: string): number {
    return this.value(name) as number;
  }

  /** a duration option declared in seconds (integer or fractional), as milliseconds */
  seconds(name: string): number {
    return Math.round((this.value(name) as number) * 1000);
  }

  /** one of the declared literal values, compared without case */
  oneOf<T extends string>(name: string): T {
    const v = this.get(name);
    return this.value(name, typeof v === "string" ? v.toLowerCase() : v) as T;
  }

  stringList(name: string): string[] {
    return (this.value(name) as string[] | undefined) ?? [];
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
