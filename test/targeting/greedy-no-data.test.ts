import { test } from "node:test";
import assert from "node:assert/strict";
import { checkMinions, type TargetContext } from "../../src/lib/targeting/index.js";
import { contextOf, type FakeMinion } from "./helpers.js";

const fleet: FakeMinion[] = [
  { id: "web1", data: { grains: { os: "Debian", ipv4: ["10.0.0.1"] }, pillar: { env: "prod" } } },
  { id: "web2" }, // nothing cached yet
  { id: "db1", data: { grains: { os: "CentOS", ipv4: ["10.9.0.1"] }, pillar: { env: "dev" } } },
  { id: "db2" }, // nothing cached yet
  { id: "bare", data: {} }, // cached, but without grains or pillar
];
const greedy = contextOf(fleet);
const strict = contextOf(fleet, { greedy: false });

test("greedy (the default): minions with no cached data count as grain matches", () => {
  assert.deepEqual(checkMinions("os:Debian", "grain", greedy).minions, ["db2", "web1", "web2"]);
  assert.deepEqual(checkMinions("os:deb", "grain_pcre", greedy).minions, ["db2", "web1", "web2"]);
});

test("not greedy: only minions whose cached data matches", () => {
  assert.deepEqual(checkMinions("os:Debian", "grain", strict).minions, ["web1"]);
  assert.deepEqual(checkMinions("os:deb", "grain_pcre", strict).minions, ["web1"]);
});

test("cached data without the grains or pillar asked about is not a match, greedy or not", () => {
  assert.ok(!checkMinions("os:*", "grain", greedy).minions.includes("bare"));
  assert.ok(!checkMinions("env:*", "pillar", greedy).minions.includes("bare"));
});

test("pillar targets follow the same rule", () => {
  assert.deepEqual(checkMinions("env:prod", "pillar", greedy).minions, ["db2", "web1", "web2"]);
  assert.deepEqual(checkMinions("env:prod", "pillar_exact", greedy).minions, ["db2", "web1", "web2"]);
  assert.deepEqual(checkMinions("env:d.v", "pillar_pcre", strict).minions, ["db1"]);
});

test("ipcidr targets follow the same rule, but an invalid target selects nobody", () => {
  assert.deepEqual(checkMinions("10.0.0.0/16", "ipcidr", greedy).minions, ["db2", "web1", "web2"]);
  assert.deepEqual(checkMinions("10.0.0.0/16", "ipcidr", strict).minions, ["web1"]);
  assert.deepEqual(checkMinions("10.0.0.1/16", "ipcidr", greedy).minions, []);
});

test("id-based targets do not depend on cached data", () => {
  assert.deepEqual(checkMinions("web*", "glob", strict).minions, ["web1", "web2"]);
  assert.deepEqual(checkMinions("db", "pcre", strict).minions, ["db1", "db2"]);
  assert.deepEqual(checkMinions("web2,db2", "list", strict).minions, ["db2", "web2"]);
});

test("greedy applies to each compound term: `not` of a greedy term excludes minions without data", () => {
  assert.deepEqual(checkMinions("G@os:Debian and web*", "compound", greedy).minions, ["web1", "web2"]);
  assert.deepEqual(checkMinions("not G@os:Debian", "compound", greedy).minions, ["bare", "db1"]);
  assert.deepEqual(checkMinions("not G@os:Debian", "compound", strict).minions, ["bare", "db1", "db2", "web2"]);
});

test("each minion's data is looked up at most once per check", () => {
  const calls = new Map<string, number>();
  const base = contextOf(fleet);
  const counting: TargetContext = {
    ...base,
    minionData: (id) => {
      calls.set(id, (calls.get(id) ?? 0) + 1);
      return base.minionData(id);
    },
  };
  checkMinions("G@os:Debian or I@env:prod or S@10.0.0.0/8", "compound", counting);
  assert.ok(calls.size > 0);
  for (const [id, n] of calls) assert.equal(n, 1, id);
});

test("a failing data lookup selects nothing instead of throwing", () => {
  const failing: TargetContext = {
    acceptedIds: ["web1"],
    minionData: () => {
      throw new Error("cache unavailable");
    },
  };
  assert.deepEqual(checkMinions("os:Debian", "grain", failing), { minions: [], missing: [] });
  assert.deepEqual(checkMinions("web*", "glob", failing).minions, ["web1"]);
});
