/**
 * Salt's wheel `config` module: `config.values`, the master's options. Salt returns everything it read
 * (passwords and all); brine returns the running master's options with secrets taken out, at any depth:
 *
 * - `external_auth` as a whole (who may do what is not for every wheel caller to read);
 * - any option whose name has a secret word as one of its `_`/`.`/`-` separated parts: password, passwd,
 *   passphrase, pass, pw, bindpw, secret(s), sharedsecret, token(s), credential(s), creds, apikey, privkey,
 *   private, priv, cookie, hmac, or a `<api|secret|private|access|auth|session|
 *   aes|encryption|signing>_key` pair; except the non-secret settings in NOT_SECRET (token_expire, ...);
 * - any string holding PEM text ("-----BEGIN"), whatever its option's name.
 *
 * Removed options are left out (not masked), so a caller cannot tell a secret's length.
 */
import type { MasterConfig } from "../../shared/config/defaults.js";
import { wheelModule } from "./define.js";

const SECRET_WORDS = new Set([
  "password", "passwd", "passphrase", "pass", "pw", "bindpw", "secret", "secrets", "sharedsecret", "token", "tokens",
  "credential", "credentials", "creds", "apikey", "privkey", "private", "priv", "cookie", "hmac",
]);
const SECRET_KEY_PAIR = /(^|[_.-])(api|secret|private|access|auth|session|aes|encryption|signing)[_.-]?keys?($|[_.-])/i;
/** Options whose names contain a secret word but hold none. */
const NOT_SECRET = new Set(["token_expire", "token_expire_user_override", "keep_acl_in_token", "eauth_tokens", "token_dir", "rotate_aes_key"]);
/** Whole subtrees never returned. */
const DROPPED = new Set(["external_auth"]);

export function isSecretOption(name: string): boolean {
  if (DROPPED.has(name)) return true;
  if (NOT_SECRET.has(name)) return false;
  if (name.split(/[^A-Za-z0-9]+/).some((w) => SECRET_WORDS.has(w.toLowerCase()))) return true;
  return SECRET_KEY_PAIR.test(name);
}

function holdsPem(v: unknown): boolean {
  return typeof v === "string" && v.includes("-----BEGIN");
}

/** A copy of `v` without secret options (by name, at any depth) or PEM strings; depth-bounded against cycles. */
export function redactSecrets(v: unknown, depth = 0): unknown {
  if (depth > 64) return undefined;
  if (Array.isArray(v)) return v.filter((e) => !holdsPem(e)).map((e) => redactSecrets(e, depth + 1));
  if (typeof v === "object" && v !== null) {
    const kept: [string, unknown][] = [];
    for (const [k, e] of Object.entries(v as Record<string, unknown>)) {
      if (isSecretOption(k) || holdsPem(e) || typeof e === "function") continue;
      const r = redactSecrets(e, depth + 1);
      if (r !== undefined) kept.push([k, r]);
    }
    // fromEntries defines properties: an option named __proto__ stays an option
    return Object.fromEntries(kept);
  }
  return v;
}

export function configValues(cfg: MasterConfig): Record<string, unknown> {
  return redactSecrets(cfg) as Record<string, unknown>;
}

export const CONFIG_FUNCTIONS = wheelModule("config", {
  values: {
    params: [],
    run: (ctx) => configValues(ctx.cfg),
  },
});
