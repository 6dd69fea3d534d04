import { test } from "node:test";
import assert from "node:assert/strict";
import {
  checkMinions,
  compoundDepthMax,
  compoundTerms,
  compoundTermsMax,
  minionMatches,
  parseCompound,
} from "../../src/lib/targeting/index.js";
import { contextOf, identityOf, type FakeMinion } from "./helpers.js";

const fleet: FakeMinion[] = [
  { id: "web1", data: { grains: { os: "Debian" } } },
  { id: "web2", data: { grains: { os: "CentOS" } } },
  { id: "db1", data: { grains: { os: "Debian" } } },
  { id: "db2", data: { grains: { os: "CentOS" } } },
  { id: "cache1", data: { grains: { os: "Debian" } } },
];
const ctx = contextOf(fleet);

/** Both sides: the master's set and the ids whose own minion-side check says yes. */
function select(expr: string | string[]): { master: string[]; minions: string[] } {
  const master = checkMinions(expr, "compound", ctx).minions;
  const minions = fleet
    .filter((m) => minionMatches({ tgt: expr, tgt_type: "compound" }, identityOf(m)))
    .map((m) => m.id)
    .sort();
  return { master, minions };
}

function expectSelects(expr: string | string[], expected: string[]): void {
  const { master, minions } = select(expr);
  assert.deepEqual(master, [...expected].sort(), `master: ${JSON.stringify(expr)}`);
  assert.deepEqual(minions, [...expected].sort(), `minion: ${JSON.stringify(expr)}`);
}

test("`and` binds tighter than `or`", () => {
  expectSelects("web* or db* and G@os:Debian", ["web1", "web2", "db1"]);
  expectSelects("G@os:Debian and db* or web*", ["web1", "web2", "db1"]);
});

test("parentheses override precedence", () => {
  expectSelects("( web* or db* ) and G@os:Debian", ["web1", "db1"]);
  expectSelects("G@os:Debian and ( db* or web* )", ["web1", "db1"]);
});

test("`not` applies to the next term or parenthesised group only", () => {
  expectSelects("not web* and G@os:Debian", ["db1", "cache1"]);
  expectSelects("not ( web* and G@os:Debian )", ["web2", "db1", "db2", "cache1"]);
  expectSelects("web* or not db*", ["web1", "web2", "cache1"]);
  expectSelects("not G@os:Debian", ["web2", "db2"]);
});

test("a `not` right after a term or `)` gets an implicit `and`", () => {
  expectSelects("web* not G@os:Debian", ["web2"]);
  expectSelects("( web* or db* ) not G@os:Debian", ["web2", "db2"]);
});

test("a list of words is taken word by word, so a word may contain spaces", () => {
  const withSpaces = contextOf([{ id: "rh1", data: { grains: { os: "Red Hat" } } }, { id: "x1", data: { grains: {} } }]);
  assert.deepEqual(checkMinions(["G@os:Red Hat", "or", "x*"], "compound", withSpaces).minions, ["rh1", "x1"]);
  assert.deepEqual(checkMinions("G@os:Red Hat", "compound", withSpaces).minions, []); // "Hat" and juxtaposition
});

test("malformed expressions select nothing on the master and are false on every minion", () => {
  const errors = [
    "",
    "not not web*", // Salt inserts `and` between the two `not`s, which is a syntax error
    "and web*",
    "or web*",
    "( and web* )",
    "( or web* )",
    "web* db*",
    "( web*",
    "web* )",
    "( )",
    "web* and",
    "not",
    "web* ( db* )",
    "N@nosuchgroup",
    "E@web(",
  ];
  for (const expr of errors) {
    assert.equal(parseCompound(expr), null, JSON.stringify(expr));
    assert.deepEqual(checkMinions(expr, "compound", ctx), { minions: [], missing: [] }, JSON.stringify(expr));
    assert.deepEqual(select(expr).minions, [], JSON.stringify(expr));
  }
  assert.deepEqual(checkMinions(42, "compound", ctx), { minions: [], missing: [] });
  assert.deepEqual(checkMinions(["web*", 3], "compound", ctx), { minions: [], missing: [] });
});

test("words are parsed like Salt's TARGET_REX", () => {
  const terms = (expr: string) => compoundTerms(parseCompound(expr)!);
  assert.deepEqual(terms("G%@os%Debian"), [{ kind: "engine", engine: "G", delimiter: "%", pattern: "os%Debian" }]);
  assert.deepEqual(terms("G@os:Debian"), [{ kind: "engine", engine: "G", delimiter: ":", pattern: "os:Debian" }]);
  // a delimiter is only allowed for G P I J
  assert.deepEqual(terms("L%@a,b"), [{ kind: "glob", pattern: "L%@a,b" }]);
  // an engine letter Salt does not know makes the word a glob
  assert.deepEqual(terms("X@foo"), [{ kind: "glob", pattern: "X@foo" }]);
  // an engine with an empty pattern is a glob too
  assert.deepEqual(terms("G@"), [{ kind: "glob", pattern: "G@" }]);
  assert.deepEqual(terms("R@%cluster"), [{ kind: "engine", engine: "R", delimiter: ":", pattern: "%cluster" }]);
});

test("unknown engine letters behave as globs on both sides", () => {
  const odd = contextOf([{ id: "X@foo" }, { id: "web1" }]);
  assert.deepEqual(checkMinions("X@foo", "compound", odd).minions, ["X@foo"]);
  assert.equal(minionMatches({ tgt: "X@foo", tgt_type: "compound" }, { id: "web1" }), false);
});

test(`expressions are bounded: at most ${compoundTermsMax} words and ${compoundDepthMax} levels`, () => {
  const words = (n: number) => Array.from({ length: n }, (_, i) => (i % 2 === 0 ? "web1" : "or")).join(" ");
  assert.notEqual(parseCompound(words(compoundTermsMax - 1)), null);
  assert.equal(parseCompound(words(compoundTermsMax + 1)), null);
  const nested = (d: number) => `${"( ".repeat(d)}web1${" )".repeat(d)}`;
  assert.notEqual(parseCompound(nested(compoundDepthMax)), null);
  assert.equal(parseCompound(nested(compoundDepthMax + 1)), null);
  assert.deepEqual(checkMinions(nested(compoundDepthMax + 1), "compound", ctx).minions, []);
  assert.deepEqual(checkMinions(nested(compoundDepthMax), "compound", ctx).minions, ["web1"]);
});
