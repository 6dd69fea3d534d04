/**
 * The authorization options brine reads, with Salt's names and defaults (salt/config DEFAULT_MASTER_OPTS),
 * checked once at start: a bad value stops the start naming the option. Types, bounds and defaults are
 * declared in src/shared/config/schema.ts; the shape checks of the ACL mappings stay here.
 */
import type { MasterConfig } from "../../shared/config/defaults.js";
import { optionBounds, readOption } from "../../shared/config/options.js";
import { BrineError } from "../../shared/errors.js";

export interface AuthOptions {
  /** backend → {user|glob|regex|group%|* → entries} */
  external_auth: Record<string, Record<string, unknown>>;
  /** seconds a token lives (Salt: 43200) */
  token_expire: number;
  /** true, or {backend: [users]} allowed to ask for their own token_expire */
  token_expire_user_override: boolean | Record<string, string[]>;
  keep_acl_in_token: boolean;
  /** `*` entries apply even when a name matched */
  permissive_acl: boolean;
  /** local users of the `salt` CLI → entries */
  publisher_acl: Record<string, unknown>;
  /** sudo_<user> publishes are limited by publisher_acl */
  sudo_acl: boolean;
  /** the backend whose `acl` gives every user's list (Salt's eauth_acl_module), "" for each user's own */
  eauth_acl_module: string;
  /** failed logins per (user, source) within brine_eauth_fail_window_s before further attempts are refused */
  brine_eauth_fail_max: number;
  brine_eauth_fail_window_s: number;
}

/** the longest life a token may have, s: the bound of `token_expire` and of a user's own (peers refuse longer) */
export const tokenExpireSMax = optionBounds("token_expire").max;

function isPlainMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function bad(option: string, why: string): never {
  throw new BrineError("CONFIG_INVALID", `${option}: ${why}`);
}

export function authOptions(cfg: MasterConfig): AuthOptions {
  const ea = cfg.external_auth ?? {};
  if (!isPlainMap(ea)) bad("external_auth", "must be a mapping of backend names to user mappings");
  for (const [backend, users] of Object.entries(ea)) {
    if (users !== null && !isPlainMap(users)) bad("external_auth", `${backend}: must be a mapping of users to permission lists`);
  }
  const override = cfg.token_expire_user_override ?? false;
  if (typeof override !== "boolean" && !isPlainMap(override)) bad("token_expire_user_override", "must be True/False or a mapping of backends to user lists");
  const pacl = cfg.publisher_acl ?? {};
  if (!isPlainMap(pacl)) bad("publisher_acl", "must be a mapping of users to permission lists");
  const mod = cfg.eauth_acl_module ?? "";
  if (typeof mod !== "string") bad("eauth_acl_module", "must be a backend name");
  return {
    external_auth: Object.fromEntries(Object.entries(ea).map(([k, v]) => [k, (v ?? {}) as Record<string, unknown>])),
    token_expire: readOption(cfg, "token_expire"),
    token_expire_user_override: override as AuthOptions["token_expire_user_override"],
    keep_acl_in_token: readOption(cfg, "keep_acl_in_token"),
    permissive_acl: readOption(cfg, "permissive_acl"),
    publisher_acl: pacl,
    sudo_acl: readOption(cfg, "sudo_acl"),
    eauth_acl_module: mod,
    brine_eauth_fail_max: readOption(cfg, "brine_eauth_fail_max"),
    brine_eauth_fail_window_s: readOption(cfg, "brine_eauth_fail_window_s"),
  };
}
