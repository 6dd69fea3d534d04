/**
 * Python `re.match` semantics for pcre targets: the pattern is anchored at the start of the subject only
 * (a prefix match), so `web` matches `web01` and `.*01$` must be spelled out to anchor the end.
 *
 * Salt hands the pattern to Python's `re`; we translate the cheap Python-only spellings to JS and compile
 * without flag `u` (Annex B syntax, which like Python accepts a lone `{` or `]` as a literal):
 * - `(?P<name>…)` → `(?<name>…)`, `(?P=name)` → `\k<name>`, `(?#comment)` dropped;
 * - leading global flags `(?aiLmsux)`: `i`, `m`, `s` become JS flags, `x` strips whitespace and `#`
 *   comments, `a`/`u`/`L` are accepted and ignored;
 * - `\A` → start of input, `\Z` → end of input, `$` (without `m`) → end or before a final `\n`,
 *   `.` (without `s`) → any character but `\n`, `{,n}` → `{0,n}`.
 * A pattern that fails to compile (or that Python-only syntax we do not translate makes invalid in JS)
 * is reported as `null` by `compilePcre` and never matches; nothing here throws.
 *
 * Catastrophic backtracking (issue 13: `(a+)+$` against 28 a's and a '!' took V8's backtracking engine,
 * like Python's `re`, over ten seconds per minion id). Patterns from minions (`_mine_get`, and any other
 * target a minion supplies) are evaluated inside `withLinearPatterns`, which compiles every pattern for
 * V8's linear-time engine (the `l` flag: an automaton, time linear in the subject for a given pattern):
 * `$` is spelled `(?:\n?$)` there (the same yes/no answer as Python's "end, or before a final newline"
 * for every pattern that does not match a newline after `$`), `\A`/`\Z` become `^`/`$`, and `(?i)` makes
 * each letter (and each same-case ASCII range in a class) the class of both cases. What that engine
 * cannot run — backreferences, lookarounds, counted repeats over 16 — would need
 * backtracking, so such a pattern from a minion matches nothing and is logged: a minion gets Salt's
 * semantics for the patterns people write and never an unbounded one. Operator targets (CLI, runners,
 * top files; compilePcreTarget, pcreMatch) keep full semantics, with `$`, `\A`, `\Z`, `(?i)` spelled the same way,
 * so V8's fallback flag switches any of them the linear engine can run over to it once it has backtracked
 * too long (`--regexp-backtracks-before-fallback`): a minion's long grain value cannot make an operator's
 * `P@`/`G@` pattern catastrophic either. Renderers' regex filters (compilePcre) keep the exact spelling,
 * whose captures are Python's.
 *
 * Chosen over re2 (a native addon: its prebuilt binaries are downloaded from GitHub at install, and it
 * differs from Python's `re` in more places) and re2-wasm (a dependency and a copy of every subject into
 * wasm memory for each test): V8's engine is in the runtime already, needs no dependency, keeps JS syntax
 * and semantics for everything it accepts, and refuses, at compile time, exactly what could be slow. The
 * flags are V8's, so they hold for every thread of the process; they are set when this module loads,
 * before any pattern from the wire is compiled (V8 reads them when a RegExp is compiled, at first use).
 */
import v8 from "node:v8";
import { BoundedCache } from "./bounded-cache.js";

v8.setFlagsFromString("--enable-experimental-regexp-engine");
v8.setFlagsFromString("--enable-experimental-regexp-engine-on-excessive-backtracks");

/** Compiled regular expressions kept (entries); see patternCacheEntriesMax in fnmatch.ts for the sizing. */
export const regexCacheEntriesMax = 1024;
/**
 * Longest pattern we compile (UTF-16 code units). Targets come from users over the wire; a multi-kilobyte
 * regex is not a real target, and refusing it bounds compile time.
 */
export const regexPatternLengthMax = 4096;

