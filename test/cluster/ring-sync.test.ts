import { test } from "node:test";
import assert from "node:assert/strict";
import { hostedRings, ringNodes, ringTargets, routeTargets } from "../../src/workers/raft/ring-sync.js";
import { encodeEntry } from "../../src/workers/raft/state-machines/entries.js";
import { ClusterGroupState, RingGroupState } from "../../src/workers/raft/state-machines/groups.js";
import { createRingBuffer } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";

function cluster(): ClusterGroupState {
  const g = new ClusterGroupState();
  g.apply(encodeEntry({ kind: "CONFIG", value: { voters: ["m1", "m2", "m3"], learners: ["m4"] } }), 1);
  g.apply(encodeEntry({ kind: "RING_REGISTRY", value: { ring_id: "jobs", founding_voters: ["m1", "m2"] } }), 2);
  g.apply(encodeEntry({ kind: "RING_REGISTRY", value: { ring_id: "logs", founding_voters: ["m2", "m3"] } }), 3);
  g.apply(encodeEntry({ kind: "ROUTE", value: { data_type: "jobs", ring_id: "jobs" } }), 4);
  return g;
}

test("ring cluster = the cluster voters (learners excluded), on every master", () => {
  const g = cluster();
  for (const self of ["m1", "m4"]) assert.deepEqual(ringNodes(g, new Map(), self).get("cluster"), ["m1", "m2", "m3"]);
});

test("named rings are hosted only by their founders while active", () => {
  const g = cluster();
  assert.deepEqual(hostedRings(g, "m1"), ["jobs"]);
  assert.deepEqual(hostedRings(g, "m2"), ["jobs", "logs"]);
  assert.deepEqual(hostedRings(g, "m4"), []);
  g.apply(encodeEntry({ kind: "RING_REGISTRY", value: { ring_id: "jobs", status: "destroyed" } }), 5);
  assert.deepEqual(hostedRings(g, "m1"), []);
});

test("a named ring holds just this master under members=self (default), its voters under members=voters", () => {
  const g = cluster();
  const jobs = new RingGroupState("jobs", ["m1", "m2"]);
  const groups = new Map([["jobs", jobs]]);
  assert.deepEqual(ringNodes(g, groups, "m1").get("jobs"), ["m1"]);
  assert.deepEqual(ringNodes(g, groups, "m2").get("jobs"), ["m2"]);
  jobs.apply(encodeEntry({ kind: "RING_CONFIG", value: { members: "voters", replicas: 2 } }), 1);
  // no CONFIG in the ring's own log yet: its founders are its voters
  assert.deepEqual(ringNodes(g, groups, "m1").get("jobs"), ["m1", "m2"]);
  jobs.apply(encodeEntry({ kind: "CONFIG", value: { voters: ["m1", "m2", "m5"], learners: [] } }), 2);
  const t = ringTargets(g, groups, "m1").get("jobs")!;
  assert.deepEqual(t.assignment.nodes, ["m1", "m2", "m5"]);
  assert.equal(t.replicas, 2);
  // a non-founder never publishes the ring, even with a group object at hand
  assert.equal(ringTargets(g, groups, "m3").has("jobs"), false);
});

test("epochs: bumped by what changes the published picture, equal on every master for voters rings", () => {
  const jobsA = new RingGroupState("jobs", ["m1", "m2"]);
  const jobsB = new RingGroupState("jobs", ["m1", "m2"]);
  assert.equal(jobsA.ringTable.epoch, 0);
  const entries = [
    encodeEntry({ kind: "RING_CONFIG", value: { members: "voters" } }),
    encodeEntry({ kind: "CONFIG", value: { voters: ["m1", "m2", "m3"], learners: [] } }),
    encodeEntry({ kind: "RING_CONFIG", value: { replicas: 1 } }), // no change
    encodeEntry({ kind: "CONFIG", value: { voters: ["m1", "m3"], learners: [] } }),
  ];
  entries.forEach((e, i) => {
    jobsA.apply(e, i + 1);
    jobsB.apply(e, i + 1);
  });
  assert.equal(jobsA.ringTable.epoch, 3);
  assert.deepEqual(jobsA.ringTable.target("m1"), jobsB.ringTable.target("m3"));
});

test("switching a ring to self and back to voters continues the same table history on every master", () => {
  const a = new RingGroupState("jobs", ["m1", "m2", "m3"]);
  const b = new RingGroupState("jobs", ["m1", "m2", "m3"]);
  const log = [
    encodeEntry({ kind: "RING_CONFIG", value: { members: "voters" } }),
    encodeEntry({ kind: "RING_CONFIG", value: { members: "self" } }),
    encodeEntry({ kind: "CONFIG", value: { voters: ["m1", "m2", "m3", "m4"], learners: [] } }),
    encodeEntry({ kind: "RING_CONFIG", value: { members: "voters" } }),
  ];
  log.forEach((e, i) => {
    a.apply(e, i + 1);
    b.apply(e, i + 1);
    assert.equal(a.ringTable.epoch, b.ringTable.epoch);
  });
  assert.deepEqual(a.ringTable.target("m1").assignment.owners, b.ringTable.target("m2").assignment.owners);
});

test("ringTargets and routeTargets drive a RingWriter; a second sync with no change writes nothing", () => {
  const g = cluster();
  const jobs = new RingGroupState("jobs", ["m1", "m2"]);
  const w = RingWriter.attach(createRingBuffer());
  const r = new RingReader(w.buffer);
  assert.deepEqual(w.sync(ringTargets(g, new Map([["jobs", jobs]]), "m1")), { published: ["cluster", "jobs"], dropped: [] });
  w.publishRoutes(routeTargets(g));
  assert.deepEqual(r.rings(), ["cluster", "jobs"]);
  assert.deepEqual(r.nodes("cluster"), ["m1", "m2", "m3"]);
  assert.deepEqual(r.nodes("jobs"), ["m1"]);
  assert.deepEqual(r.routes(), { jobs: "jobs" });
  assert.deepEqual(w.sync(ringTargets(g, new Map([["jobs", jobs]]), "m1")), { published: [], dropped: [] });
  g.apply(encodeEntry({ kind: "RING_REGISTRY", value: { ring_id: "jobs", status: "destroyed" } }), 5);
  assert.deepEqual(w.sync(ringTargets(g, new Map([["jobs", jobs]]), "m1")), { published: [], dropped: ["jobs"] });
  assert.deepEqual(r.rings(), ["cluster"]);
  assert.equal(r.epoch("cluster"), 1);
});
