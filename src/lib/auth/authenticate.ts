/**
 * Who is asking, and with which rights (Salt's LoadAuth: check_authentication, mk_token, get_tok,
 * authenticate_key): the I/O half of authorization, run in a request worker. It asks a backend, the
 * token store or the CLI keys, and hands the pure ACL module (acl.ts) the user's auth list.
 *
 * Which credential counts (Salt's _prep_auth_info): `token` if present, else `eauth`, else the CLI key
 * (`key` + `user`). A request that carries `token` or `eauth` is judged by those alone: the key that may
 * come with it (salt-api always holds the root key) grants nothing.
 */
import { timingSafeEqual } from "node:crypto";
import type { EauthBackend, EauthCredentials } from "./backend.js";
import { fillAuthList, matchingKeyValues, type AuthList } from "./acl.js";
import { tokenExpireSMax, type AuthOptions } from "./options.js";
import { LoginThrottle } from "./throttle.js";
import type { TokenData, TokenStore } from "./tokens.js";
import { BrineError, isBrineError } from "../../shared/errors.js";

export type AuthKind = "token" | "eauth" | "user";

/** Salt's error names per credential kind (the `err_name` of _prep_auth_info). */
export const AUTH_ERROR_NAME: Record<AuthKind, string> = {
  token: "TokenAuthenticationError",
  eauth: "EauthAuthenticationError",
  user: "UserAuthenticationError",
};

/** Load keys that are credentials and never reach a job, an event or a log. */
export const SENSITIVE_KEYS = ["token", "username", "password", "key"] as const;

export interface SaltError {
  name: string;
  message: string;
}

export interface Authenticated {
  ok: true;
  kind: AuthKind;
  /** the effective user name (a token's name, the eauth username, the local user) */
  username: string;
  /** the backend (eauth name), or "key" for the CLI key */
  backend: string;
  /** `full`: the master's own user with its key (no ACL applies); else the user's auth list */
  rights: "full" | AuthList;
}

export interface Refused {
  ok: false;
  kind: AuthKind;
  username: string;
  backend: string;
  error: SaltError;
  /** why, for the audit line only (never sent to the client) */
  reason: string;
}

export type AuthOutcome = Authenticated | Refused;

export function credentialKind(load: Record<string, unknown>): AuthKind {
  if ("token" in load) return "token";
  if ("eauth" in load) return "eauth";
  return "user";
}