/** `null` entries remember invalid patterns, so a bad target is not recompiled for every minion. */
const cache = new BoundedCache<string, RegExp | null>(regexCacheEntriesMax);
/** Targets (compilePcreTarget): `$`, `\A`, `\Z` spelled so V8 can hand them to its linear engine. */
const targetCache = new BoundedCache<string, RegExp | null>(regexCacheEntriesMax);
/** The same for patterns compiled for the linear-time engine (null: invalid, or not linear). */
const linearCache = new BoundedCache<string, RegExp | null>(regexCacheEntriesMax);

/**
 * How a pattern is compiled: `exact` (renderers' regex filters: captures as Python's), `target` (a yes/no
 * target match; `$` as `(?:\n?$)`, so V8's fallback to its linear engine can take it when it backtracks too
 * long), `linear` (a minion's target: compiled for the linear engine, or refused).
 */
type Mode = "exact" | "target" | "linear";

/** Depth of withLinearPatterns calls on this thread (targeting is synchronous: a counter is enough). */
let linearDepth = 0;
/** Patterns refused for the linear engine since the last takeLinearRefusals (for the caller's log line). */
let linearRefused: string[] = [];
const linearRefusedKept = 8;

/**
 * Run `fn` (synchronous) with every pcre pattern compiled for V8's linear-time engine: for targets a
 * minion sends. A pattern that engine cannot run matches nothing (see the header).
 */
export function withLinearPatterns<T>(fn: () => T): T {
  linearDepth++;
  try {
    return fn();
  } finally {
    linearDepth--;
  }
}

/** The patterns refused as not linear since the last call (at most a few), and forget them. */
export function takeLinearRefusals(): string[] {
  const r = linearRefused;
  linearRefused = [];
  return r;
}

