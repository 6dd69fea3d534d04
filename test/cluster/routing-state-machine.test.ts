import { test } from "node:test";
import assert from "node:assert/strict";
import { Encoder } from "cbor-x";
import { ENTRY_KIND, decodeEntry, encodeEntry } from "../../src/workers/raft/state-machines/entries.js";
import { ClusterGroupState, RingGroupState } from "../../src/workers/raft/state-machines/groups.js";
import { clusterLimits } from "../../src/shared/cluster-limits.js";
import { RoutingStateMachine } from "../../src/workers/raft/state-machines/routing.js";

const raw = new Encoder({ mapsAsObjects: true, useRecords: false });
const route = (data_type: string, ring_id: string | null) => ({ kind: "ROUTE" as const, value: { data_type, ring_id } });

test("ROUTE maps a data type to a ring or to None; routing_version is the last ROUTE's index", () => {
  const r = new RoutingStateMachine();
  assert.deepEqual(r.snapshot(), { routes: {}, version: -1 });
  r.apply({ data_type: "jobs", ring_id: "jobs_ring" }, 4);
  r.apply({ data_type: "events", ring_id: "cluster" }, 6);
  assert.equal(r.get("jobs"), "jobs_ring");
  // Salt: clearing routes to None, the key stays
  r.apply({ data_type: "jobs", ring_id: null }, 9);
  assert.deepEqual(r.snapshot(), { routes: { events: "cluster", jobs: null }, version: 9 });
  assert.equal(r.get("jobs"), null);
  assert.equal(r.get("unknown"), null);
  assert.deepEqual(r.apply({ data_type: "jobs", ring_id: "x" }, 9), { outcome: "stale" });
});

test("ROUTE values are validated both ways; a missing ring_id means None", () => {
  assert.deepEqual(decodeEntry(encodeEntry(route("jobs", "r1"))), route("jobs", "r1"));
  assert.deepEqual(decodeEntry(Uint8Array.from(raw.encode([ENTRY_KIND.ROUTE, { data_type: "jobs" }]))), route("jobs", null));
  assert.throws(() => encodeEntry(route("", "r1")), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => encodeEntry(route("jobs/../x", "r1")), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => encodeEntry(route("jobs", "bad ring")), { code: "CLUSTER_BAD_RING_ID" });
  assert.throws(() => decodeEntry(Uint8Array.from(raw.encode([ENTRY_KIND.ROUTE, { data_type: 5 }]))), { code: "CLUSTER_BAD_ENTRY" });
});

test("more distinct data types than routesMax are refused deterministically", () => {
  const r = new RoutingStateMachine();
  for (let i = 0; i < clusterLimits.routesMax; i++) assert.equal(r.apply({ data_type: `t${i}`, ring_id: null }, i + 1).outcome, "applied");
  const refused = r.apply({ data_type: "one-more", ring_id: "x" }, 1000);
  assert.equal(refused.outcome === "refused" && refused.error.code, "CLUSTER_TOO_MANY");
  assert.equal(r.version, clusterLimits.routesMax);
  // re-routing an existing type is still fine
  assert.equal(r.apply({ data_type: "t0", ring_id: "x" }, 1001).outcome, "applied");
});

test("RING_REGISTRY: create, destroy keeps founders for audit, re-create; founders of a live ring cannot change", () => {
  const g = new ClusterGroupState();
  const reg = (v: object, i: number) => g.apply(encodeEntry({ kind: "RING_REGISTRY", value: v as never }), i);
  assert.equal(reg({ ring_id: "jobs", founding_voters: ["m3", "m1"] }, 1).outcome, "applied");
  assert.deepEqual(g.registry.snapshot(), { rings: { jobs: { founding_voters: ["m1", "m3"], status: "active" } }, version: 1 });
  const conflict = reg({ ring_id: "jobs", founding_voters: ["m1", "m2"], status: "active" }, 2);
  assert.equal(conflict.outcome === "refused" && conflict.error.code, "CLUSTER_RING_CONFLICT");
  assert.equal(reg({ ring_id: "jobs", status: "destroyed" }, 3).outcome, "applied");
  assert.deepEqual(g.registry.get("jobs"), { founding_voters: ["m1", "m3"], status: "destroyed" });
  assert.deepEqual(g.registry.activeRings(), []);
  assert.equal(reg({ ring_id: "jobs", founding_voters: ["m1", "m2"] }, 4).outcome, "applied");
  assert.deepEqual(g.registry.activeRings(), ["jobs"]);
  assert.equal(g.registry.version, 4);
});

