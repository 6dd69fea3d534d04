/**
 * Salt's access-control grammar, as a pure module: facts in (an auth list, a function, its arguments, the
 * target and the minions it selects), a verdict out. No I/O, no clock, no logging: the caller logs.
 *
 * The grammar (salt/utils/minions.py CkMinions.fill_auth_list, auth_check, spec_check; salt/auth):
 * - `external_auth: {<backend>: {<user or glob or regex>: [...], '<group>%': [...], '*': [...]}}`;
 *   a user's auth list is the entries of every key that matches the user's name, every `group%` the
 *   user is in, and `*` only when no name key matched (`permissive_acl: True` adds `*` always).
 * - An auth-list entry is a function regex (`test.*`: any function on any minion), a map
 *   `{<target>: [<function regex> | {<function regex>: {args: [...], kwargs: {...}}}]}` (functions on the
 *   minions a compound target selects: every targeted minion must be among them), or for runners and
 *   wheel `@runner`, `@wheel`, `@jobs` (a module name), or `{'@runner': [functions]}`.
 * - `args` are regexes matched against each positional argument in order (`null` allows anything),
 *   `kwargs` against the named arguments.
 *
 * Where brine differs from Salt, on purpose (tests name each):
 * - Function, argument and user regexes must match the WHOLE name. Salt uses Python's `re.match`, a
 *   prefix match, so an entry `cmd.run` also allows `cmd.run_all`/`cmd.run_bg`, and `args: ['ls']` allows
 *   `ls; rm -rf /`. `prefixOnlyEntries` lists config entries whose meaning changes, for a start-up warning.
 * - In `fill_auth_list` Salt hands the USERNAME to fnmatch/regex as the pattern and the config key as the
 *   subject, so a user named `*` or `.*` (any name a backend such as sharedsecret accepts) collects every
 *   user's rights. brine matches the config key (the pattern) against the user's name.
 */
import { compilePcre } from "../targeting/pcre.js";
import { fnmatch } from "../targeting/fnmatch.js";

/** One compiled, whole-name regex per pattern; invalid patterns are `null` (never match). */
const fullRegexCache = new Map<string, RegExp | null>();
const fullRegexCacheEntriesMax = 4096;

/** Python's `re.fullmatch(pattern, subject)` through the pcre translation (a leading `(?flags)` group kept first). */
export function fullMatch(pattern: string, subject: string): boolean {
  let re = fullRegexCache.get(pattern);
  if (re === undefined) {
    const m = /^\(\?[aiLmsux]+\)/.exec(pattern);
    const flags = m ? m[0] : "";
    re = compilePcre(`${flags}(?:${pattern.slice(flags.length)})\\Z`);
    if (fullRegexCache.size >= fullRegexCacheEntriesMax) fullRegexCache.clear();
    fullRegexCache.set(pattern, re);
  }
  return re !== null && re.test(subject);
}

/** `match_check`: every function of `fun` (a name or a compound list) matches `regex` whole. */
export function funMatches(regex: unknown, fun: string | readonly string[]): boolean {
  if (typeof regex !== "string") return false;
  const funs = typeof fun === "string" ? [fun] : fun;
  return funs.length > 0 && funs.every((f) => fullMatch(regex, f));
}

/** Salt's `expr_match`, pointed the right way: the config key is the pattern (glob, then whole regex). */
export function nameMatches(pattern: string, name: string): boolean {
  if (pattern === name) return true;
  if (fnmatch(name, pattern)) return true;
  return fullMatch(pattern, name);
}

export type AuthList = unknown[];

/** The `external_auth` block of one backend: user, glob, regex or `group%` → entries. */
export type EauthUsers = Record<string, unknown>;

