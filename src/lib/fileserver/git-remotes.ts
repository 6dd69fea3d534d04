/**
 * gitfs and git_pillar remotes as Salt 3007 reads them (salt/utils/gitfs.py GitBase.init_remotes,
 * GitProvider.__init__): a remote is a URL string, or a one-key mapping `{URL: [{param: value}, …]}` with
 * per-remote parameters; global defaults come from `gitfs_<param>` / `git_pillar_<param>`. git_pillar
 * remotes are `"<branch> <url>"` (`__env__` as the branch follows the minion's pillarenv/saltenv).
 *
 * Implemented parameters: gitfs `base`, `root`, `mountpoint`, `ref_types` (branch, tag), `refspecs`,
 * `ssl_verify`, `saltenv_whitelist`, `saltenv_blacklist`, `disable_saltenv_mapping`, `update_interval`,
 * `name`, `saltenv` (per-saltenv `ref`, `root`, `mountpoint`; also the global `gitfs_saltenv`), `fallback`,
 * `all_saltenvs`; git_pillar `base`, `env`, `root`, `ssl_verify`, `refspecs`, `name`, `fallback`,
 * `all_saltenvs` and the global `git_pillar_branch`. Not implemented (logged as such when set, then
 * ignored): git_pillar `mountpoint`, environments named by a commit id (ref type `sha`). The authentication parameters (`user`,
 * `password`, `pubkey`, `privkey`, `passphrase`, `insecure_auth`) belong to Salt's pygit2 provider only;
 * brine's git CLI takes credentials from the URL, the master user's SSH keys or a git credential helper,
 * so they are a configuration error here as they are for Salt's GitPython provider.
 *
 * Errors follow Salt's failhard: an invalid parameter or conflicting cache directories disable the whole
 * role (every error logged critical); a URL that is not http(s)/ssh/ftp/sftp/file is dropped with a warning.
 */
import { createHash } from "node:crypto";
import path from "node:path";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { fnmatch } from "../targeting/fnmatch.js";

export type GitRole = "gitfs" | "git_pillar";

export interface PerSaltenv {
  ref?: string;
  root?: string;
  mountpoint?: string;
}

export interface GitRemote {
  role: GitRole;
  /** the remote as configured (a mapping's key): what the cache directory name hashes */
  id: string;
  url: string;
  name?: string;
  /** git_pillar: the branch (`__env__`: the minion's environment) */
  branch?: string;
  /** git_pillar: the pillar environment of this remote (per-remote `env`) */
  env?: string;
  /** the branch or tag served when an environment's own is missing (`fallback`) */
  fallback?: string;
  /** the branch or tag served for every environment (`all_saltenvs`) */
  allSaltenvs?: string;
  base: string;
  root: string;
  mountpoint: string;
  refTypes: string[];
  refspecs: string[];
  sslVerify: boolean;
  disableSaltenvMapping: boolean;
  whitelist: string[];
  blacklist: string[];
  updateIntervalS: number;
  /** env → per-saltenv settings (per-remote `saltenv` over the global `gitfs_saltenv`) */
  saltenv: Record<string, PerSaltenv>;
  /** ref → the environments mapped to it by `saltenv` (Salt's saltenv_revmap) */
  revmap: Record<string, string[]>;
  /** `cachedir/<role>/<hash>`: Salt's layout; the clone is its `_` subdirectory */
  hashDir: string;
  gitDir: string;
}

