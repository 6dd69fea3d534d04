/**
 * Compound targets (`-C`): words joined by `and`, `or`, `not` and parentheses, each word a glob or an
 * engine term (`G@os:Debian`, `L@a,b`, `E@web\d+`, …). Salt evaluates them twice with one grammar:
 * the master turns each term into a set of minion ids (`not X` = all accepted − X) and the minion turns
 * each term into True/False. Both build a Python expression and `eval` it; here one parser builds a tree
 * and two evaluators walk it, so the two sides agree by construction.
 *
 * The grammar is Salt's:
 * - a string is split on whitespace; a list is taken word by word (a word may then contain spaces);
 * - a word is parsed like Salt's TARGET_REX: an engine letter `G P I J L N S E R`, for `G P I J` an
 *   optional one-character delimiter, then `@` and a non-empty pattern (`G%@os%Debian`); anything else,
 *   including an unknown letter such as `X@foo`, is a glob on the minion id;
 * - `N@group` is replaced in place by the group's expansion (see nodegroups.ts), in parentheses;
 * - `not` binds tightest, then `and`, then `or`;
 * - a `not` right after a term, `)` or another `not` gets an `and` inserted before it, as Salt does, so
 *   `a not b` is `a and not b` and `not not b` is a syntax error;
 * - `and`/`or` first or right after `(`, two terms side by side, an empty `()`, an unbalanced parenthesis
 *   or a trailing operator are errors; so is an `E@` regex that does not compile (Salt's `re` raises,
 *   which fails the whole expression on both sides).
 * A failed parse is `null`: no minions on the master, false on a minion.
 */
import { expandNodegroup, COMPOUND_OPERATORS, type NodegroupConfig } from "./nodegroups.js";
import { compilePcreTarget } from "./pcre.js";
import { pySplit } from "./pystr.js";

/**
 * Most words in one expression after nodegroup expansion (words, operators included). A real target has
 * a handful; the bound keeps a hostile or runaway one from costing the master a pass over every minion
 * per word.
 */
export const compoundTermsMax = 1000;
/** Deepest nesting of parentheses and `not` (levels). Bounds the parser's recursion. */
export const compoundDepthMax = 64;

export type Engine = "G" | "P" | "I" | "J" | "L" | "E" | "S" | "R";

export type CompoundTerm =
  | { kind: "glob"; pattern: string }
  /** `delimiter` is the one given before `@` for G/P/I/J, else `:` */
  | { kind: "engine"; engine: Engine; delimiter: string; pattern: string };

export type CompoundNode =
  /** `afterNot`: the term directly follows `not` (the master then does not report L@ ids as missing) */
  | { type: "term"; term: CompoundTerm; afterNot: boolean }
  | { type: "not"; operand: CompoundNode }
  | { type: "and"; left: CompoundNode; right: CompoundNode }
  | { type: "or"; left: CompoundNode; right: CompoundNode };

type Operator = "and" | "or" | "not" | "(" | ")";
type Token = { op: Operator } | { term: CompoundTerm };

/** Salt's TARGET_REX: `.` there excludes only `\n`, and `$` allows one final `\n`. */
const TARGET_WORD = /^(?:([GPIJLNSER])((?<=[GPIJ])[^\n])?@)?([^\n]+)\n?$/;

/** Unwinds a failed parse; never leaves this module (the caller sees null, as Salt selects nothing): not a BrineError. */
class CompoundError extends Error {}

function parseWord(word: string): { engine: string | undefined; delimiter: string | undefined; pattern: string } {
  const m = TARGET_WORD.exec(word);
  if (!m) return { engine: undefined, delimiter: undefined, pattern: word };
  return { engine: m[1], delimiter: m[2], pattern: m[3]! };
}

function initialWords(tgt: unknown): string[] {
  if (typeof tgt === "string") return pySplit(tgt);
  if (Array.isArray(tgt) && tgt.every((w) => typeof w === "string")) return [...tgt];
  throw new CompoundError("compound target is neither a string nor a list of strings");
}

/** Words → tokens: operators, terms, nodegroups spliced in, Salt's implicit `and` before `not`. */
function tokenize(tgt: unknown, nodegroups: NodegroupConfig | undefined): Token[] {
  const queue = initialWords(tgt);
  const tokens: Token[] = [];
  let consumed = 0;
  while (consumed < queue.length) {
    if (queue.length > compoundTermsMax) throw new CompoundError("expression has too many words");
    const word = queue[consumed++]!;
    if (COMPOUND_OPERATORS.has(word)) {
      const op = word as Operator;
      if (op === "not" && tokens.length > 0) {
        const prev = tokens[tokens.length - 1]!;
        if (!("op" in prev) || (prev.op !== "and" && prev.op !== "or" && prev.op !== "(")) {
          tokens.push({ op: "and" });
        }
      }
      tokens.push({ op });
      continue;
    }
    const { engine, delimiter, pattern } = parseWord(word);
    if (engine === undefined) {
      tokens.push({ term: { kind: "glob", pattern } });
    } else if (engine === "N") {
      const expansion = expandNodegroup(pattern, nodegroups);
      if (expansion === null) throw new CompoundError(`nodegroup ${pattern} cannot be expanded`);
      queue.splice(consumed, 0, "(", ...expansion, ")");
    } else {
      if (engine === "E" && compilePcreTarget(pattern) === null) throw new CompoundError("invalid E@ regex");
      tokens.push({ term: { kind: "engine", engine: engine as Engine, delimiter: delimiter ?? ":", pattern } });
    }
  }
  if (tokens.length > compoundTermsMax) throw new CompoundError("expression has too many words");
  return tokens;
}