/** `fill_auth_list`: the entries a user named `name` in `groups` gets from one backend's block. */
export function fillAuthList(users: EauthUsers | null | undefined, name: string, groups: readonly string[], permissive = false): AuthList {
  const out: AuthList = [];
  if (!users || typeof users !== "object") return out;
  let nameMatched = false;
  for (const [key, entries] of Object.entries(users)) {
    const list = Array.isArray(entries) ? entries : entries == null ? [] : [entries];
    if (key === "*" && !permissive) continue;
    if (key.endsWith("%")) {
      if (groups.includes(key.replace(/%+$/, ""))) out.push(...list);
    } else if (nameMatches(key, name)) {
      nameMatched = true;
      out.push(...list);
    }
  }
  if (!permissive && !nameMatched && Array.isArray(users["*"])) out.push(...(users["*"] as unknown[]));
  return out;
}

/** `publisher_acl` (and `get_values_of_matching_keys`): the entries whose key matches the local user. */
export function matchingKeyValues(map: Record<string, unknown> | null | undefined, user: string): AuthList {
  const out: AuthList = [];
  if (!map || typeof map !== "object") return out;
  for (const [key, entries] of Object.entries(map)) {
    if (nameMatches(key, user)) out.push(...(Array.isArray(entries) ? entries : [entries]));
  }
  return out;
}

function singleKey(v: unknown): [string, unknown] | undefined {
  if (!v || typeof v !== "object" || Array.isArray(v)) return undefined;
  const keys = Object.keys(v);
  if (keys.length !== 1) return undefined;
  return [keys[0]!, (v as Record<string, unknown>)[keys[0]!]];
}

function argText(v: unknown): string {
  // Salt compares str(arg): Python's spelling of the common scalars
  if (v === true) return "True";
  if (v === false) return "False";
  if (v === null || v === undefined) return "None";
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  return JSON.stringify(v);
}

/** `__args_check`: one of the conditions (`{args, kwargs}`) allows these arguments. */
export function argsAllowed(valid: unknown, args: readonly unknown[] | undefined, kwargs: Record<string, unknown> | undefined): boolean {
  const conds = Array.isArray(valid) ? valid : [valid];
  for (const cond of conds) {
    if (!cond || typeof cond !== "object" || Array.isArray(cond)) continue;
    const c = cond as { args?: unknown; kwargs?: unknown };
    let good = true;
    const condArgs = Array.isArray(c.args) ? c.args : [];
    for (let i = 0; i < condArgs.length && good; i++) {
      if (!args || args.length <= i) good = false;
      else if (condArgs[i] !== null && !funMatches(condArgs[i], argText(args[i]))) good = false;
    }
    if (!good) continue;
    const condKwargs = c.kwargs && typeof c.kwargs === "object" ? (c.kwargs as Record<string, unknown>) : {};
    for (const [k, v] of Object.entries(condKwargs)) {
      if (!kwargs || !Object.hasOwn(kwargs, k)) {
        good = false;
        break;
      }
      if (v !== null && !funMatches(v, argText(kwargs[k]))) {
        good = false;
        break;
      }
    }
    if (good) return true;
  }
  return false;
}

/** `__fun_check`: a function name (and its arguments) against a list of conditions. */
export function funAllowed(valid: unknown, fun: string, args?: readonly unknown[], kwargs?: Record<string, unknown>): boolean {
  const conds = Array.isArray(valid) ? valid : [valid];
  for (const cond of conds) {
    if (typeof cond === "string") {
      if (funMatches(cond, fun)) return true;
    } else {
      const kv = singleKey(cond);
      if (kv && funMatches(kv[0], fun) && argsAllowed(kv[1], args, kwargs)) return true;
    }
  }
  return false;
}

/** Splits a publish's positional args into (args, kwargs) as Salt does: a trailing `{__kwarg__: True, ...}` map. */
export function splitPublishArgs(arg: unknown): { args: unknown[]; kwargs: Record<string, unknown> | undefined } {
  const list = Array.isArray(arg) ? arg : [];
  const last = list[list.length - 1];
  if (last && typeof last === "object" && !Array.isArray(last) && (last as Record<string, unknown>).__kwarg__ === true) {
    return { args: list.slice(0, -1), kwargs: last as Record<string, unknown> };
  }
  return { args: list, kwargs: undefined };
}

