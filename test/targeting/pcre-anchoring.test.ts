import { test } from "node:test";
import assert from "node:assert/strict";
import { checkMinions, compilePcre, minionMatches, pcreMatch } from "../../src/lib/targeting/index.js";
import { contextOf } from "./helpers.js";

// Expected values were taken from CPython 3.11 `bool(re.match(pattern, subject))`.
const MATCHES: ReadonlyArray<[pattern: string, subject: string, expected: boolean]> = [
  ["web", "web01", true], // anchored at the start only: a prefix is enough
  ["web", "aweb", false], // ...but it must be at the start
  ["01", "web01", false], // re.match does not search
  ["db|web", "xweb", false], // the anchor covers every alternative
  ["db|web", "web1", true],
  ["web$", "web", true],
  ["web$", "web\n", true], // Python's `$` also matches before a final newline
  ["web$", "web1", false],
  ["web.", "web\n", false], // `.` excludes newline without (?s)
  ["(?s)web.", "web\n", true],
  ["(?i)WEB", "web1", true],
  ["\\Aweb\\Z", "web", true],
  ["\\Aweb\\Z", "web\n", false], // `\Z` is the very end
  ["(?P<c>w)e(?P=c)", "wew", true], // Python named group and back-reference
  ["(?P<c>w)e(?P=c)", "wex", false],
  ["a{,2}b", "aab", true], // Python's `{,n}`
  ["a{,2}b", "aaab", false],
  ["a(?#note)b", "ab", true],
  ["(?x) w e b  # comment", "web", true],
  ["web[]]", "web]", true], // `]` first in a class is a member
  [".*01$", "web01", true],
  [".*01$", "web011", false],
];

test("pcre matching follows Python re.match: anchored at the start, not at the end", () => {
  for (const [pattern, subject, expected] of MATCHES) {
    assert.equal(pcreMatch(subject, pattern), expected, `re.match(${JSON.stringify(pattern)}, ${JSON.stringify(subject)})`);
  }
});

test("invalid patterns compile to null and never match, without throwing", () => {
  // all of these are errors for Python's re too
  for (const bad of ["(", "a)|(b", "a\\", "(?P=n)", "*a", "web$*"]) {
    assert.equal(compilePcre(bad), null, bad);
    assert.equal(pcreMatch("a", bad), false, bad);
  }
  // an unbalanced `)` must not let an alternative escape the start anchor
  assert.equal(pcreMatch("xb", "a)|(b"), false);
});

test("non-string subject or pattern is no match", () => {
  assert.equal(pcreMatch("web1", ["web"]), false);
  assert.equal(pcreMatch(42, "4"), false);
});

test("master pcre target selects ids with a prefix match; an invalid regex selects nothing", () => {
  const ctx = contextOf([{ id: "web1" }, { id: "web2" }, { id: "xweb" }, { id: "db1" }]);
  assert.deepEqual(checkMinions("web\\d", "pcre", ctx), { minions: ["web1", "web2"], missing: [] });
  assert.deepEqual(checkMinions("db|web", "pcre", ctx).minions, ["db1", "web1", "web2"]);
  assert.deepEqual(checkMinions(".*web", "pcre", ctx).minions, ["web1", "web2", "xweb"]);
  assert.deepEqual(checkMinions("web(", "pcre", ctx), { minions: [], missing: [] });
});

test("E@ in a compound target uses the same anchoring; an invalid E@ fails the whole expression", () => {
  const ctx = contextOf([{ id: "web1" }, { id: "xweb" }, { id: "db1" }]);
  assert.deepEqual(checkMinions("E@web or E@db", "compound", ctx).minions, ["db1", "web1"]);
  // Salt's re.compile raises, failing the whole compound, so even `not` of it selects nothing
  assert.deepEqual(checkMinions("not E@web(", "compound", ctx).minions, []);
  assert.equal(minionMatches({ tgt: "not E@web(", tgt_type: "compound" }, { id: "db1" }), false);
});

test("a minion's pcre matcher prefix-matches its id", () => {
  assert.equal(minionMatches({ tgt: "web", tgt_type: "pcre" }, { id: "web01" }), true);
  assert.equal(minionMatches({ tgt: "01", tgt_type: "pcre" }, { id: "web01" }), false);
  assert.equal(minionMatches({ tgt: "(", tgt_type: "pcre" }, { id: "web01" }), false);
});
