/**
 * The pure half of the ring-operating runners: arguments as `salt-run` passes them, the checks made before
 * anything is proposed, the committed result (a refused entry is an error, not "committed"), the operator's
 * error texts, and the shapes of routes(ring) and ring_info(ring).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { BrineError, isBrineError } from "../../src/shared/errors.js";
import { checkRingCreate, committed, parseRingName, parseRingSet, parseVoters, placementReport, proposalError, removalLosesData, removalLosesHandoff, type PlacedRing } from "../../src/runners/cluster-ops.js";
import { clusterRingInfo, clusterRoutes, ringInfoFromState } from "../../src/runners/cluster-shapes.js";
import { ringTargets, routeTargets } from "../../src/workers/raft/ring-sync.js";
import { ClusterGroupState } from "../../src/workers/raft/state-machines/groups.js";
import { createRingBuffer } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";

const code = (c: BrineError["code"]) => (e: Error) => isBrineError(e, c);

test("ring_create's voters: a list or the CLI's comma list, node ids, sorted; empty refused as Salt refuses it", () => {
  assert.deepEqual(parseVoters("m3,m1, m2"), ["m1", "m2", "m3"]);
  assert.deepEqual(parseVoters(["m2", "m1"]), ["m1", "m2"]);
  for (const empty of [undefined, null, "", "None", []]) assert.throws(() => parseVoters(empty), code("CLUSTER_BAD_ARGUMENT"));
  assert.throws(() => parseVoters("m1,m1"), code("CLUSTER_BAD_NODE_ID"));
  assert.throws(() => parseVoters(["0.0.0.0"]), /wildcard/);
  assert.throws(() => parseRingName("cluster"), /reserved/);
  assert.throws(() => parseRingName(""), code("CLUSTER_BAD_ARGUMENT"));
  assert.equal(parseRingName("jobs"), "jobs");
});

test("ring_create is checked before proposing: voters must be masters of the cluster; an active ring keeps its founders", () => {
  const membership = { voters: ["m1", "m2", "m3"], learners: ["m4"], version: 7 };
  const registry = { rings: { jobs: { founding_voters: ["m1", "m2"], status: "active" as const }, old: { founding_voters: ["m3"], status: "destroyed" as const } }, version: 9 };
  checkRingCreate("jobs", ["m1", "m2"], membership, registry); // the same again: fine (idempotent)
  checkRingCreate("old", ["m1", "m4"], membership, registry); // a destroyed id may be re-created with others
  assert.throws(() => checkRingCreate("x", ["m1", "m9"], membership, registry), /m9 is not a master of this cluster \(members: m1, m2, m3, m4\)/);
  assert.throws(() => checkRingCreate("jobs", ["m1", "m3"], membership, registry), (e: Error) => isBrineError(e, "CLUSTER_RING_CONFLICT") && /active with voters m1, m2/.test(e.message));
});

test("ring_set: partial updates, validated; nothing to set is an error", () => {
  assert.deepEqual(parseRingSet("voters", null), { members: "voters" });
  assert.deepEqual(parseRingSet("None", "3"), { replicas: 3 });
  assert.deepEqual(parseRingSet("self", 2), { members: "self", replicas: 2 });
  assert.throws(() => parseRingSet(null, undefined), /needs members and\/or replicas/);
  assert.throws(() => parseRingSet("all", null), /"self" or "voters"/);
  for (const bad of [0, -1, 1.5, "two", 100_000]) assert.throws(() => parseRingSet(null, bad), code("CLUSTER_BAD_ARGUMENT"));
});

test("the committed result, and a committed-but-refused entry as an error naming its index", () => {
  const ok = committed({ group: "jobs", index: 12, term: 3, applied: "applied", value: { kind: "RING_CONFIG", value: { replicas: 2 } } }, { ring_id: "jobs", replicas: 2 });
  assert.deepEqual(ok, { status: "committed", group: "jobs", index: 12, term: 3, applied: "applied", data: { ring_id: "jobs", replicas: 2 } });
  assert.throws(
    () => committed({ group: "cluster", index: 40, term: 5, applied: "refused", refusal: { code: "CLUSTER_TOO_MANY", message: "64 routed data types" }, value: { kind: "ROUTE", value: { data_type: "x", ring_id: null } } }, {}),
    (e: Error) => isBrineError(e, "CLUSTER_NOT_COMMITTED") && /index 40 \(term 5\) but refused it: CLUSTER_TOO_MANY/.test(e.message),
  );
});

test("failed proposals read as no quorum, timeout or not the leader, with what this master knows", () => {
  const noLeader = proposalError(new BrineError("RAFT_NO_LEADER", "no leader took the request within 100 ticks"), "cluster", { leaderId: null, voters: ["m1", "m2", "m3"] }) as BrineError;
  assert.equal(noLeader.code, "RAFT_NO_LEADER");
  assert.match(noLeader.message, /^no quorum: group cluster has no leader reachable from this master .*\(voters: m1, m2, m3\); this master knows no leader; nothing was changed/);
  const timeout = proposalError(new BrineError("RAFT_UNKNOWN", "propose: no answer"), "jobs", { leaderId: "m2" }) as BrineError;
  assert.match(timeout.message, /^timeout: .*the leader this master last knew is m2; the change may or may not have committed/);
  const notLeader = proposalError(new BrineError("RAFT_NOT_VOTER"), "jobs", { leaderId: "m1" }) as BrineError;
  assert.match(notLeader.message, /^not the leader: .*last knew is m1/);
  const other = new BrineError("CLUSTER_BAD_ENTRY", "x");
  assert.equal(proposalError(other, "cluster"), other);
});

function published(): { reader: RingReader; g: ClusterGroupState } {
  const g = new ClusterGroupState();
  g.apply({ kind: "CONFIG", value: { voters: ["m1", "m2", "m3"], learners: [] } }, 1);
  g.apply({ kind: "RING_REGISTRY", value: { ring_id: "jobs", founding_voters: ["m1", "m2"] } }, 2);
  g.apply({ kind: "ROUTE", value: { data_type: "jobs", ring_id: "jobs" } }, 3);
  g.apply({ kind: "ROUTE", value: { data_type: "mine", ring_id: null } }, 4);
  g.apply({ kind: "ROUTE", value: { data_type: "grains", ring_id: "jobs" } }, 5);
  const w = RingWriter.attach(createRingBuffer());
  w.sync(ringTargets(g, new Map(), "m3"));
  w.publishRoutes(routeTargets(g));
  return { reader: new RingReader(w.buffer), g };
}

test("routes(ring): only the data types routed to the ring, and their live drop counters", () => {
  const { reader, g } = published();
  reader.gate("jobs", "20261125000000000001", "m3"); // m3 is outside ring jobs
  reader.gate("jobs", "20261125000000000002", "m3");
  const all = clusterRoutes({ nodeId: "m3", routing: g.routing.snapshot(), reader });
  assert.deepEqual(all.routes, { grains: "jobs", jobs: "jobs", mine: null });
  const jobs = clusterRoutes({ nodeId: "m3", routing: g.routing.snapshot(), reader, ring: "jobs" });
  assert.deepEqual(jobs, {
    node_id: "m3",
    routes: { grains: "jobs", jobs: "jobs" },
    routing_version: 5,
    drop_stats: { jobs: { ring_id: "jobs", not_a_member: 2, other_ring_member: 0 } },
    ring: "jobs",
  });
  assert.deepEqual(clusterRoutes({ nodeId: "m3", routing: g.routing.snapshot(), reader, ring: "other" }).routes, {});
});

test("ring_info(ring) on a master outside the ring: the nodes its hosts publish under 'voters', none under 'self'", () => {
  const { reader } = published();
  const base = clusterRingInfo({ reader, ring: "jobs" });
  assert.equal(base.is_clustered, false, "m3 has no table for ring jobs");
  const membership = { voters: ["m1", "m2"], learners: [], version: -1 };
  const voters = ringInfoFromState({ base, hosted: false, founders: ["m2", "m1"], membership, policy: { members: "voters", replicas: 2, version: 8 } });
  assert.deepEqual(voters, {
    is_clustered: true,
    node_count: 2,
    nodes: ["m1", "m2"],
    vnodes: 2048,
    slots: 4096,
    ring: "jobs",
    epoch: -1,
    checksum: null,
    replicas: 2,
    status: "active",
    hosted: false,
    founding_voters: ["m1", "m2"],
    voters: ["m1", "m2"],
    members: "voters",
    config_version: 8,
  });
  const self = ringInfoFromState({ base, hosted: false, founders: ["m1", "m2"], membership, policy: { members: "self", replicas: 1, version: -1 } });
  assert.deepEqual([self.is_clustered, self.nodes, self.members], [false, [], "self"]);
});

test("placement_check: each jid against its owners; extra holders and missing owners are violations; unreachable masters make it not ok", () => {
  const owners: Record<string, string[]> = { j1: ["m1", "m2"], j2: ["m2", "m1"], j3: ["m1", "m2"] };
  const r = placementReport({
    ring: "jobs",
    replicas: 2,
    members: "voters",
    route: "jobs",
    expected: (jid) => owners[jid]!,
    held: { m1: { jids: ["j1", "j2", "j3"], truncated: false, pending: 0 }, m2: { jids: ["j1", "j2"], truncated: false, pending: 0 }, m3: { jids: ["j2"], truncated: false, pending: 1 } },
  });
  assert.equal(r.checked, 3);
  assert.equal(r.ok, false);
  assert.deepEqual(r.jids, { j1: ["m1", "m2"], j2: ["m1", "m2", "m3"], j3: ["m1"] });
  assert.deepEqual(r.violations, [
    { jid: "j2", expected: ["m1", "m2"], holders: ["m1", "m2", "m3"], missing: [], extra: ["m3"] },
    { jid: "j3", expected: ["m1", "m2"], holders: ["m1"], missing: ["m2"], extra: [] },
  ]);
  assert.deepEqual(r.handoff_pending, { m1: 0, m2: 0, m3: 1 }, "what each master still has to hand off");
  assert.match(r.note!, /keeps its copy until every owner has it/);
  assert.doesNotMatch(r.note!, /not to jobs/);

  const clean = placementReport({ ring: "jobs", replicas: 1, members: "self", route: null, expected: () => ["m1"], held: { m1: { jids: ["j1"], truncated: false } } });
  assert.deepEqual([clean.ok, clean.violations, clean.unreachable], [true, [], {}]);
  assert.match(clean.note!, /^jobs is routed to no ring \(broadcast\): every master is expected to hold every item/);

  // a minion bank back to broadcast: every master expected; a master still gathering keeps the check open
  const back = placementReport({
    ring: "minions",
    replicas: 1,
    members: "voters",
    route: null,
    dataType: "mine",
    expected: () => ["m1", "m2", "m3"],
    held: { m1: { jids: ["a", "b"], truncated: false, pending: 0 }, m2: { jids: ["a", "b"], truncated: false, pending: 0 }, m3: { jids: ["a"], truncated: false, pending: 0, gathering: true } },
  });
  assert.deepEqual([back.ok, back.gathering, back.violations.map((v) => [v.jid, v.missing])], [false, ["m3"], [["b", ["m3"]]]]);
  assert.match(back.note!, /each master pulls what it lacks by itself/);
  const done = placementReport({ ring: "minions", replicas: 1, members: "voters", route: null, dataType: "mine", expected: () => ["m1", "m2"], held: { m1: { jids: ["a"], truncated: false }, m2: { jids: ["a"], truncated: false } } });
  assert.deepEqual([done.ok, done.gathering], [true, undefined]);

  const partial = placementReport({ ring: "jobs", replicas: 1, members: "self", route: "jobs", expected: () => ["m1", "m2"], held: { m1: { jids: ["j1"], truncated: true }, m2: { error: "CLUSTER_PEER_TIMEOUT" } } });
  assert.equal(partial.ok, false, "a master that did not answer leaves the check open");
  assert.deepEqual(partial.violations, [], "an unreachable owner is not reported missing");
  assert.deepEqual([partial.unreachable, partial.truncated], [{ m2: "CLUSTER_PEER_TIMEOUT" }, ["m1"]]);

  // m1 sent only its newest two jids: older jids m2 holds are not compared (m1 may hold them too)
  const windowed = placementReport({
    ring: "jobs",
    replicas: 2,
    members: "self",
    route: "jobs",
    expected: () => ["m1", "m2"],
    held: { m1: { jids: ["j3", "j4"], truncated: true }, m2: { jids: ["j1", "j2", "j3", "j4"], truncated: false } },
  });
  assert.equal(windowed.horizon, "j3");
  assert.deepEqual(Object.keys(windowed.jids), ["j3", "j4"]);
  assert.deepEqual(windowed.violations, []);
});

test("remove_member refuses to take away a master holding the only copies of placed jobs, and lets it go once each key has two", () => {
  const ring = (members: "self" | "voters", replicas: number, voters: string[], dataType = "jobs"): PlacedRing => ({ dataType, ring: "jobs", members, replicas, voters });
  const cases: [string, string, PlacedRing[], RegExp | undefined][] = [
    ["voters, replicas 1: a voter", "m3", [ring("voters", 1, ["m1", "m2", "m3"])], /^m3 is a voter of ring jobs, where each key of jobs has one owner \(members: voters, replicas: 1\): removing it loses the jobs only it holds .*cluster\.ring_set jobs replicas=2.*force=True/],
    ["voters, replicas 2", "m3", [ring("voters", 2, ["m1", "m2", "m3"])], undefined],
    ["voters, replicas 2 but one voter left in the ring", "m1", [ring("voters", 2, ["m1"])], /^m1 is the only voter of ring jobs.*cluster\.route_clear jobs/],
    ["self over two voters: the other has everything", "m2", [ring("self", 1, ["m1", "m2"])], undefined],
    ["self with one voter", "m1", [ring("self", 1, ["m1"])], /only voter/],
    ["not a voter of the ring", "m4", [ring("voters", 1, ["m1", "m2", "m3"])], undefined],
    ["a route of a data type brine does not place", "m3", [ring("voters", 1, ["m1", "m2", "m3"], "events")], undefined],
    ["no placed ring", "m3", [], undefined],
    ["mine with one copy per minion", "m3", [ring("voters", 1, ["m1", "m2", "m3"], "mine")], /each key of mine has one owner.*cluster\.placement_check jobs data_type=mine is ok/],
  ];
  for (const [what, node, rings, refused] of cases) {
    const why = removalLosesData(node, rings);
    if (refused) assert.match(why ?? "", refused, what);
    else assert.equal(why, undefined, what);
  }
});

test("remove_member refuses to take away a master whose hand-off outbox still holds job records, not one that could not be asked", () => {
  assert.match(removalLosesHandoff("m4", 12) ?? "", /^m4 holds 12 job record\(s\) in its hand-off outbox .*handoff_pending at 0.*force=True/);
  assert.equal(removalLosesHandoff("m4", 0), undefined, "an empty outbox");
  assert.equal(removalLosesHandoff("m4", undefined), undefined, "a master that did not say (down: removing it is what remove_member is for)");
});