test("RING_REGISTRY refuses the reserved and malformed ids, and an active ring without founders", () => {
  const v = (value: object) => ({ kind: "RING_REGISTRY" as const, value: value as never });
  assert.throws(() => encodeEntry(v({ ring_id: "cluster", founding_voters: ["m1"] })), { code: "CLUSTER_BAD_RING_ID" });
  assert.throws(() => encodeEntry(v({ ring_id: "", founding_voters: ["m1"] })), { code: "CLUSTER_BAD_RING_ID" });
  assert.throws(() => encodeEntry(v({ ring_id: "jobs" })), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => encodeEntry(v({ ring_id: "jobs", founding_voters: ["0.0.0.0"] })), { code: "CLUSTER_BAD_NODE_ID" });
  assert.throws(() => encodeEntry(v({ ring_id: "jobs", founding_voters: ["m1"], status: "paused" })), { code: "CLUSTER_BAD_ENTRY" });
});

test("RING_REGISTRY caps active rings at what the shared buffer can publish", () => {
  const g = new ClusterGroupState();
  for (let i = 0; i < clusterLimits.activeRingsMax; i++) {
    assert.equal(g.apply(encodeEntry({ kind: "RING_REGISTRY", value: { ring_id: `r${i}`, founding_voters: ["m1"] } }), i + 1).outcome, "applied");
  }
  const r = g.apply(encodeEntry({ kind: "RING_REGISTRY", value: { ring_id: "extra", founding_voters: ["m1"] } }), 100);
  assert.equal(r.outcome === "refused" && r.error.code, "CLUSTER_TOO_MANY");
});

test("RING_CONFIG: defaults self/1, partial updates keep the other knob, bad values refused", () => {
  const g = new RingGroupState("jobs", ["m1", "m2"]);
  assert.deepEqual(g.ringConfig.snapshot(), { members: "self", replicas: 1, version: -1 });
  g.apply(encodeEntry({ kind: "RING_CONFIG", value: { members: "voters" } }), 1);
  g.apply(encodeEntry({ kind: "RING_CONFIG", value: { replicas: 2 } }), 2);
  assert.deepEqual(g.ringConfig.snapshot(), { members: "voters", replicas: 2, version: 2 });
  assert.throws(() => encodeEntry({ kind: "RING_CONFIG", value: { members: "all" as never } }), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => encodeEntry({ kind: "RING_CONFIG", value: { replicas: 0 } }), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => encodeEntry({ kind: "RING_CONFIG", value: { replicas: 1.5 } }), { code: "CLUSTER_BAD_ENTRY" });
});

test("each group refuses the other group's entry kinds", () => {
  const c = new ClusterGroupState();
  const r1 = c.apply(encodeEntry({ kind: "RING_CONFIG", value: { members: "voters" } }), 1);
  assert.equal(r1.outcome === "refused" && r1.error.code, "CLUSTER_WRONG_GROUP");
  const g = new RingGroupState("jobs", ["m1"]);
  const r2 = g.apply(encodeEntry(route("jobs", "jobs")), 1);
  assert.equal(r2.outcome === "refused" && r2.error.code, "CLUSTER_WRONG_GROUP");
});

test("decodeEntry refuses non-CBOR, unknown kinds, non-plain maps and oversized input", () => {
  assert.throws(() => decodeEntry(new Uint8Array()), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => decodeEntry(Uint8Array.of(0x1c)), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => decodeEntry(Uint8Array.from(raw.encode([0, { x: 1 }]))), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => decodeEntry(Uint8Array.from(raw.encode([2, {}]))), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => decodeEntry(Uint8Array.from(raw.encode({ kind: 1 }))), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => decodeEntry(Uint8Array.from(raw.encode([5, new Map([["data_type", "jobs"]])]))), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => decodeEntry(Uint8Array.from(raw.encode([5, { data_type: new Date(0) }]))), { code: "CLUSTER_BAD_ENTRY" });
  assert.throws(() => decodeEntry(new Uint8Array(clusterLimits.entryBytesMax + 1)), { code: "CLUSTER_BAD_ENTRY" });
  // a "__proto__" key cannot smuggle fields in through the prototype
  const evil = Uint8Array.from([0x82, 0x05, 0xa1, 0x69, ...new TextEncoder().encode("__proto__"), 0xa1, 0x69, ...new TextEncoder().encode("data_type"), 0x64, ...new TextEncoder().encode("jobs")]);
  assert.throws(() => decodeEntry(evil), { code: "CLUSTER_BAD_ENTRY" });
});

test("routing and registry survive snapshot/restore in Salt's snapshot shapes", () => {
  const g = new ClusterGroupState();
  g.apply(encodeEntry({ kind: "RING_REGISTRY", value: { ring_id: "jobs", founding_voters: ["m1", "m2"] } }), 1);
  g.apply(encodeEntry(route("jobs", "jobs")), 2);
  g.apply(encodeEntry(route("events", null)), 3);
  const copy = new ClusterGroupState();
  copy.restore(g.snapshot());
  assert.deepEqual(copy.routing.snapshot(), { routes: { events: null, jobs: "jobs" }, version: 3 });
  assert.deepEqual(copy.registry.snapshot(), { rings: { jobs: { founding_voters: ["m1", "m2"], status: "active" } }, version: 1 });
});
