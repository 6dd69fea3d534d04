/**
 * The live cluster.* runners through a real `salt-run` against an in-process master started with
 * `cluster_id`: one-voter bootstrap, the stable node id when `id` differs from `interface`, runner threads
 * reading the live shared ring buffer (including drop counters bumped by another thread), restart from disk,
 * and the refusal of a wildcard node id.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";

async function saltRun(m: TestMaster, fun: string, ...args: string[]): Promise<Record<string, unknown>> {
  const conf = writeConfigDir(m);
  const r = await runCli("salt-run", ["-c", conf, fun, ...args, "--out", "json"]);
  assert.equal(r.code, 0, `salt-run ${fun} failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as Record<string, unknown>;
}

const NODE_ID = "brine-alpha"; // neither the bind interface (127.0.0.1) nor an address

test("a single master with cluster_id: one-voter ring, live runners, stable node id, restart from disk", { timeout: 180_000 }, async () => {
  let m = await startTestMaster({ cluster_id: "c1", id: NODE_ID });
  try {
    assert.equal(m.cfg.interface, "127.0.0.1");
    const info = await saltRun(m, "cluster.ring_info");
    assert.equal(info.is_clustered, true);
    assert.equal(info.node_count, 1);
    assert.deepEqual(info.nodes, [NODE_ID]);
    assert.equal(info.vnodes, 4096, "one node owns every slot");
    assert.ok((info.epoch as number) >= 1, `epoch ${String(info.epoch)}`);

    const members = await saltRun(m, "cluster.members");
    assert.equal(members.node_id, NODE_ID, "the node id is `id`, not `interface`");
    assert.deepEqual(members.voters, [NODE_ID]);
    assert.deepEqual(members.learners, []);
    assert.equal(members.membership_version, 1, "the genesis CONFIG");
    assert.equal(members.voter_count, 1);
    assert.equal(members.leader_id, NODE_ID);
    assert.ok((members.term as number) >= 2);

    // cluster state written through the worker's API, then read by runner threads from the live buffer
    const raft = m.server.clusterNode!.raft;
    await raft.propose("cluster", { kind: "RING_REGISTRY", value: { ring_id: "jobs", founding_voters: [NODE_ID] } });
    await raft.propose("cluster", { kind: "ROUTE", value: { data_type: "jobs", ring_id: "jobs" } });
    // a route to a ring this master does not host: every gate in any thread counts not_a_member
    await raft.propose("cluster", { kind: "ROUTE", value: { data_type: "events", ring_id: "elsewhere" } });
    const gate = new RingReader(m.server.clusterNode!.ringBuffer); // as a request-lane thread would hold it
    for (let i = 0; i < 3; i++) assert.equal(gate.ownsFor("events", `jid-${i}`, NODE_ID), false);
    assert.equal(gate.ownsFor("jobs", "jid-1", NODE_ID), true);

    const rings = await saltRun(m, "cluster.rings");
    assert.deepEqual(rings.rings, { jobs: { founding_voters: [NODE_ID], status: "active" } });
    assert.deepEqual(rings.active_rings, ["jobs"]);
    assert.equal(rings.node_id, NODE_ID);
    const routes = await saltRun(m, "cluster.routes");
    assert.deepEqual(routes.routes, { events: "elsewhere", jobs: "jobs" });
    assert.deepEqual(routes.drop_stats, { events: { ring_id: "elsewhere", not_a_member: 3, other_ring_member: 0 } }, "the live shared counters");
    const jobsRing = await saltRun(m, "cluster.ring_info", "jobs");
    assert.equal(jobsRing.is_clustered, true);
    assert.equal(jobsRing.ring, "jobs");
    assert.deepEqual(jobsRing.nodes, [NODE_ID]);
    const epoch = info.epoch;

    m = await m.restart();
    const again = await saltRun(m, "cluster.ring_info");
    assert.deepEqual(again.nodes, [NODE_ID]);
    assert.equal(again.epoch, epoch, "same ring epoch after a restart from disk");
    assert.deepEqual((await saltRun(m, "cluster.rings")).rings, rings.rings);
    const routesAgain = await saltRun(m, "cluster.routes");
    assert.deepEqual(routesAgain.routes, routes.routes);
    assert.deepEqual(routesAgain.drop_stats, {}, "drop counters are per process, not replicated");
    assert.equal((await saltRun(m, "cluster.ring_info", "ring=jobs")).is_clustered, true, "the ring group came back too");
  } finally {
    await m.stop();
  }
});

test("without cluster_id: Salt's not-clustered ring_info, skipped queries, no raft worker", { timeout: 60_000 }, async () => {
  const m = await startTestMaster();
  try {
    assert.equal(m.server.clusterNode, undefined);
    assert.deepEqual(await saltRun(m, "cluster.ring_info"), { is_clustered: false, node_count: 0, nodes: [], vnodes: 0 });
    assert.deepEqual(await saltRun(m, "cluster.members"), { status: "skipped", reason: "cluster_id is not set" });
  } finally {
    await m.stop();
  }
});

test("a wildcard address is refused as the node id at startup, with the fix in the message", { timeout: 60_000 }, async () => {
  for (const id of ["0.0.0.0", "[::]:4506"]) {
    const root = mkdtempSync(path.join(os.tmpdir(), "brine-t-"));
    try {
      await assert.rejects(startTestMaster({ cluster_id: "c1", id }, root), (e: Error & { code?: string }) => {
        assert.equal(e.code, "CLUSTER_BAD_NODE_ID");
        assert.match(e.message, /wildcard address/);
        assert.match(e.message, /set `id` in the master config/);
        return true;
      });
      assert.equal(existsSync(path.join(root, "cache", "brine-raft-lmdb")), false, "refused before the raft worker opened anything");
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }
});

test("a single clustered master operates a ring through salt-run: create, set, placement_check and shed with itself alone", { timeout: 180_000 }, async () => {
  const m = await startTestMaster({ cluster_id: "c1", id: NODE_ID });
  try {
    const created = await saltRun(m, "cluster.ring_create", "jobs", NODE_ID);
    assert.deepEqual([created.status, created.group, created.data], ["committed", "cluster", { ring_id: "jobs", founding_voters: [NODE_ID], status: "active" }]);
    const set = await saltRun(m, "cluster.ring_set", "jobs", "members=voters", "replicas=1");
    assert.deepEqual(set.data, { ring_id: "jobs", members: "voters", replicas: 1, version: set.index });
    const routed = await saltRun(m, "cluster.route_set", "jobs", "jobs");
    assert.equal(routed.warning, undefined, "jobs are placed: nothing to warn of");
    // mine and grains are placed too (nothing to warn of); a data type brine does not place is recorded, and the
    // answer says its data stays on every master
    const mine = await saltRun(m, "cluster.route_set", "mine", "jobs");
    assert.deepEqual([mine.data, mine.warning], [{ data_type: "mine", ring_id: "jobs" }, undefined]);
    assert.equal((await saltRun(m, "cluster.route_set", "grains", "jobs")).warning, undefined);
    const other = await saltRun(m, "cluster.route_set", "sessions", "jobs");
    assert.match(String(other.warning), /places only jobs, mine, grains .*sessions stays on every master/);
    for (const t of ["mine", "grains", "sessions"]) assert.equal((await saltRun(m, "cluster.route_clear", t)).warning, undefined);
    const raft = m.server.clusterNode!.raft;
    assert.deepEqual(Object.keys(await raft.jobsHeld(10)), [NODE_ID], "no peers: only this master is asked");
    const check = await saltRun(m, "cluster.placement_check", "jobs");
    assert.deepEqual([check.ring, check.replicas, check.members, check.route, check.unreachable], ["jobs", 1, "voters", "jobs", {}]);
    assert.equal(check.ok, true, JSON.stringify(check));
    const shed = (await saltRun(m, "cluster.shed_unowned_all", "jobs", "dry_run=True")) as Record<string, { status: string; dropped: number }>;
    assert.deepEqual(Object.keys(shed), [NODE_ID]);
    assert.deepEqual([shed[NODE_ID]!.status, shed[NODE_ID]!.dropped], ["ok", 0], "a lone voter owns every key");
    assert.equal((await saltRun(m, "cluster.shed_status")).source, "runner");
    const destroyed = await saltRun(m, "cluster.ring_destroy", "jobs");
    assert.equal((destroyed.data as { status: string }).status, "destroyed");
  } finally {
    await m.stop();
  }
});
