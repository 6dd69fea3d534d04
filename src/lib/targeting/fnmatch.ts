/**
 * Python `fnmatch.fnmatchcase` semantics (what Salt's glob targeting uses on POSIX, where `fnmatch` does
 * not fold case): `*` any run of characters (including `/` and newlines), `?` one character, `[seq]`,
 * `[!seq]`; no braces, no escaping. The whole name must match.
 *
 * Patterns are compiled once to a RegExp (flag `u` so `?` is one code point, as in Python's str; flag `s`
 * so `*` crosses newlines, as Python's `(?s:…)` wrapper does) and kept in a bounded cache.
 */
import { BoundedCache } from "./bounded-cache.js";

/** Compiled glob patterns kept (entries). A master sees a few distinct targets; 1024 covers a busy one. */
export const patternCacheEntriesMax = 1024;

const cache = new BoundedCache<string, RegExp>(patternCacheEntriesMax);

/** Marks a `*` between fixed pieces while translating. */
const STAR = Symbol("star");
type Piece = string | typeof STAR;

/** Characters with a meaning in a JS regular expression outside a class. */
const SYNTAX_OUTSIDE = /[\\^$.*+?()[\]{}|/]/;
/** Characters that need a backslash inside a JS character class (valid escapes under flag `u`). */
const SYNTAX_INSIDE = /[\\\]^[-]/;

function literal(ch: string): string {
  return SYNTAX_OUTSIDE.test(ch) ? `\\${ch}` : ch;
}

function classChar(ch: string): string {
  return SYNTAX_INSIDE.test(ch) ? `\\${ch}` : ch;
}

/**
 * Translates the body of a `[...]` set (between the brackets) into one regex piece, as Python does: a
 * leading `!` negates; `a-z` is a range; a `-` first, last, or right after a range is literal; a range
 * whose start is above its end is dropped; a set left empty never matches, a negated empty set matches
 * any character.
 */
function translateSet(body: readonly string[]): string {
  let chars = body;
  const negate = chars.length > 0 && chars[0] === "!";
  if (negate) chars = chars.slice(1);
  const items: string[] = [];
  let i = 0;
  while (i < chars.length) {
    const lo = chars[i]!;
    if (i + 2 < chars.length && chars[i + 1] === "-") {
      const hi = chars[i + 2]!;
      // compare by code point, as Python compares one-character strings
      if (lo.codePointAt(0)! <= hi.codePointAt(0)!) items.push(`${classChar(lo)}-${classChar(hi)}`);
      i += 3;
    } else {
      items.push(classChar(lo));
      i += 1;
    }
  }
  if (items.length === 0) return negate ? "." : "(?!)";
  return `[${negate ? "^" : ""}${items.join("")}]`;
}

function translatePieces(pattern: string): Piece[] {
  // iterate by code point so a set or `?` never splits a surrogate pair
  const pat = Array.from(pattern);
  const out: Piece[] = [];
  const n = pat.length;
  let i = 0;
  while (i < n) {
    const c = pat[i]!;
    i += 1;
    if (c === "*") {
      // consecutive stars are one star
      if (out.length === 0 || out[out.length - 1] !== STAR) out.push(STAR);
    } else if (c === "?") {
      out.push(".");
    } else if (c === "[") {
      // find the closing bracket: a `]` right after `[` or `[!` is a member, not the end
      let j = i;
      if (j < n && pat[j] === "!") j += 1;
      if (j < n && pat[j] === "]") j += 1;
      while (j < n && pat[j] !== "]") j += 1;
      if (j >= n) {
        out.push("\\["); // unclosed: the bracket is literal
      } else {
        out.push(translateSet(pat.slice(i, j)));
        i = j + 1;
      }
    } else {
      out.push(literal(c));
    }
  }
  return out;
}

/**
 * Joins the pieces: fixed text before the first star is anchored at the start; each `* fixed` in the
 * middle matches the earliest occurrence of `fixed` without backtracking into it (Python uses an atomic
 * group; JS spells that as a lookahead capture plus a backreference), which keeps globs like `*a*a*a*b`
 * linear instead of exponential; the last `* fixed` is anchored at the end.
 */
function joinPieces(pieces: readonly Piece[]): string {
  let src = "";
  let i = 0;
  let group = 0;
  while (i < pieces.length && pieces[i] !== STAR) src += pieces[i++] as string;
  while (i < pieces.length) {
    i += 1; // the STAR
    if (i === pieces.length) {
      src += ".*";
      break;
    }
    let fixed = "";
    while (i < pieces.length && pieces[i] !== STAR) fixed += pieces[i++] as string;
    if (i === pieces.length) {
      src += `.*${fixed}`;
    } else {
      group += 1;
      src += `(?=(.*?${fixed}))\\${group}`;
    }
  }
  return `^(?:${src})$`;
}

/** The RegExp equivalent to a Python fnmatch pattern (cached). */
export function fnmatchToRegExp(pattern: string): RegExp {
  return cache.getOrCompute(pattern, (p) => new RegExp(joinPieces(translatePieces(p)), "su"));
}

/** Python `fnmatch.fnmatchcase(name, pattern)`. Non-string input never matches. */
export function fnmatch(name: unknown, pattern: unknown): boolean {
  if (typeof name !== "string" || typeof pattern !== "string") return false;
  return fnmatchToRegExp(pattern).test(name);
}

/** Python `fnmatch.filter(names, pattern)` on POSIX: the names that match, in their order. */
export function fnmatchFilter(names: readonly string[], pattern: string): string[] {
  const re = fnmatchToRegExp(pattern);
  return names.filter((name) => re.test(name));
}
