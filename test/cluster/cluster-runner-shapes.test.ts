import { test } from "node:test";
import assert from "node:assert/strict";
import { ringTargets, routeTargets } from "../../src/workers/raft/ring-sync.js";
import { encodeEntry } from "../../src/workers/raft/state-machines/entries.js";
import { ClusterGroupState } from "../../src/workers/raft/state-machines/groups.js";
import { clusterMembers, clusterRingInfo, clusterRings, clusterRoutes } from "../../src/runners/cluster-shapes.js";
import { createRingBuffer } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";

/**
 * A master whose stable node id ("node-7f3a") is neither its minion-facing `id` nor its bind `interface`
 * (0.0.0.0): Salt's runners came back empty in that case (salt-cluster.md §9).
 */
const NODE_ID = "node-7f3a";

function liveCluster(): { g: ClusterGroupState; reader: RingReader; sab: SharedArrayBuffer } {
  const g = new ClusterGroupState();
  g.apply(encodeEntry({ kind: "CONFIG", value: { voters: ["node-7f3a", "node-91bc", "node-c2d0"], learners: ["node-e5f1"] } }), 3);
  g.apply(encodeEntry({ kind: "RING_REGISTRY", value: { ring_id: "jobs", founding_voters: ["node-91bc", "node-7f3a"] } }), 4);
  g.apply(encodeEntry({ kind: "ROUTE", value: { data_type: "jobs", ring_id: "jobs" } }), 5);
  g.apply(encodeEntry({ kind: "ROUTE", value: { data_type: "events", ring_id: null } }), 6);
  const w = RingWriter.attach(createRingBuffer());
  w.sync(ringTargets(g, new Map(), NODE_ID)); // the jobs group is not running here yet
  w.publishRoutes(routeTargets(g));
  return { g, reader: new RingReader(w.buffer), sab: w.buffer };
}

test("cluster.members: Salt's keys, from the applied membership, with the stable node id", () => {
  const { g } = liveCluster();
  assert.deepEqual(
    clusterMembers({
      nodeId: NODE_ID,
      membership: g.membership.snapshot(),
      raft: { leaderId: "node-91bc", term: 4 },
      health: { unhealthyVoters: [], recentlyDemoted: ["node-0000"] },
    }),
    {
      node_id: "node-7f3a",
      voters: ["node-7f3a", "node-91bc", "node-c2d0"],
      learners: ["node-e5f1"],
      membership_version: 3,
      voter_count: 3,
      learner_count: 1,
      leader_id: "node-91bc",
      term: 4,
      unhealthy_voters: [],
      recently_demoted: ["node-0000"],
    },
  );
  // before any CONFIG: Salt's -1, no leader known
  const fresh = clusterMembers({ nodeId: NODE_ID, membership: new ClusterGroupState().membership.snapshot() });
  assert.equal(fresh.membership_version, -1);
  assert.equal(fresh.leader_id, null);
  assert.equal(fresh.term, 0);
});

test("a wildcard bind address is refused as node_id by every runner", () => {
  const { g, reader } = liveCluster();
  for (const bad of ["0.0.0.0", "::", ""]) {
    assert.throws(() => clusterMembers({ nodeId: bad, membership: g.membership.snapshot() }), { code: "CLUSTER_BAD_NODE_ID" });
    assert.throws(() => clusterRings({ nodeId: bad, registry: g.registry.snapshot() }), { code: "CLUSTER_BAD_NODE_ID" });
    assert.throws(() => clusterRoutes({ nodeId: bad, routing: g.routing.snapshot(), reader }), { code: "CLUSTER_BAD_NODE_ID" });
  }
});

test("cluster.rings: registry with sorted founders, active_rings and registry_version", () => {
  const { g } = liveCluster();
  g.apply(encodeEntry({ kind: "RING_REGISTRY", value: { ring_id: "old", founding_voters: ["node-c2d0"] } }), 7);
  g.apply(encodeEntry({ kind: "RING_REGISTRY", value: { ring_id: "old", status: "destroyed" } }), 8);
  assert.deepEqual(clusterRings({ nodeId: NODE_ID, registry: g.registry.snapshot() }), {
    node_id: "node-7f3a",
    rings: {
      jobs: { founding_voters: ["node-7f3a", "node-91bc"], status: "active" },
      old: { founding_voters: ["node-c2d0"], status: "destroyed" },
    },
    active_rings: ["jobs"],
    registry_version: 8,
  });
});

test("cluster.routes: routes, routing_version and the live shared drop counters", () => {
  const { g, reader, sab } = liveCluster();
  // another reader over the same buffer, as a gate in some worker thread would have; the jobs ring is not
  // hosted on this master yet, so its writes are dropped as not_a_member
  const gateThread = new RingReader(sab);
  for (let i = 0; i < 5; i++) assert.equal(gateThread.ownsFor("jobs", `jid-${i}`, NODE_ID), false);
  assert.equal(gateThread.ownsFor("events", "jid-1", NODE_ID), true);
  assert.deepEqual(clusterRoutes({ nodeId: NODE_ID, routing: g.routing.snapshot(), reader }), {
    node_id: "node-7f3a",
    routes: { events: null, jobs: "jobs" },
    routing_version: 6,
    drop_stats: { jobs: { ring_id: "jobs", not_a_member: 5, other_ring_member: 0 } },
  });
});

test("cluster.ring_info: the live cluster ring, Salt's keys plus slots, epoch and checksum", () => {
  const { reader } = liveCluster();
  const info = clusterRingInfo({ reader });
  assert.deepEqual(Object.keys(info).sort(), ["checksum", "epoch", "is_clustered", "node_count", "nodes", "replicas", "ring", "slots", "vnodes"]);
  assert.equal(info.is_clustered, true);
  assert.equal(info.node_count, 3);
  assert.deepEqual(info.nodes, ["node-7f3a", "node-91bc", "node-c2d0"]);
  assert.equal(info.vnodes, 1365);
  assert.equal(info.slots, 4096);
  assert.equal(info.epoch, 1);
  assert.equal(typeof info.checksum, "number");
  assert.equal(clusterRingInfo({ reader, ring: "jobs" }).is_clustered, false);
});