const SCHEMES = ["http", "https", "ssh", "ftp", "sftp", "file"];
const URL_CHARS = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]+$/;
const PCHAR = /^([a-z0-9\-._~!$&'();=:@,]|%\d\d)+$/i;

export const GITFS_OVERRIDES = ["base", "fallback", "mountpoint", "root", "ssl_verify", "saltenv_whitelist", "saltenv_blacklist", "refspecs", "disable_saltenv_mapping", "ref_types", "update_interval"];
export const GITFS_ONLY = ["all_saltenvs", "name", "saltenv"];
export const PILLAR_OVERRIDES = ["base", "env", "root", "ssl_verify", "refspecs", "fallback"];
export const PILLAR_ONLY = ["name", "mountpoint", "all_saltenvs"];
const AUTH_PARAMS = ["user", "password", "pubkey", "privkey", "passphrase", "insecure_auth"];
const DEFAULT_REFSPECS = ["+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"];

/** Salt's salt.utils.verify.url (after remote_to_url turns `user@host:path` into ssh://). */
export function validRemoteUrl(remote: string): boolean {
  const m = /^([^@:/]+)@([^:]+):(.+)$/.exec(remote);
  const url = m ? `ssh://${m[1]}@${m[2]}${m[3]!.startsWith("/") ? "" : "/"}${m[3]}` : remote;
  if (!URL_CHARS.test(url)) return false;
  const sm = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url);
  if (!sm || !SCHEMES.includes(sm[1]!.toLowerCase())) return false;
  let rest = url.slice(sm[0].length);
  if (rest.startsWith("//")) {
    rest = rest.slice(2);
    const slash = rest.indexOf("/");
    rest = slash < 0 ? "" : rest.slice(slash);
  }
  const p = rest.split(/[?#]/, 1)[0] ?? "";
  return p.split("/").every((part) => part === "" || PCHAR.test(part));
}

/** Salt's repack_dictlist: a list of one-key mappings (or a mapping) as one mapping. */
function repack(v: unknown): Record<string, unknown> | null {
  if (v && typeof v === "object" && !Array.isArray(v)) return { ...(v as Record<string, unknown>) };
  if (!Array.isArray(v)) return null;
  const out: Record<string, unknown> = {};
  for (const item of v) {
    if (!item || typeof item !== "object" || Array.isArray(item)) return null;
    Object.assign(out, item);
  }
  return out;
}

function stringList(v: unknown): string[] {
  if (Array.isArray(v)) return v.map(String);
  if (v === undefined || v === null || v === "") return [];
  return String(v)
    .split(",")
    .map((x) => x.trim());
}

/** salt.utils.url.strip_proto, then slashes off both ends. */
function stripMount(v: unknown): string {
  return String(v ?? "")
    .replace(/^salt:\/\//, "")
    .replace(/^\/+|\/+$/g, "");
}

const stripRoot = (v: unknown) => String(v ?? "").replace(/\/+$/, "");

function saltenvMap(v: unknown): Record<string, PerSaltenv> {
  const out: Record<string, PerSaltenv> = {};
  const m = repack(v);
  if (!m) return out;
  for (const [env, conf] of Object.entries(m)) {
    const c = repack(conf) ?? {};
    const e: PerSaltenv = {};
    if (c.ref !== undefined) e.ref = String(c.ref);
    if (c.root !== undefined) e.root = stripRoot(c.root);
    if (c.mountpoint !== undefined) e.mountpoint = stripMount(c.mountpoint);
    out[String(env)] = e;
  }
  return out;
}

export interface ParsedRemotes {
  remotes: GitRemote[];
  /** configuration errors: when any, the role is disabled (Salt's failhard) */
  errors: string[];
  warnings: string[];
}

/** The remotes of a role from their configured list (gitfs_remotes, or one git ext_pillar entry's list). */
export function parseRemotes(cfg: MasterConfig, role: GitRole, list: unknown): ParsedRemotes {
  const c = cfg as unknown as Record<string, unknown>;
  const errors: string[] = [];
  const warnings: string[] = [];
  const remotes: GitRemote[] = [];
  const overrides = role === "gitfs" ? GITFS_OVERRIDES : PILLAR_OVERRIDES;
  const only = role === "gitfs" ? GITFS_ONLY : PILLAR_ONLY;
  const g = (k: string, d: unknown) => (c[`${role}_${k}`] !== undefined ? c[`${role}_${k}`] : d);
  const globalSaltenv = role === "gitfs" ? saltenvMap(c.gitfs_saltenv) : {};
  const cachedir = typeof cfg.cachedir === "string" ? cfg.cachedir : "/var/cache/salt/master";
  const hashType = typeof cfg.hash_type === "string" ? cfg.hash_type : "sha256";
  for (const k of ["user", "password", "pubkey", "privkey", "passphrase"]) {
    if (c[`${role}_${k}`]) errors.push(`${role} authentication was configured (${role}_${k}), but brine's git provider (the git command line) does not support it: put credentials in the URL, use the master user's SSH key or a git credential helper`);
  }
  const items = Array.isArray(list) ? list : [];
  for (const item of items) {
    let id: string;
    let conf: Record<string, unknown> = {};
    if (item && typeof item === "object" && !Array.isArray(item)) {
      const keys = Object.keys(item as object);
      if (keys.length !== 1) {
        errors.push(`Invalid ${role} remote ${JSON.stringify(item)}: a remote with parameters is a mapping of one URL`);
        continue;
      }
      id = keys[0]!;
      const per = repack((item as Record<string, unknown>)[id]);
      if (!per || !Object.keys(per).length) {
        errors.push(`Invalid per-remote configuration for ${role} remote '${id}'. If no per-remote parameters are being specified, there may be a trailing colon after the URL, which should be removed. Check the master configuration file.`);
        continue;
      }
      conf = per;
    } else if (typeof item === "string") id = item;
    else {
      warnings.push(`Found bad url data ${JSON.stringify(item)}`);
      continue;
    }
    let url = id;
    let branch: string | undefined;
    if (role === "git_pillar") {
      const parts = id.trim().split(/\s+/);
      if (parts.length >= 2) {
        branch = parts[0]!;
        url = parts.slice(1).join(" ");
      } else branch = String(c.git_pillar_branch ?? "master");
    }
    if (!validRemoteUrl(url)) {
      warnings.push(`Found bad url data '${url}' (${role} remotes must be http(s)://, ssh://, user@host:path, ftp(s)://, sftp:// or file:// URLs)`);
      continue;
    }
    for (const p of Object.keys(conf)) {
      if (AUTH_PARAMS.includes(p)) errors.push(`${role} authentication parameter '${p}' (from remote '${id}') is only supported by Salt's pygit2 provider; brine's git provider takes credentials from the URL, the master user's SSH key or a git credential helper`);
      else if (!overrides.includes(p) && !only.includes(p)) errors.push(`Invalid ${role} configuration parameter '${p}' in remote '${id}'. Valid parameters are: ${[...overrides, ...only].join(", ")}.`);
      else if (role === "git_pillar" && p === "mountpoint") warnings.push(`${role} parameter '${p}' of remote '${id}' is not implemented by brine; ignored`);
    }
    if (role === "git_pillar" && branch !== "__env__" && "base" in conf) {
      errors.push(`Invalid per-remote configuration for ${role} remote '${id}'. base can only be specified if __env__ is specified as the branch name.`);
    }
    const v = (k: string, d: unknown) => (k in conf ? conf[k] : g(k, d));
    const refTypes = stringList(v("ref_types", ["branch", "tag", "sha"])).map((x) => x.toLowerCase());
    const bad = refTypes.filter((t) => !["branch", "tag", "sha"].includes(t));
    if (bad.length) errors.push(`The following ref_types for ${role} remote '${id}' are invalid: ${bad.join(", ")}. The supported values are: branch, tag, sha`);
    const name = conf.name !== undefined ? String(conf.name) : undefined;
    const hash = name ?? createHash(hashType).update(id, "utf8").digest("base64").replace(/\//g, "_");
    const hashDir = path.join(cachedir, role, hash);
    const saltenv = { ...globalSaltenv, ...saltenvMap(conf.saltenv) };
    const r: GitRemote = {
      role,
      id,
      url,
      name,
      branch,
      env: role === "git_pillar" && v("env", "") ? String(v("env", "")) : undefined,
      base: String(v("base", "master")),
      fallback: v("fallback", "") ? String(v("fallback", "")) : undefined,
      allSaltenvs: conf.all_saltenvs !== undefined && conf.all_saltenvs !== "" ? String(conf.all_saltenvs) : undefined,
      root: stripRoot(v("root", "")),
      mountpoint: stripMount(v("mountpoint", "")),
      refTypes,
      refspecs: stringList(v("refspecs", DEFAULT_REFSPECS)),
      sslVerify: v("ssl_verify", true) !== false,
      disableSaltenvMapping: v("disable_saltenv_mapping", false) === true,
      whitelist: stringList(v("saltenv_whitelist", [])),
      blacklist: stringList(v("saltenv_blacklist", [])),
      updateIntervalS: Number(v("update_interval", 60)) || 60,
      saltenv,
      revmap: {},
      hashDir,
      gitDir: path.join(hashDir, "_", ".git"),
    };
    if (role === "git_pillar") r.mountpoint = "";
    // Salt's saltenv_revmap: per-remote mappings first, then global ones for environments not mapped per remote
    const perRemote = saltenvMap(conf.saltenv);
    for (const [env, s] of Object.entries(perRemote)) {
      if (s.ref === undefined) continue;
      (r.revmap[s.ref] ??= []).push(env);
      if (env === "base") r.base = s.ref;
    }
    const mapped = new Set(Object.values(r.revmap).flat());
    for (const [env, s] of Object.entries(globalSaltenv)) if (s.ref !== undefined && !mapped.has(env)) (r.revmap[s.ref] ??= []).push(env);
    remotes.push(r);
  }
  const dirs = new Map<string, string[]>();
  for (const r of remotes) dirs.set(r.hashDir, [...(dirs.get(r.hashDir) ?? []), r.id]);
  for (const ids of dirs.values()) {
    if (ids.length > 1) errors.push(`The following ${role} remotes have conflicting cachedirs: ${ids.join(", ")}. Resolve this using a per-remote parameter called 'name'.`);
  }
  return { remotes, errors, warnings };
}

/** The git_pillar remotes: every `git` entry of ext_pillar, in order. */
export function gitPillarRemoteLists(cfg: MasterConfig): unknown[][] {
  const out: unknown[][] = [];
  if (!Array.isArray(cfg.ext_pillar)) return out;
  for (const e of cfg.ext_pillar) {
    if (e && typeof e === "object" && !Array.isArray(e) && "git" in e) {
      const v = (e as Record<string, unknown>).git;
      out.push(Array.isArray(v) ? v : [v]);
    }
  }
  return out;
}

/** Salt's check_whitelist_blacklist over expr_match (a glob, or a regex matching the whole name). */
export function envExposed(r: GitRemote, env: string): boolean {
  const match = (pat: string) => {
    if (env === pat) return true;
    try {
      if (new RegExp(`^(?:${pat})$`).test(env)) return true;
    } catch {
      // not a regex
    }
    return fnmatch(env, pat);
  };
  if (r.whitelist.length && !r.whitelist.some(match)) return false;
  if (r.blacklist.length && r.blacklist.some(match)) return false;
  return true;
}
