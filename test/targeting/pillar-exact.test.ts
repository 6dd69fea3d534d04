import { test } from "node:test";
import assert from "node:assert/strict";
import { checkMinions, minionMatches, subdictMatch } from "../../src/lib/targeting/index.js";
import { contextOf } from "./helpers.js";

const web = { role: "web", tiers: ["front", "edge"], app: { name: "shop*" } };
const web1 = { role: "web1", tiers: ["back"], app: { name: "shop" } };
const ctx = contextOf([
  { id: "m-web", data: { pillar: web } },
  { id: "m-web1", data: { pillar: web1 } },
]);

test("pillar_exact compares for equality: no globbing", () => {
  assert.deepEqual(checkMinions("role:web", "pillar_exact", ctx), { minions: ["m-web"], missing: [] });
  assert.deepEqual(checkMinions("role:web*", "pillar_exact", ctx).minions, []);
  // a glob character in the data is just a character
  assert.deepEqual(checkMinions("app:name:shop*", "pillar_exact", ctx).minions, ["m-web"]);
});

test("pillar (glob) matches where pillar_exact does not", () => {
  assert.deepEqual(checkMinions("role:web*", "pillar", ctx).minions, ["m-web", "m-web1"]);
  assert.deepEqual(checkMinions("role:w?b", "pillar", ctx).minions, ["m-web"]);
  assert.deepEqual(checkMinions("role:web1|web", "pillar_pcre", ctx).minions, ["m-web", "m-web1"]);
});

test("pillar_exact still folds case and matches list members", () => {
  assert.deepEqual(checkMinions("role:WEB", "pillar_exact", ctx).minions, ["m-web"]);
  assert.deepEqual(checkMinions("tiers:edge", "pillar_exact", ctx).minions, ["m-web"]);
  assert.deepEqual(checkMinions("tiers:edg", "pillar_exact", ctx).minions, []);
  assert.equal(subdictMatch(web, "tiers:FRONT", ":", { exact: true }), true);
});

test("compound_pillar_exact makes I@ and J@ exact", () => {
  assert.deepEqual(checkMinions("I@role:web*", "compound", ctx).minions, ["m-web", "m-web1"]);
  assert.deepEqual(checkMinions("I@role:web*", "compound_pillar_exact", ctx).minions, []);
  assert.deepEqual(checkMinions("J@role:web", "compound_pillar_exact", ctx).minions, ["m-web"]);
});

test("a minion's pillar_exact matcher is exact and always splits on ':'", () => {
  const self = { id: "m-web", grains: {}, pillar: web };
  assert.equal(minionMatches({ tgt: "role:web", tgt_type: "pillar_exact" }, self), true);
  assert.equal(minionMatches({ tgt: "role:we*", tgt_type: "pillar_exact" }, self), false);
  assert.equal(minionMatches({ tgt: "role:we*", tgt_type: "pillar" }, self), true);
  // Salt's minion passes the load's delimiter only to grain, grain_pcre and pillar
  assert.equal(minionMatches({ tgt: "role%web", tgt_type: "pillar_exact", delimiter: "%" }, self), false);
  assert.equal(minionMatches({ tgt: "role%web", tgt_type: "pillar", delimiter: "%" }, self), true);
  assert.equal(minionMatches({ tgt: "I@role:web*", tgt_type: "compound_pillar_exact" }, self), false);
});
