/**
 * Nodegroup expansion, as Salt's `nodegroup_comp` (salt/utils/minions.py) does it for `-N group` and for
 * `N@group` inside a nodegroup definition.
 *
 * A definition is a compound string (split on whitespace) or a list of words (each element one word,
 * so a word may hold spaces). `N@other` inside it is replaced by the other group's words in parentheses.
 * A group with no operators, no `*` and no `X@` engine word is shorthand: it becomes `L@a,b,c`, or
 * `E@a,b,c` when a word holds a regex character (`( [ { \ ? } ] )`), exactly as Salt rewrites it.
 *
 * Divergence: Salt drops an unknown or cyclic nested group from the expression (usually leaving a
 * syntax error behind, which then matches nothing); here the whole expansion fails, which also matches
 * nothing but says so plainly.
 */
import { pySplit, pyStr } from "./pystr.js";

/** The master's `nodegroups` setting: name → compound string or list of words. */
export type NodegroupConfig = Readonly<Record<string, string | readonly unknown[]>>;

/**
 * Most words one expansion may produce (words). Nested groups can reference a group many times, so the
 * expansion can grow exponentially with nesting depth; past this it is refused.
 */
export const nodegroupWordsMax = 4096;

export const COMPOUND_OPERATORS: ReadonlySet<string> = new Set(["and", "or", "not", "(", ")"]);
const ENGINE_WORD = /^[A-Z]@/;
const REGEX_CHARS = ["(", "[", "{", "\\", "?", "}", "]", ")"];

/** Salt's `_nodegroup_regex`: the `L@…`/`E@…` shorthand for a plain list of names, or null. */
function shorthand(words: readonly string[]): string[] | null {
  if (words.some((w) => COMPOUND_OPERATORS.has(w))) return null;
  if (words.some((w) => w.includes("*") || ENGINE_WORD.test(w))) return null;
  const regexy = words.some((w) => REGEX_CHARS.some((ch) => w.includes(ch)));
  return [`${regexy ? "E@" : "L@"}${words.join(",")}`];
}

/** Unwinds a failed expansion; the reason is for debugging only, callers just see null (never leaves this module: not a BrineError). */
class ExpansionError extends Error {}

function definitionWords(def: unknown): string[] | null {
  if (typeof def === "string") return pySplit(def);
  if (Array.isArray(def)) return def.map((w) => (typeof w === "string" ? w : pyStr(w)));
  return null;
}

function expand(
  name: string,
  groups: NodegroupConfig,
  active: Set<string>,
  firstCall: boolean,
): string[] {
  if (active.has(name)) throw new ExpansionError(`nodegroup ${name} includes itself`);
  if (!Object.hasOwn(groups, name)) throw new ExpansionError(`unknown nodegroup ${name}`);
  const words = definitionWords(groups[name]);
  if (words === null) throw new ExpansionError(`nodegroup ${name} is neither a string nor a list`);

  active.add(name);
  const out: string[] = [];
  let nested = false;
  for (const word of words) {
    if (!COMPOUND_OPERATORS.has(word) && word.length >= 3 && word.startsWith("N@")) {
      nested = true;
      out.push(...expand(word.slice(2), groups, active, false));
    } else {
      out.push(word);
    }
    if (out.length > nodegroupWordsMax) throw new ExpansionError("nodegroup expansion too large");
  }
  active.delete(name);

  if (out.length > 0) {
    out.unshift("(");
    out.push(")");
  }
  if (!firstCall) return shorthand(words) ?? out;
  if (nested) return out;
  // a top-level group without nested groups is returned as written (Salt keeps it for compatibility)
  return shorthand(words) ?? words;
}

/**
 * The compound words a nodegroup stands for, or null when the group (or a group it includes) is unknown,
 * not a string or list, part of a cycle, or expands past `nodegroupWordsMax`.
 */
export function expandNodegroup(name: unknown, nodegroups: NodegroupConfig | undefined): string[] | null {
  if (typeof name !== "string" || nodegroups === undefined || nodegroups === null) return null;
  try {
    return expand(name, nodegroups, new Set(), true);
  } catch {
    // ExpansionError, or a RangeError from a pathologically long chain of groups
    return null;
  }
}
