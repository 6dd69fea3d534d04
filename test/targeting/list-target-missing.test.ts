import { test } from "node:test";
import assert from "node:assert/strict";
import { checkMinions, minionMatches } from "../../src/lib/targeting/index.js";
import { contextOf } from "./helpers.js";

const ctx = contextOf([
  { id: "alpha", data: { grains: { os: "Debian" } } },
  { id: "beta", data: { grains: { os: "CentOS" } } },
  { id: "gamma", data: { grains: { os: "Debian" } } },
]);

test("listed accepted ids become minions, listed unknown ids become missing", () => {
  assert.deepEqual(checkMinions("beta,alpha,zeta", "list", ctx), { minions: ["alpha", "beta"], missing: ["zeta"] });
});

test("a list given as a string drops empty items", () => {
  assert.deepEqual(checkMinions(",alpha,,gamma,", "list", ctx), { minions: ["alpha", "gamma"], missing: [] });
  assert.deepEqual(checkMinions("", "list", ctx), { minions: [], missing: [] });
});

test("a list given as an array is used as is (the CLI sends -L as a list)", () => {
  assert.deepEqual(checkMinions(["gamma", "omega", "alpha"], "list", ctx), {
    minions: ["alpha", "gamma"],
    missing: ["omega"],
  });
  // an item with a comma is one id, not two
  assert.deepEqual(checkMinions(["alpha,beta"], "list", ctx), { minions: [], missing: ["alpha,beta"] });
});

test("repeated ids are reported once", () => {
  assert.deepEqual(checkMinions("alpha,alpha,zeta,zeta", "list", ctx), { minions: ["alpha"], missing: ["zeta"] });
});

test("a list target that is neither string nor list selects nothing", () => {
  assert.deepEqual(checkMinions(42, "list", ctx), { minions: [], missing: [] });
});

test("L@ in a compound target reports missing ids", () => {
  assert.deepEqual(checkMinions("L@alpha,zeta or G@os:CentOS", "compound", ctx), {
    minions: ["alpha", "beta"],
    missing: ["zeta"],
  });
});

test("L@ right after `not` excludes ids without reporting them missing", () => {
  assert.deepEqual(checkMinions("G@os:Debian and not L@gamma,zeta", "compound", ctx), {
    minions: ["alpha"],
    missing: [],
  });
  // Salt only skips the report when `not` directly precedes the term, not across a parenthesis
  assert.deepEqual(checkMinions("G@os:Debian and not ( L@gamma,zeta )", "compound", ctx), {
    minions: ["alpha"],
    missing: ["zeta"],
  });
});

test("a minion matches a string list by whole comma-separated items only", () => {
  const self = { id: "web1" };
  assert.equal(minionMatches({ tgt: "web1", tgt_type: "list" }, self), true);
  assert.equal(minionMatches({ tgt: "web1,db1", tgt_type: "list" }, self), true);
  assert.equal(minionMatches({ tgt: "db1,web1", tgt_type: "list" }, self), true);
  assert.equal(minionMatches({ tgt: "db1,web1,db2", tgt_type: "list" }, self), true);
  assert.equal(minionMatches({ tgt: "web10,aweb1", tgt_type: "list" }, self), false);
  assert.equal(minionMatches({ tgt: "web", tgt_type: "list" }, self), false);
});

test("a minion matches a list target by membership", () => {
  const self = { id: "web1" };
  assert.equal(minionMatches({ tgt: ["db1", "web1"], tgt_type: "list" }, self), true);
  assert.equal(minionMatches({ tgt: ["web1,db1"], tgt_type: "list" }, self), false);
  assert.equal(minionMatches({ tgt: 7, tgt_type: "list" }, self), false);
});
