import { test } from "node:test";
import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { checkMinions, fnmatch, fnmatchFilter, minionMatches, patternCacheEntriesMax } from "../../src/lib/targeting/index.js";
import { BoundedCache } from "../../src/lib/targeting/bounded-cache.js";
import { contextOf } from "./helpers.js";

// Expected values were taken from CPython 3.11 `fnmatch.fnmatchcase`.
const CASES: ReadonlyArray<[name: string, pattern: string, expected: boolean]> = [
  ["web01", "web*", true],
  ["a/b", "a*b", true], // `*` crosses `/`
  ["a/b", "a?b", true], // ...and so does `?`
  ["", "*", true],
  ["ab", "a?", true],
  ["a", "a?", false],
  ["b", "[abc]", true],
  ["d", "[!abc]", true],
  ["a", "[!abc]", false],
  ["]", "[]]", true], // `]` first in a set is a member
  ["x", "[!]]", true],
  ["]", "[!]]", false],
  ["[ab", "[ab", true], // an unclosed `[` is literal
  ["Web01", "web*", false], // case-sensitive
  ["{a,b}", "{a,b}", true], // no brace expansion
  ["a", "{a,b}", false],
  ["a\nb", "a*b", true], // `*` crosses newlines
  ["m", "[z-a]", false], // a reversed range matches nothing
  ["q", "[!z-a]", true], // ...and its negation anything
  ["a.b", "a.b", true],
  ["axb", "a.b", false], // regex metacharacters are literal
  ["a+", "a+", true],
  ["-", "[a-]", true], // trailing `-` is literal
  ["b", "[a-]", false],
  ["-", "[!-a]", false], // leading `-` is literal
  ["c", "[a-c-e]", true], // `-` right after a range is literal
  ["-", "[a-c-e]", true],
  ["d", "[a-c-e]", false],
  ["\u{1F600}", "?", true], // `?` is one code point, not one UTF-16 unit
  ["web-1", "web-[0-9]", true],
  ["\\", "[\\]", true], // no escaping: a backslash is an ordinary member
  ["^", "[^a]", true], // `^` is not negation in fnmatch
  ["b", "[^a]", false],
  ["web01x", "web01", false], // the whole name must match
];

test("fnmatch agrees with Python's fnmatchcase on a table of edge cases", () => {
  for (const [name, pattern, expected] of CASES) {
    assert.equal(fnmatch(name, pattern), expected, `fnmatch(${JSON.stringify(name)}, ${JSON.stringify(pattern)})`);
  }
});

test("fnmatch never matches non-string input", () => {
  assert.equal(fnmatch(["web01"], "*"), false);
  assert.equal(fnmatch("web01", ["*"]), false);
  assert.equal(fnmatch("web01", null), false);
});

test("many stars stay fast on a long non-matching name (no exponential backtracking)", async () => {
  // Run in a worker: a backtracking regression would block this thread for hours instead of failing.
  const url = new URL("../../src/lib/targeting/fnmatch.js", import.meta.url).href;
  const code = `
    const { parentPort } = require("node:worker_threads");
    import(${JSON.stringify(url)}).then(({ fnmatch }) => {
      const name = "a".repeat(5000);
      const pattern = "*a*a*a*a*a*a*a*a*a*b";
      parentPort.postMessage([fnmatch(name, pattern), fnmatch(name + "b", pattern)]);
    });`;
  const worker = new Worker(code, { eval: true });
  try {
    const result = await new Promise((resolve, reject) => {
      // a hang guard, not a speed bound: exponential backtracking on 5,000 characters takes hours, while a loaded CI
      // box has been seen to take over 2 s to start the worker and answer
      const timer = setTimeout(() => reject(new Error("glob matching took over 60 s: backtracking")), 60_000);
      worker.once("message", (m) => {
        clearTimeout(timer);
        resolve(m);
      });
      worker.once("error", reject);
    });
    assert.deepEqual(result, [false, true]);
  } finally {
    await worker.terminate();
  }
});

test("fnmatchFilter keeps the matching names in order", () => {
  assert.deepEqual(fnmatchFilter(["db1", "web2", "web1", "webx"], "web[0-9]"), ["web2", "web1"]);
});

test("patterns keep matching correctly after the compiled-pattern cache has evicted them", () => {
  const first = "evict-me-*";
  assert.equal(fnmatch("evict-me-1", first), true);
  for (let i = 0; i < patternCacheEntriesMax + 16; i += 1) fnmatch(`x${i}`, `x${i}`);
  assert.equal(fnmatch("evict-me-1", first), true);
  assert.equal(fnmatch("evict-me", first), false);
});

test("the bounded cache evicts the least recently used entry", () => {
  const cache = new BoundedCache<string, number>(2);
  cache.set("a", 1);
  cache.set("b", 2);
  assert.equal(cache.get("a"), 1); // "a" is now the most recent
  cache.set("c", 3); // evicts "b"
  assert.equal(cache.size, 2);
  assert.equal(cache.get("b"), undefined);
  assert.equal(cache.get("a"), 1);
  assert.equal(cache.get("c"), 3);
});

test("master glob selects accepted ids with fnmatch; a non-string glob selects nothing", () => {
  const ctx = contextOf([{ id: "web1" }, { id: "web2" }, { id: "db1" }, { id: "Web3" }]);
  assert.deepEqual(checkMinions("web*", "glob", ctx), { minions: ["web1", "web2"], missing: [] });
  // in Salt's order: case ignored (sorted_ignorecase of the accepted keys), not code units ("Web3" first)
  assert.deepEqual(checkMinions("*", "glob", ctx).minions, ["db1", "web1", "web2", "Web3"]);
  assert.deepEqual(checkMinions(["web1"], "glob", ctx), { minions: [], missing: [] });
  // Salt turns a None target into "", which matches no id
  assert.deepEqual(checkMinions(null, "glob", ctx).minions, []);
});

test("master ignores dotfiles in the accepted list", () => {
  const ctx = contextOf([{ id: ".web-hidden" }, { id: "web1" }]);
  assert.deepEqual(checkMinions("*", "glob", ctx).minions, ["web1"]);
});

test("a minion treats a load without tgt_type as a glob, and a non-string glob as no match", () => {
  const self = { id: "web1", grains: {}, pillar: {} };
  assert.equal(minionMatches({ tgt: "web*" }, self), true);
  assert.equal(minionMatches({ tgt: "db*" }, self), false);
  assert.equal(minionMatches({ tgt: ["web1"] }, self), false);
  assert.equal(minionMatches({ tgt: "web[0-9]", tgt_type: "glob" }, self), true);
});
