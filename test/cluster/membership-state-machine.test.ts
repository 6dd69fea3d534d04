import { test } from "node:test";
import assert from "node:assert/strict";
import { Encoder } from "cbor-x";
import { ENTRY_KIND, decodeEntry, encodeEntry } from "../../src/workers/raft/state-machines/entries.js";
import { ClusterGroupState } from "../../src/workers/raft/state-machines/groups.js";
import { MembershipStateMachine } from "../../src/workers/raft/state-machines/membership.js";
import { isWildcardAddress, validateNodeId } from "../../src/shared/cluster-names.js";

const raw = new Encoder({ mapsAsObjects: true, useRecords: false });
/** Bytes that bypass encodeEntry's validation, as a hostile or buggy peer could send. */
const rawEntry = (kind: number, value: unknown): Uint8Array => Uint8Array.from(raw.encode([kind, value]));
const config = (voters: string[], learners: string[] = []) => ({ kind: "CONFIG" as const, value: { voters, learners } });

test("CONFIG replaces voters and learners; version is the entry's index; lists come back sorted", () => {
  const m = new MembershipStateMachine();
  assert.equal(m.version, -1);
  assert.deepEqual(m.snapshot(), { voters: [], learners: [], version: -1 });
  const entry = decodeEntry(encodeEntry(config(["m3", "m1", "m2"], ["m9"])));
  assert.equal(entry.kind, "CONFIG");
  assert.deepEqual(m.apply(entry.value as never, 7), { outcome: "applied" });
  assert.deepEqual(m.snapshot(), { voters: ["m1", "m2", "m3"], learners: ["m9"], version: 7 });
  assert.equal(m.isVoter("m2"), true);
  assert.equal(m.isLearner("m9"), true);
  assert.equal(m.isVoter("m9"), false);
});

test("an older or replayed CONFIG never overwrites a newer one", () => {
  const m = new MembershipStateMachine();
  m.apply({ voters: ["a", "b", "c"], learners: [] }, 10);
  assert.deepEqual(m.apply({ voters: ["x"], learners: [] }, 10), { outcome: "stale" });
  assert.deepEqual(m.apply({ voters: ["x"], learners: [] }, 4), { outcome: "stale" });
  assert.deepEqual(m.voters(), ["a", "b", "c"]);
  assert.equal(m.version, 10);
});

test("wildcard addresses are refused as node ids, in every spelling", () => {
  for (const id of ["0.0.0.0", "0.0.0.0:4520", "::", "[::]", "[::]:4520", "::0", "0:0:0:0:0:0:0:0", "*", "0", "::ffff:0.0.0.0", "000.0.0.00"]) {
    assert.equal(isWildcardAddress(id), true, id);
    assert.throws(() => validateNodeId(id), { code: "CLUSTER_BAD_NODE_ID" }, id);
    assert.throws(() => encodeEntry(config(["m1", id])), { code: "CLUSTER_BAD_NODE_ID" }, id);
  }
  for (const id of ["10.0.0.1", "master-1", "6f1c2b9e-4d6a-4c41-9a1e-1d2f3a4b5c6d", "[fe80::1]:4520", "m1.example.com"]) {
    assert.equal(validateNodeId(id), id);
  }
});

test("empty, duplicate, overlapping, oversized and whitespace node ids are refused with coded errors", () => {
  assert.throws(() => encodeEntry(config(["m1", ""])), { code: "CLUSTER_BAD_NODE_ID" });
  assert.throws(() => encodeEntry(config(["m1", "m1"])), { code: "CLUSTER_BAD_NODE_ID" });
  assert.throws(() => encodeEntry(config(["m1"], ["m1"])), { code: "CLUSTER_BAD_NODE_ID" });
  assert.throws(() => encodeEntry(config(["m 1"])), { code: "CLUSTER_BAD_NODE_ID" });
  assert.throws(() => encodeEntry(config(["m1\n"])), { code: "CLUSTER_BAD_NODE_ID" });
  assert.throws(() => encodeEntry(config(["x".repeat(129)])), { code: "CLUSTER_BAD_NODE_ID" });
  assert.throws(() => encodeEntry(config([])), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => encodeEntry(config(Array.from({ length: 65 }, (_, i) => `m${i}`))), { code: "CLUSTER_TOO_MANY" });
});