const FLAG_GROUP = /^\(\?([aiLmsux]+)\)/;
const NAMED_REF = /^\(\?P=([A-Za-z_][A-Za-z0-9_]*)\)/;
const NAMED_GROUP = /^\(\?P<([A-Za-z_][A-Za-z0-9_]*)>/;
/** A repeat operator at the head of the remaining pattern. */
const QUANTIFIER_AHEAD = /^(?:[*+?]|\{\d*,?\d*\})/;
const WHITESPACE = /[ \t\n\r\f\v]/;

interface Flags {
  ignoreCase: boolean;
  multiline: boolean;
  dotAll: boolean;
  verbose: boolean;
}

/** Reads the global inline flag groups at the head of the pattern; returns them and the rest. */
function leadingFlags(pattern: string): { flags: Flags; rest: string } {
  const flags: Flags = { ignoreCase: false, multiline: false, dotAll: false, verbose: false };
  let rest = pattern;
  for (let m = FLAG_GROUP.exec(rest); m; m = FLAG_GROUP.exec(rest)) {
    const letters = m[1]!;
    if (letters.includes("i")) flags.ignoreCase = true;
    if (letters.includes("m")) flags.multiline = true;
    if (letters.includes("s")) flags.dotAll = true;
    if (letters.includes("x")) flags.verbose = true;
    rest = rest.slice(m[0].length);
  }
  return { flags, rest };
}

/**
 * Rewrites a Python pattern (after its leading flags) into JS source, or returns null when the pattern
 * is structurally invalid (unbalanced parentheses, unterminated class or escape). Parentheses are checked
 * here because the result is wrapped in `^(?:…)`: an unbalanced `)` would otherwise escape the anchor.
 */
function translate(src: string, flags: Flags, mode: Mode): string | null {
  const anchorsPlain = mode !== "exact";
  let out = "";
  let depth = 0;
  let i = 0;
  const n = src.length;
  const groupNames = new Set<string>();
  while (i < n) {
    const c = src[i]!;
    if (c === "\\") {
      if (i + 1 >= n) return null;
      const e = src[i + 1]!;
      i += 2;
      if (e === "A" || e === "Z") {
        // these become lookarounds, which JS lets a quantifier follow; Python calls that an error
        if (QUANTIFIER_AHEAD.test(src.slice(i))) return null;
        if (anchorsPlain && !flags.multiline) out += e === "A" ? "^" : "$";
        else out += e === "A" ? "(?<![\\s\\S])" : "(?![\\s\\S])";
      } else {
        out += c + e;
      }
      continue;
    }
    if (c === "[") {
      // copy a character class verbatim; in Python a `]` first (or right after `^`) is a member
      let j = i + 1;
      let cls = "[";
      if (src[j] === "^") {
        cls += "^";
        j += 1;
      }
      if (src[j] === "]") {
        cls += "\\]";
        j += 1;
      }
      let closed = false;
      while (j < n) {
        const d = src[j]!;
        if (d === "\\") {
          if (j + 1 >= n) return null;
          cls += d + src[j + 1]!;
          j += 2;
          continue;
        }
        if (d === "[") {
          cls += "\\["; // a literal in Python; keep it literal in JS too
          j += 1;
          continue;
        }
        cls += d;
        j += 1;
        if (d === "]") {
          closed = true;
          break;
        }
      }
      if (!closed) return null;
      out += anchorsPlain && flags.ignoreCase ? foldClass(cls) : cls;
      i = j;
      continue;
    }
    if (flags.verbose && WHITESPACE.test(c)) {
      i += 1;
      continue;
    }
    if (flags.verbose && c === "#") {
      while (i < n && src[i] !== "\n") i += 1;
      continue;
    }
    if (c === "(") {
      const rest = src.slice(i);
      if (rest.startsWith("(?#")) {
        const end = src.indexOf(")", i);
        if (end < 0) return null;
        i = end + 1;
        continue;
      }
      const ref = NAMED_REF.exec(rest);
      if (ref) {
        // Python rejects a reference to a group not defined before it; JS would read `\k` as a literal
        if (!groupNames.has(ref[1]!)) return null;
        out += `\\k<${ref[1]}>`;
        i += ref[0].length;
        continue;
      }
      depth += 1;
      const named = NAMED_GROUP.exec(rest);
      if (named) {
        groupNames.add(named[1]!);
        out += "(?<";
        i += 4;
      } else {
        out += "(";
        i += 1;
      }
      continue;
    }
    if (c === ")") {
      depth -= 1;
      if (depth < 0) return null;
      out += ")";
      i += 1;
      continue;
    }
    if (c === "$" && !flags.multiline) {
      if (QUANTIFIER_AHEAD.test(src.slice(i + 1))) return null; // as for \A and \Z above
      out += anchorsPlain ? "(?:\\n?$)" : "(?=\\n?(?![\\s\\S]))";
      i += 1;
      continue;
    }
    if (c === "." && !flags.dotAll) {
      out += "[^\\n]";
      i += 1;
      continue;
    }
    if (c === "{") {
      const upTo = /^\{,(\d+)\}/.exec(src.slice(i));
      if (upTo) {
        out += `{0,${upTo[1]}}`;
        i += upTo[0].length;
        continue;
      }
    }
    // the linear engine takes no `i` flag: a letter becomes the class of its two cases
    out += anchorsPlain && flags.ignoreCase && cased(c) ? `[${c.toLowerCase()}${c.toUpperCase()}]` : c;
    i += 1;
  }
  return depth === 0 ? out : null;
}

/** A letter with one other case, one UTF-16 unit each way (what JS's `i` without `u` folds). */
const cased = (c: string) => c.length === 1 && c.toLowerCase() !== c.toUpperCase() && c.toLowerCase().length === 1 && c.toUpperCase().length === 1;
const swapCase = (c: string) => (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase());

/**
 * A translated character class (`[...]`, `[^...]`) with the other case of each letter and of each range of
 * same-case ASCII letters added: `(?i)` for the linear engine, which takes no `i` flag.
 */
function foldClass(cls: string): string {
  const start = cls.startsWith("[^") ? 2 : 1;
  const body = cls.slice(start, -1);
  const tokens: string[] = [];
  for (let k = 0; k < body.length; ) {
    const t = body[k] === "\\" ? body.slice(k, k + 2) : body[k]!;
    tokens.push(t);
    k += t.length;
  }
  let extra = "";
  for (let k = 0; k < tokens.length; k++) {
    const a = tokens[k]!;
    if (tokens[k + 1] === "-" && k + 2 < tokens.length) {
      const b = tokens[k + 2]!;
      const sameCase = (/^[a-z]$/.test(a) && /^[a-z]$/.test(b)) || (/^[A-Z]$/.test(a) && /^[A-Z]$/.test(b));
      if (sameCase) extra += `${swapCase(a)}-${swapCase(b)}`;
      k += 2;
      continue;
    }
    if (cased(a)) extra += swapCase(a);
  }
  return cls.slice(0, start) + body + extra + "]";
}

function compile(pattern: string, mode: Mode): RegExp | null {
  const linear = mode === "linear";
  if (pattern.length > regexPatternLengthMax) return null;
  const { flags, rest } = leadingFlags(pattern);
  const body = translate(rest, flags, mode);
  if (body === null) return null;
  // `m` is needed for a multiline `$`/`^`; `s` is not, `.` is already rewritten above when it is off
  // target, linear: `(?i)` is spelled out in the translation (the linear engine takes no `i` flag)
  const jsFlags = (flags.ignoreCase && mode === "exact" ? "i" : "") + (flags.multiline ? "m" : "") + (flags.dotAll ? "s" : "");
  try {
    // `re.match` only tries position 0; with `m` a `^` would also match after a newline, so anchor
    // with a lookbehind there instead
    const anchor = flags.multiline ? "(?<![\\s\\S])" : "^";
    if (linear) {
      // sticky (`y`, lastIndex kept 0 by pcreMatch) anchors a multiline pattern without a lookbehind
      if (flags.multiline) return new RegExp(`(?:${body})`, `${jsFlags}yl`);
      return new RegExp(`^(?:${body})`, `${jsFlags}l`);
    }
    return new RegExp(`${anchor}(?:${body})`, jsFlags);
  } catch {
    if (linear && compile(pattern, "target") !== null && linearRefused.length < linearRefusedKept) linearRefused.push(pattern);
    return null;
  }
}

function cached(c: BoundedCache<string, RegExp | null>, pattern: string, mode: Mode): RegExp | null {
  const hit = c.get(pattern);
  if (hit !== undefined) return hit;
  const re = compile(pattern, mode);
  c.set(pattern, re);
  return re;
}

/** The compiled, start-anchored RegExp for a Python pattern, or null when it is not a valid pattern. */
export function compilePcre(pattern: string): RegExp | null {
  return cached(cache, pattern, "exact");
}

/**
 * compilePcre for a target (a yes/no match: test it with pcreTest): inside withLinearPatterns compiled for
 * the linear engine (null also when that engine cannot run it), else fallback-capable (see Mode).
 */
export function compilePcreTarget(pattern: string): RegExp | null {
  return linearDepth > 0 ? cached(linearCache, pattern, "linear") : cached(targetCache, pattern, "target");
}

/** `re.test(subject)` from position 0 whatever the RegExp's flags. */
export function pcreTest(re: RegExp, subject: string): boolean {
  re.lastIndex = 0;
  return re.test(subject);
}

/** `bool(re.match(pattern, subject))`; an invalid pattern or non-string input is no match. */
export function pcreMatch(subject: unknown, pattern: unknown): boolean {
  if (typeof subject !== "string" || typeof pattern !== "string") return false;
  const re = compilePcreTarget(pattern);
  return re !== null && pcreTest(re, subject);
}
