import { test } from "node:test";
import assert from "node:assert/strict";
import { checkMinions, minionMatches, subdictMatch } from "../../src/lib/targeting/index.js";
import { contextOf } from "./helpers.js";

const grains = {
  os: "Debian",
  num_cpus: 4,
  virtual: true,
  nothing: null,
  role: "web:front", // a value containing the delimiter
  roles: ["web", "cache"],
  pkg: { nginx: "1.24", redis: "7.0" },
  hw: { cpu: { vendor: "Intel" } },
  disks: [{ name: "sda", size: 100 }, { name: "sdb" }],
  ipv4: ["10.0.0.5", "127.0.0.1"],
  empty: {},
};

function expectMatch(expr: string, expected: boolean, delimiter = ":"): void {
  assert.equal(subdictMatch(grains, expr, delimiter), expected, `${expr} (delimiter ${delimiter})`);
}

test("a key path walks nested dicts and the rest is a glob", () => {
  expectMatch("os:Debian", true);
  expectMatch("os:Deb*", true);
  expectMatch("os:Ubuntu", false);
  expectMatch("hw:cpu:vendor:Intel", true);
  expectMatch("hw:cpu:vendor:AMD", false);
  expectMatch("missing:key", false);
});

test("value and pattern are both lower-cased before comparing", () => {
  expectMatch("os:debian", true);
  expectMatch("os:DEBIAN", true);
  expectMatch("hw:cpu:vendor:iNtEl", true);
});

test("values are compared in their Python str() form", () => {
  expectMatch("num_cpus:4", true);
  expectMatch("virtual:True", true); // str(True) == "True"
  expectMatch("virtual:true", true);
  expectMatch("nothing:None", true); // str(None) == "None"
});

test("the delimiter may appear in the value: every split is tried", () => {
  expectMatch("role:web:front", true); // key `role`, value `web:front`
  expectMatch("role:web:*", true);
  expectMatch("role:web", false);
});

test("a list matches when any member does", () => {
  expectMatch("roles:cache", true);
  expectMatch("roles:ca*", true);
  expectMatch("roles:db", false);
});

test("lists are walked by index (negative from the end) or into their dict members", () => {
  expectMatch("ipv4:0:10.*", true);
  expectMatch("ipv4:1:10.*", false);
  expectMatch("disks:0:name:sda", true);
  expectMatch("disks:-1:name:sdb", true);
  expectMatch("disks:5:name:sda", false);
  expectMatch("disks:name:sdb", true); // a list of dicts: each member dict is tried
  expectMatch("disks:name:sdc", false);
});

test("a dict matches on one of its key names, or `*`", () => {
  expectMatch("pkg:nginx", true);
  expectMatch("pkg:apache", false);
  expectMatch("pkg:*", true);
  expectMatch("pkg:nginx:1.24", true);
  expectMatch("empty:*", false); // an empty dict is indistinguishable from "not found" in Salt
});

test("a leading `*:` searches one level below every top-level key", () => {
  expectMatch("*:Debian", true);
  expectMatch("*:cache", true); // inside a list value
  expectMatch("*:nginx", true); // a key of a dict value
  expectMatch("*:Intel", false); // two levels down: not searched
  expectMatch("*:nomatch", false);
});

test("a custom delimiter splits the key path", () => {
  expectMatch("os%Debian", true, "%");
  expectMatch("hw%cpu%vendor%Intel", true, "%");
  expectMatch("os%Debian", false, ":"); // no delimiter: nothing to look up
  // Salt quirk kept: a dict found with a custom delimiter is searched further with ':'
  expectMatch("hw%cpu:vendor:Intel", true, "%");
});

test("regex mode uses an anchored re.match on the lower-cased value and pattern", () => {
  assert.equal(subdictMatch(grains, "os:deb.*", ":", { regex: true }), true);
  assert.equal(subdictMatch(grains, "os:ebian", ":", { regex: true }), false);
  assert.equal(subdictMatch(grains, "os:D[a-z]+$", ":", { regex: true }), true); // pattern lower-cased too
  assert.equal(subdictMatch(grains, "os:(", ":", { regex: true }), false); // invalid regex: no match
});

test("non-dict data, a non-string expression or an empty delimiter never match", () => {
  assert.equal(subdictMatch(undefined, "os:Debian"), false);
  assert.equal(subdictMatch("Debian", "os:Debian"), false);
  assert.equal(subdictMatch(grains, ["os:Debian"]), false);
  assert.equal(subdictMatch(grains, "os:Debian", ""), false);
});

test("deeply nested data with a long key path is cut off by the work budget", () => {
  let deep: Record<string, unknown> = { leaf: "x" };
  for (let i = 0; i < 40; i += 1) deep = { a: deep };
  const expr = `${Array(40).fill("a").join(":")}:nomatch`;
  // without the budget this tries every split of 41 keys (2^40 paths) and never returns: the test runner's timeout
  // fails it; no clock is read here (a time bound fails on a loaded box, not on a regression)
  assert.equal(subdictMatch(deep, expr), false);
  // the budget does not get in the way of an ordinary deep match
  assert.equal(subdictMatch(deep, `${Array(40).fill("a").join(":")}:leaf:x`), true);
});

test("master grain targets use the publish delimiter", () => {
  const ctx = contextOf([
    { id: "deb1", data: { grains } },
    { id: "cent1", data: { grains: { os: "CentOS", roles: ["db"] } } },
  ]);
  assert.deepEqual(checkMinions("os:Debian", "grain", ctx), { minions: ["deb1"], missing: [] });
  assert.deepEqual(checkMinions("os%Debian", "grain", ctx, { delimiter: "%" }).minions, ["deb1"]);
  assert.deepEqual(checkMinions("os%Debian", "grain", ctx).minions, []);
  assert.deepEqual(checkMinions("os:(c|d)", "grain_pcre", ctx).minions, ["cent1", "deb1"]);
  assert.deepEqual(checkMinions("G%@roles%db or G@roles:web", "compound", ctx).minions, ["cent1", "deb1"]);
});

test("a minion's grain matcher needs the delimiter in the target and uses the load's delimiter", () => {
  const self = { id: "deb1", grains, pillar: {} };
  assert.equal(minionMatches({ tgt: "os:Debian", tgt_type: "grain" }, self), true);
  assert.equal(minionMatches({ tgt: "os%Debian", tgt_type: "grain", delimiter: "%" }, self), true);
  assert.equal(minionMatches({ tgt: "os%Debian", tgt_type: "grain" }, self), false);
  assert.equal(minionMatches({ tgt: "Debian", tgt_type: "grain" }, self), false);
  assert.equal(minionMatches({ tgt: "os:deb", tgt_type: "grain_pcre" }, self), true);
  assert.equal(minionMatches({ tgt: "G%@os%Debian and G@roles:web", tgt_type: "compound" }, self), true);
});