test("the same refusals hold for bytes that bypassed the proposer's checks", () => {
  assert.throws(() => decodeEntry(rawEntry(ENTRY_KIND.CONFIG, { voters: ["0.0.0.0"], learners: [] })), { code: "CLUSTER_BAD_NODE_ID" });
  assert.throws(() => decodeEntry(rawEntry(ENTRY_KIND.CONFIG, { voters: ["a", "a"] })), { code: "CLUSTER_BAD_NODE_ID" });
  assert.throws(() => decodeEntry(rawEntry(ENTRY_KIND.CONFIG, { voters: [1, 2] })), { code: "CLUSTER_BAD_NODE_ID" });
  assert.throws(() => decodeEntry(rawEntry(ENTRY_KIND.CONFIG, { voters: "a" })), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => decodeEntry(rawEntry(ENTRY_KIND.CONFIG, ["a"])), { code: "CLUSTER_BAD_ENTRY" });
  // learners may be omitted, as in Salt
  assert.deepEqual(decodeEntry(rawEntry(ENTRY_KIND.CONFIG, { voters: ["b", "a"] })), config(["a", "b"]));
});

test("the cluster group applies a bad CONFIG as a refusal: no throw, state unchanged, index consumed", () => {
  const g = new ClusterGroupState();
  assert.equal(g.apply(encodeEntry(config(["m1", "m2", "m3"])), 1).outcome, "applied");
  const r = g.apply(rawEntry(ENTRY_KIND.CONFIG, { voters: ["m1", "0.0.0.0"], learners: [] }), 2);
  assert.equal(r.outcome, "refused");
  assert.equal(r.outcome === "refused" && r.error.code, "CLUSTER_BAD_NODE_ID");
  assert.equal(g.apply(Uint8Array.of(0xff, 0x00), 3).outcome, "refused");
  assert.deepEqual(g.membership.snapshot(), { voters: ["m1", "m2", "m3"], learners: [], version: 1 });
  assert.equal(g.appliedIndex, 3);
  assert.equal(g.apply(encodeEntry(config(["m1"])), 3).outcome, "stale");
});

test("the cluster ring follows the voters: a new epoch per voter change, none for learner-only changes", () => {
  const g = new ClusterGroupState();
  assert.equal(g.ringTable.epoch, 0);
  assert.deepEqual(g.ringTable.target("m1").assignment.nodes, []);
  g.apply(encodeEntry(config(["m1", "m2", "m3"])), 1);
  assert.equal(g.ringTable.epoch, 1);
  assert.deepEqual(g.ringTable.target("m1").assignment.nodes, ["m1", "m2", "m3"]);
  g.apply(encodeEntry(config(["m1", "m2", "m3"], ["m4"])), 2);
  assert.equal(g.ringTable.epoch, 1, "a learner is not an owner");
  g.apply(encodeEntry(config(["m1", "m2", "m3", "m4"])), 3);
  assert.equal(g.ringTable.epoch, 2);
  assert.deepEqual(g.ringTable.target("m9").assignment.nodes, ["m1", "m2", "m3", "m4"]);
});

test("snapshot/restore round-trips the whole group, ring table history included", () => {
  const g = new ClusterGroupState();
  g.apply(encodeEntry(config(["m1", "m2", "m3"])), 1);
  g.apply(encodeEntry(config(["m1", "m2", "m3", "m4"])), 2);
  g.apply(encodeEntry({ kind: "ROUTE", value: { data_type: "jobs", ring_id: "cluster" } }), 3);
  const copy = new ClusterGroupState();
  copy.restore(g.snapshot());
  assert.deepEqual(copy.membership.snapshot(), g.membership.snapshot());
  assert.deepEqual(copy.routing.snapshot(), g.routing.snapshot());
  assert.equal(copy.appliedIndex, 3);
  assert.equal(copy.ringTable.epoch, 2);
  assert.deepEqual(copy.ringTable.voterTable().owners, g.ringTable.voterTable().owners);
  // and both continue identically from there: a restored master derives the same next table
  const next = encodeEntry(config(["m1", "m3", "m4", "m5"]));
  g.apply(next, 4);
  copy.apply(next, 4);
  assert.deepEqual(copy.ringTable.voterTable().owners, g.ringTable.voterTable().owners);
});

test("a corrupt snapshot is refused and leaves the group untouched", () => {
  const g = new ClusterGroupState();
  g.apply(encodeEntry(config(["m1", "m2"])), 1);
  const good = new ClusterGroupState();
  good.apply(encodeEntry(config(["a", "b", "c"])), 5);
  const bytes = good.snapshot();
  const tampered = raw.decode(bytes) as { machines: { membership_sm: { voters: string[] } } };
  tampered.machines.membership_sm.voters = ["a", "0.0.0.0"];
  assert.throws(() => g.restore(Uint8Array.from(raw.encode(tampered))), { code: "CLUSTER_BAD_SNAPSHOT" });
  assert.throws(() => g.restore(Uint8Array.of(1, 2, 3)), { code: "CLUSTER_BAD_SNAPSHOT" });
  assert.deepEqual(g.membership.voters(), ["m1", "m2"]);
  assert.equal(g.appliedIndex, 1);
});
