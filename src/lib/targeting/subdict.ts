/**
 * Salt's `subdict_match` (salt/utils/data.py): does `key:subkey:pattern` match nested grains or pillar?
 *
 * The delimiter may appear in the key path and in the value, so every split point is tried, the deepest
 * key first: `a:b:c` tries key `a:b` / pattern `c`, then key `a` / pattern `b:c`. For each split:
 * - the key path is walked through dicts and lists (Salt's `traverse_dict_and_list`); a missing key or
 *   an empty dict skips the split;
 * - a dict matches when the pattern is `*`, names one of its keys, or matches one level further down
 *   (recursively, with the default `:` delimiter, as Salt does);
 * - a list matches when any member does (a dict member as above, any member by its printed form);
 * - anything else is printed as Python would, lower-cased with the pattern, and compared by fnmatch
 *   (default), `re.match` (`regex`), or equality (`exact`).
 * A key of just `*` matches against the whole data, and a pattern starting `*:` searches one level of
 * every key.
 */
import { fnmatch } from "./fnmatch.js";
import { pcreMatch } from "./pcre.js";
import { isDict, pyStr } from "./pystr.js";

export const DEFAULT_TARGET_DELIMITER = ":";

/**
 * Work allowed for one match (dict lookups plus value comparisons). Salt retries the remaining pattern at
 * every split and recurses into dicts, which is exponential in the number of delimiters for data nested
 * to match; a target over a large fleet must not be able to stall the master. Past the budget the
 * answer is "no match".
 */
export const subdictStepsMax = 100_000;

export interface SubdictOptions {
  /** compare with Python `re.match` instead of fnmatch (grain_pcre, pillar_pcre) */
  regex?: boolean;
  /** compare for equality instead of fnmatch (pillar_exact) */
  exact?: boolean;
}

class Budget {
  steps = 0;
  spend(): boolean {
    this.steps += 1;
    return this.steps <= subdictStepsMax;
  }
}

/** Thrown inside this module only, to unwind once the budget is spent (not a BrineError: never seen outside). */
class BudgetExceeded extends Error {}

/** What `traverse` returns when the path does not resolve (Salt uses a fresh `{}`). */
const NOT_FOUND: unique symbol = Symbol("not found");

/** Python `int(text)` for list indexes: optional sign and surrounding whitespace, `_` between digits. */
function pyInt(text: string): number | null {
  const m = /^\s*([+-]?)(\d+(?:_\d+)*)\s*$/.exec(text);
  if (!m) return null;
  const n = Number(m[2]!.replace(/_/g, ""));
  return m[1] === "-" ? -n : n;
}

/**
 * Salt's `traverse_dict_and_list`: follows `key` (split on `delimiter`) through dicts and lists. In a
 * list a numeric part is an index (negative counts from the end); a non-numeric part selects the first
 * dict member that has that key. Strings, numbers and null cannot be walked into.
 */
function traverse(data: unknown, key: string, delimiter: string, budget: Budget): unknown | typeof NOT_FOUND {
  let ptr: unknown = data;
  for (const part of key.split(delimiter)) {
    if (!budget.spend()) throw new BudgetExceeded();
    if (Array.isArray(ptr)) {
      const idx = pyInt(part);
      if (idx === null) {
        const holder = ptr.find((x) => isDict(x) && Object.hasOwn(x, part)) as Record<string, unknown> | undefined;
        if (holder === undefined) return NOT_FOUND;
        ptr = holder[part];
      } else {
        const at = idx < 0 ? ptr.length + idx : idx;
        if (at < 0 || at >= ptr.length) return NOT_FOUND;
        ptr = ptr[at];
      }
    } else if (isDict(ptr)) {
      if (!Object.hasOwn(ptr, part)) return NOT_FOUND;
      ptr = ptr[part];
    } else {
      return NOT_FOUND;
    }
  }
  return ptr;
}

interface Matcher {
  regex: boolean;
  exact: boolean;
  budget: Budget;
}

function matchValue(target: unknown, pattern: string, m: Matcher): boolean {
  if (!m.budget.spend()) throw new BudgetExceeded();
  const t = pyStr(target).toLowerCase();
  const p = pattern.toLowerCase();
  if (m.regex) return pcreMatch(t, p);
  return m.exact ? t === p : fnmatch(t, p);
}

function matchDict(target: Record<string, unknown>, pattern: string, m: Matcher): boolean {
  const wildcard = pattern.startsWith("*:");
  const pat = wildcard ? pattern.slice(2) : pattern;
  if (pat === "*") return true; // only checking that the key exists
  if (Object.hasOwn(target, pat)) return true; // the pattern names a key
  // one level further down; Salt recurses with the default delimiter whatever the caller used
  if (matchExpr(target, pat, DEFAULT_TARGET_DELIMITER, m)) return true;
  if (!wildcard) return false;
  for (const value of Object.values(target)) {
    if (isDict(value)) {
      if (matchDict(value, pat, m)) return true;
    } else if (Array.isArray(value)) {
      for (const item of value) if (matchValue(item, pat, m)) return true;
    } else if (matchValue(value, pat, m)) {
      return true;
    }
  }
  return false;
}

function matchExpr(data: unknown, expr: string, delimiter: string, m: Matcher): boolean {
  const splits = expr.split(delimiter);
  if (splits.length === 1) return false; // no delimiter: there is no key to look up
  for (let idx = splits.length - 1; idx > 0; idx -= 1) {
    const key = splits.slice(0, idx).join(delimiter);
    let match: unknown;
    let matchStr: string;
    if (key === "*") {
      // everything under the top level: match the whole expression against the whole data
      matchStr = expr;
      match = data;
    } else {
      matchStr = splits.slice(idx).join(delimiter);
      match = traverse(data, key, delimiter, m.budget);
    }
    if (match === NOT_FOUND) continue;
    if (isDict(match)) {
      if (Object.keys(match).length === 0) continue; // Salt cannot tell `{}` from "not found"
      if (matchDict(match, matchStr, m)) return true;
      continue;
    }
    if (Array.isArray(match)) {
      for (const member of match) {
        if (isDict(member) && matchDict(member, matchStr, m)) return true;
        if (matchValue(member, matchStr, m)) return true;
      }
      continue;
    }
    if (matchValue(match, matchStr, m)) return true;
  }
  return false;
}

/**
 * True when `expr` (`key[:subkey…]:pattern`) matches `data`. Never throws: a non-string expression, an
 * empty delimiter or an exhausted work budget is no match.
 */
export function subdictMatch(
  data: unknown,
  expr: unknown,
  delimiter: string = DEFAULT_TARGET_DELIMITER,
  options: SubdictOptions = {},
): boolean {
  if (typeof expr !== "string" || typeof delimiter !== "string" || delimiter === "") return false;
  const m: Matcher = { regex: options.regex === true, exact: options.exact === true, budget: new Budget() };
  try {
    return matchExpr(data, expr, delimiter, m);
  } catch (err) {
    if (err instanceof BudgetExceeded) return false;
    throw err;
  }
}
