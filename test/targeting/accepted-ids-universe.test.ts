import { test } from "node:test";
import assert from "node:assert/strict";
import { universe } from "../../src/lib/targeting/check-minions.js";
import { checkMinions } from "../../src/lib/targeting/index.js";

const none = () => undefined;

test("a key store listing already in Salt's id order is the universe itself, not a copy (a publish to a whole fleet sorts nothing)", () => {
  const listing = ["Alpha", "beta", "beta2", "gamma"];
  assert.equal(universe(listing), listing);
  assert.deepEqual(checkMinions("*", "glob", { acceptedIds: listing, minionData: none }), { minions: listing, missing: [] });
});

test("accepted ids out of order, repeated or with dotfiles are sorted, deduplicated and cleaned before a target sees them", () => {
  assert.deepEqual(universe(["gamma", "alpha", "gamma", ".hidden", "Beta"]), ["alpha", "Beta", "gamma"]);
  assert.deepEqual(universe(["b", "a"]), ["a", "b"]);
  // equal neighbours are not strictly ordered: deduplicated
  assert.deepEqual(universe(["a", "a"]), ["a"]);
  assert.deepEqual(checkMinions("*", "glob", { acceptedIds: ["m2", "m1", "m2", ".x"], minionData: none }), { minions: ["m1", "m2"], missing: [] });
});

test("a list target's missing ids are judged against the cleaned universe", () => {
  assert.deepEqual(checkMinions("m1,m3,.x", "list", { acceptedIds: ["m2", "m1", ".x"], minionData: none }), { minions: ["m1"], missing: [".x", "m3"] });
});