function str(v: unknown): string | undefined {
  return typeof v === "string" ? v : undefined;
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Longest username or password handed to a backend (bytes); longer is refused unasked. */
export const credentialBytesMax = 4096;

export interface AuthenticatorDeps {
  opts: AuthOptions;
  backends: ReadonlyMap<string, EauthBackend>;
  tokens: TokenStore;
  /** the CLI keys: local user → contents of `cachedir/.<user>_key` */
  cliKeys(): Record<string, string>;
  /** the user the master runs as (`user`, default root) */
  masterUser: string;
  nowMs(): number;
  warn(msg: string): void;
}

export class Authenticator {
  readonly throttle: LoginThrottle;

  constructor(private readonly d: AuthenticatorDeps) {
    this.throttle = new LoginThrottle({ failuresMax: d.opts.brine_eauth_fail_max, windowMs: d.opts.brine_eauth_fail_window_s * 1000, keysMax: 10_000 });
  }

  get opts(): AuthOptions {
    return this.d.opts;
  }

  get tokens(): TokenStore {
    return this.d.tokens;
  }

  /** Checks `eauth`, `username`, `password` against the backend; the reason when it says no. */
  async eauthValid(load: Record<string, unknown>, source?: string): Promise<{ ok: true; username: string; backend: EauthBackend; creds: EauthCredentials } | { ok: false; username: string; reason: string }> {
    const eauth = str(load.eauth) ?? "";
    const username = str(load.username) ?? "";
    const password = load.password === undefined ? undefined : str(load.password);
    if (!eauth) return { ok: false, username, reason: "no eauth backend named" };
    if (!Object.hasOwn(this.d.opts.external_auth, eauth)) return { ok: false, username, reason: `the eauth system "${eauth}" is not enabled in external_auth` };
    const backend = this.d.backends.get(eauth);
    if (!backend) return { ok: false, username, reason: `brine has no eauth backend "${eauth}"` };
    if (!username || Buffer.byteLength(username) > credentialBytesMax || username.includes("\0")) return { ok: false, username, reason: "empty, over-long or NUL-bearing username" };
    if (load.password !== undefined && (password === undefined || Buffer.byteLength(password) > credentialBytesMax || password.includes("\0"))) {
      return { ok: false, username, reason: "malformed password" };
    }
    const now = this.d.nowMs();
    const t = this.throttle.check(`${eauth}:${username}`, source, now);
    if (!t.ok) return { ok: false, username, reason: `throttled after repeated failures (retry in ${Math.ceil(t.retryAfterMs / 1000)} s)` };
    const creds: EauthCredentials = { username, password, load };
    let valid = false;
    try {
      valid = (await backend.authenticate(creds)) === true;
    } catch (e) {
      const why = isBrineError(e) ? e.message : `the ${eauth} backend failed: ${(e as Error)?.message ?? String(e)}`;
      this.throttle.failed(`${eauth}:${username}`, source, now);
      return { ok: false, username, reason: why };
    }
    if (!valid) {
      this.throttle.failed(`${eauth}:${username}`, source, now);
      return { ok: false, username, reason: "bad credentials" };
    }
    this.throttle.succeeded(`${eauth}:${username}`, source);
    return { ok: true, username, backend, creds };
  }

  private async groupsOf(backend: EauthBackend, creds: EauthCredentials): Promise<string[]> {
    if (!backend.groups) return [];
    try {
      const g = await backend.groups(creds);
      return Array.isArray(g) ? g.filter((x): x is string => typeof x === "string") : [];
    } catch (e) {
      this.d.warn(`eauth ${backend.name}: groups of ${JSON.stringify(creds.username)} could not be read: ${(e as Error)?.message ?? e}`);
      return [];
    }
  }

  /** Salt's get_auth_list for a freshly authenticated eauth user. */
  private async authListFor(backend: EauthBackend, creds: EauthCredentials, groups: string[]): Promise<AuthList> {
    const aclMod = this.d.opts.eauth_acl_module ? this.d.backends.get(this.d.opts.eauth_acl_module) : backend;
    if (aclMod?.acl) {
      try {
        const own = await aclMod.acl(creds);
        if (own !== undefined) return own;
      } catch (e) {
        this.d.warn(`eauth ${aclMod.name}: acl of ${JSON.stringify(creds.username)} failed: ${(e as Error)?.message ?? e}`);
        return [];
      }
    }
    let list = fillAuthList(this.d.opts.external_auth[backend.name], creds.username, groups, this.d.opts.permissive_acl);
    if (backend.processAcl) {
      try {
        list = await backend.processAcl(list);
      } catch (e) {
        this.d.warn(`eauth ${backend.name}: process_acl failed: ${(e as Error)?.message ?? e}`);
      }
    }
    return list;
  }

  /**
   * Salt's check_authentication for one credential kind. `load` holds the credentials: the clear load
   * for runner/wheel, the publish's `kwargs` for token/eauth publishes, the clear load for key publishes.
   */
  async authenticate(load: Record<string, unknown>, kind: AuthKind, source?: string): Promise<AuthOutcome> {
    if (kind === "token") {
      const tok = await this.d.tokens.get(load.token);
      if (!tok) return this.refuse(kind, "UNKNOWN", "token", "unknown, malformed or expired token");
      if (!Object.hasOwn(this.d.opts.external_auth, tok.eauth)) return this.refuse(kind, tok.name, tok.eauth, `the token's eauth system "${tok.eauth}" is no longer enabled`);
      return { ok: true, kind, username: tok.name, backend: tok.eauth, rights: this.tokenAuthList(tok) };
    }
    if (kind === "eauth") {
      const v = await this.eauthValid(load, source);
      if (!v.ok) return this.refuse(kind, v.username || "UNKNOWN", str(load.eauth) ?? "", v.reason);
      const groups = await this.groupsOf(v.backend, v.creds);
      return { ok: true, kind, username: v.username, backend: v.backend.name, rights: await this.authListFor(v.backend, v.creds, groups) };
    }
    return this.authenticateKey(load);
  }

  private tokenAuthList(tok: TokenData): AuthList {
    if (this.d.opts.keep_acl_in_token && Array.isArray(tok.auth_list)) return tok.auth_list;
    return fillAuthList(this.d.opts.external_auth[tok.eauth], tok.name, Array.isArray(tok.groups) ? tok.groups : [], this.d.opts.permissive_acl);
  }

  /** Salt's authenticate_key + the publisher_acl/sudo_acl half of check_authentication. */
  private authenticateKey(load: Record<string, unknown>): AuthOutcome {
    const given = str(load.key);
    const user = str(load.user);
    const keys = this.d.cliKeys();
    const matchesAny = given !== undefined && Object.values(keys).some((k) => sameText(given, k));
    const masterKey = keys[this.d.masterUser];
    const isMasterKey = given !== undefined && masterKey !== undefined && sameText(given, masterKey);
    const name = user ?? this.d.masterUser;
    if (given === undefined) return this.refuse("user", name, "key", "no key");
    if (user === undefined || user === this.d.masterUser || user === "root") {
      // Salt accepts ANY local user's key here, so a publisher_acl user who claims to be root gets full
      // rights; brine wants the master's (or root's) own key
      const rootKey = keys.root;
      return isMasterKey || (rootKey !== undefined && sameText(given, rootKey))
        ? { ok: true, kind: "user", username: name, backend: "key", rights: "full" }
        : this.refuse("user", name, "key", "wrong key");
    }
    if (user.startsWith("sudo_")) {
      if (!matchesAny) return this.refuse("user", name, "key", "wrong key");
      const sudoName = user.slice("sudo_".length);
      if (!this.d.opts.sudo_acl || Object.keys(this.d.opts.publisher_acl).length === 0) {
        return { ok: true, kind: "user", username: sudoName, backend: "key", rights: "full" };
      }
      const list = matchingKeyValues(this.d.opts.publisher_acl, sudoName);
      return list.length ? { ok: true, kind: "user", username: sudoName, backend: "key", rights: list } : this.refuse("user", name, "key", "no publisher_acl entry for the sudo user");
    }
    // the master's own key stands for any local user (Salt: `auth_key == key.get("root")`)
    if (isMasterKey) return { ok: true, kind: "user", username: name, backend: "key", rights: "full" };
    const own = keys[user];
    if (own === undefined || !sameText(given, own)) return this.refuse("user", name, "key", "wrong key for this local user");
    const list = matchingKeyValues(this.d.opts.publisher_acl, user);
    return list.length ? { ok: true, kind: "user", username: user, backend: "key", rights: list } : this.refuse("user", name, "key", "no publisher_acl entry for this user");
  }

  private refuse(kind: AuthKind, username: string, backend: string, reason: string): Refused {
    const message =
      kind === "token"
        ? 'Authentication failure of type "token" occurred.'
        : kind === "eauth"
          ? `Authentication failure of type "eauth" occurred for user ${username}.`
          : 'Authentication failure of type "user" occurred';
    return { ok: false, kind, username, backend, reason, error: { name: AUTH_ERROR_NAME[kind], message } };
  }

  /** Salt's mk_token: the token's data, or undefined when the credentials do not authenticate. */
  async mkToken(load: Record<string, unknown>, source?: string): Promise<{ token?: TokenData; username: string; reason?: string }> {
    const v = await this.eauthValid(load, source);
    if (!v.ok) return { username: v.username, reason: v.reason };
    const o = this.d.opts;
    let expire = o.token_expire;
    const override = o.token_expire_user_override;
    const mayOverride = override === true || (typeof override === "object" && Array.isArray(override[v.backend.name]) && override[v.backend.name]!.includes(v.username));
    if (mayOverride && load.token_expire !== undefined) {
      const asked = Number(load.token_expire);
      if (!Number.isFinite(asked) || asked <= 0 || asked > tokenExpireSMax) return { username: v.username, reason: `token_expire must be a number of seconds from 0 to ${tokenExpireSMax}` };
      expire = asked;
    }
    const groups = await this.groupsOf(v.backend, v.creds);
    const start = this.d.nowMs() / 1000;
    const data: Omit<TokenData, "token"> = { start, expire: start + expire, name: v.username, eauth: v.backend.name };
    if (groups.length) data.groups = groups;
    if (o.keep_acl_in_token) data.auth_list = await this.authListFor(v.backend, v.creds, groups);
    try {
      return { token: await this.d.tokens.create(data), username: v.username };
    } catch (e) {
      throw new BrineError("EAUTH_TOKEN_STORE", (e as Error).message);
    }
  }
}