export interface PublishCheck {
  authList: AuthList;
  /** one function or a compound job's list */
  fun: string | readonly string[];
  /** the publish's `arg` (for a compound job, one list per function) */
  arg: unknown;
  /** the minions the job's target selects */
  minions: readonly string[];
  /** the minions an auth entry's target (compound) selects: injected, so this module stays pure */
  minionsOf(target: string): readonly string[];
  /** functions always allowed (Salt: saltutil.find_job) */
  whitelist?: readonly string[];
}

/** `auth_check` (the default, non-expanded matching): may this user run this publish? */
export function publishAllowed(c: PublishCheck): boolean {
  const funs = typeof c.fun === "string" ? [c.fun] : c.fun;
  const argsPerFun: unknown[] = typeof c.fun === "string" ? [c.arg] : Array.isArray(c.arg) ? c.arg : [];
  // Salt returns True as soon as ANY function of a compound job is allowed; brine requires every one
  if (funs.length === 0) return false;
  const targetCache = new Map<string, Set<string>>();
  const targetOk = (target: string) => {
    let set = targetCache.get(target);
    if (!set) targetCache.set(target, (set = new Set(c.minionsOf(target))));
    return c.minions.every((m) => set!.has(m));
  };
  return funs.every((fun, i) => {
    if (c.whitelist?.includes(fun)) return true;
    const { args, kwargs } = splitPublishArgs(argsPerFun[i]);
    for (const entry of c.authList) {
      if (typeof entry === "string") {
        if (funMatches(entry, fun)) return true;
        continue;
      }
      const kv = singleKey(entry);
      if (!kv || kv[0].startsWith("@")) continue;
      if (targetOk(kv[0]) && funAllowed(kv[1], fun, args, kwargs)) return true;
    }
    return false;
  });
}

export type SpecForm = "runner" | "wheel";

export type SpecVerdict = true | false | { error: { name: string; message: string } };

/** `spec_check` (runner_check / wheel_check): `@runner`, `@wheel`, `@<module>` entries. */
export function specAllowed(authList: AuthList | null | undefined, fun: string, args: { arg?: unknown[]; kwarg?: Record<string, unknown> }, form: SpecForm): SpecVerdict {
  if (!authList || authList.length === 0) return false;
  const comps = fun.split(".");
  if (comps.length !== 2) {
    return { error: { name: "SaltInvocationError", message: "A command invocation error occurred: Check syntax." } };
  }
  const [mod, name] = comps as [string, string];
  for (const entry of authList) {
    if (typeof entry === "string") {
      if (entry.startsWith("@") && (entry.slice(1) === mod || entry.slice(1) === form || entry === `@${form}s`)) return true;
      continue;
    }
    const kv = singleKey(entry);
    if (!kv || !kv[0].startsWith("@")) continue;
    const [valid, conds] = kv;
    if (valid.slice(1) === mod && funAllowed(conds, name, args.arg, args.kwarg)) return true;
    if ((valid.slice(1) === form || valid === `@${form}s`) && funAllowed(conds, fun, args.arg, args.kwarg)) return true;
  }
  return false;
}

/**
 * Config entries whose meaning is narrower in brine than in Salt (whole-name instead of prefix matching):
 * plain names such as `test` or `cmd.run` that Salt would also match as prefixes of other functions.
 */
export function prefixOnlyEntries(block: unknown): string[] {
  const out = new Set<string>();
  const visitFuns = (v: unknown) => {
    for (const f of Array.isArray(v) ? v : [v]) {
      const s = typeof f === "string" ? f : singleKey(f)?.[0];
      if (s && !s.startsWith("@") && /^[A-Za-z0-9_.]+$/.test(s) && !s.includes(".")) out.add(s);
    }
  };
  const visitEntries = (entries: unknown) => {
    for (const e of Array.isArray(entries) ? entries : [entries]) {
      if (typeof e === "string") visitFuns(e);
      else {
        const kv = singleKey(e);
        if (kv) visitFuns(kv[1]);
      }
    }
  };
  if (block && typeof block === "object") for (const users of Object.values(block as Record<string, unknown>)) {
    if (users && typeof users === "object") for (const entries of Object.values(users as Record<string, unknown>)) visitEntries(entries);
  }
  return [...out];
}