class Parser {
  #pos = 0;
  constructor(private readonly tokens: readonly Token[]) {}

  parse(): CompoundNode {
    const node = this.#or(0);
    if (this.#pos !== this.tokens.length) throw new CompoundError("unexpected word after expression");
    return node;
  }

  #peekOp(): Operator | undefined {
    const t = this.tokens[this.#pos];
    return t !== undefined && "op" in t ? t.op : undefined;
  }

  #or(depth: number): CompoundNode {
    return this.#chain("or", depth, (d) => this.#and(d));
  }

  #and(depth: number): CompoundNode {
    return this.#chain("and", depth, (d) => this.#not(d));
  }

  /** `operand (op operand)*`, folded to the left. */
  #chain(op: "and" | "or", depth: number, operand: (depth: number) => CompoundNode): CompoundNode {
    let left = operand(depth);
    while (this.#peekOp() === op) {
      this.#pos += 1;
      left = { type: op, left, right: operand(depth) };
    }
    return left;
  }

  #not(depth: number): CompoundNode {
    if (this.#peekOp() !== "not") return this.#primary(depth, false);
    this.#pos += 1;
    if (depth + 1 > compoundDepthMax) throw new CompoundError("expression nests too deeply");
    // a term or a parenthesised group follows; `not not` was already made `not and not`, an error
    return { type: "not", operand: this.#primary(depth + 1, true) };
  }

  #primary(depth: number, afterNot: boolean): CompoundNode {
    const t = this.tokens[this.#pos];
    if (t === undefined) throw new CompoundError("expression ends early");
    if ("term" in t) {
      this.#pos += 1;
      return { type: "term", term: t.term, afterNot };
    }
    if (t.op !== "(") throw new CompoundError(`unexpected ${t.op}`);
    if (depth + 1 > compoundDepthMax) throw new CompoundError("expression nests too deeply");
    this.#pos += 1;
    const inner = this.#or(depth + 1);
    if (this.#peekOp() !== ")") throw new CompoundError("missing )");
    this.#pos += 1;
    return inner;
  }
}

/**
 * Parses a compound target (a string, or a list of words as the CLI sends an expanded nodegroup).
 * `nodegroups` resolves `N@`. Returns null for any error; never throws.
 */
export function parseCompound(tgt: unknown, nodegroups?: NodegroupConfig): CompoundNode | null {
  try {
    return new Parser(tokenize(tgt, nodegroups)).parse();
  } catch {
    // CompoundError, or a RangeError should a pathological input still get past the bounds
    return null;
  }
}

/** Every term of the tree, left to right. */
export function compoundTerms(node: CompoundNode): CompoundTerm[] {
  const out: CompoundTerm[] = [];
  const walk = (n: CompoundNode): void => {
    if (n.type === "term") out.push(n.term);
    else if (n.type === "not") walk(n.operand);
    else {
      walk(n.left);
      walk(n.right);
    }
  };
  walk(node);
  return out;
}

/**
 * The master's evaluation: a term becomes a membership mask over the accepted minions (1 = in the set),
 * `not` is the complement within the accepted minions, `and`/`or` intersect and unite.
 * `termMask` must return a mask of length `size`.
 */
export function evaluateCompoundSet(
  node: CompoundNode,
  size: number,
  termMask: (term: CompoundTerm, afterNot: boolean) => Uint8Array,
): Uint8Array {
  switch (node.type) {
    case "term":
      return termMask(node.term, node.afterNot);
    case "not": {
      const inner = evaluateCompoundSet(node.operand, size, termMask);
      const out = new Uint8Array(size);
      for (let i = 0; i < size; i += 1) out[i] = inner[i] ? 0 : 1;
      return out;
    }
    case "and":
    case "or": {
      const left = evaluateCompoundSet(node.left, size, termMask);
      const right = evaluateCompoundSet(node.right, size, termMask);
      const out = new Uint8Array(size);
      const both = node.type === "and";
      for (let i = 0; i < size; i += 1) out[i] = (both ? left[i]! & right[i]! : left[i]! | right[i]!) ? 1 : 0;
      return out;
    }
  }
}

/** The minion's evaluation: each term is true or false for this one minion. */
export function evaluateCompoundBool(node: CompoundNode, termMatches: (term: CompoundTerm) => boolean): boolean {
  switch (node.type) {
    case "term":
      return termMatches(node.term);
    case "not":
      return !evaluateCompoundBool(node.operand, termMatches);
    case "and":
      return evaluateCompoundBool(node.left, termMatches) && evaluateCompoundBool(node.right, termMatches);
    case "or":
      return evaluateCompoundBool(node.left, termMatches) || evaluateCompoundBool(node.right, termMatches);
  }
}
