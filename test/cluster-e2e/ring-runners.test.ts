/**
 * Rings as objects an operator manages, on three real master processes (127.0.0.111-113 behind HAProxy on
 * 127.0.0.110), every change through `salt-run` and answered with its commit:
 * - ring_create on the master outside the ring; the ring's own Raft group runs on its two voters only;
 * - ring_set from the master outside the ring (forwarded to a voter, committed in the ring's log), a partial
 *   update from a voter; ring_info / members / routes of the named ring on members and non-members;
 * - route_set to the ring; a return that reaches the master outside the ring moves not_a_member in that
 *   master's cluster.routes, and is handed off to the ring's owners (placement_check: exactly m1 and m2), where
 *   lookup_jid on m3 finds it; route_clear and collect_from_peers on m3 give m3 its copy back;
 * - errors: unknown voter, unknown ring, no quorum (a voter cut off);
 * - ring_destroy, then ring_create again: the ring's group resumes from its files (its policy is back).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, parseReturns, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.110";
const HOSTS = ["127.0.0.111", "127.0.0.112", "127.0.0.113"];

test("ring runners: create, set from anywhere, route, drop_stats, errors, destroy and re-create", { timeout: 300_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  // each master its own cachedir (its own shed status file); runner calls kept out of the job cache, so the
  // jobs a shed sees do not change between its dry run and its real run
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-rings", privateCachedir: true, extra: { runner_returns: false } });
  let minion: TestMinion | undefined;
  const run = (i: number, fn: string, ...args: string[]) => h.clusterRunner(i, fn, args);
  const fails = async (i: number, fn: string, args: string[], re: RegExp) => {
    const r = await h.saltRun(i, [`cluster.${fn}`, ...args, "--out", "json"], 90_000);
    assert.notEqual(r.code, 0, `cluster.${fn} ${args.join(" ")} must fail: ${r.stdout}`);
    assert.match(r.stdout + r.stderr, re);
    if (process.env.BRINE_RING_DOC === "1") t.diagnostic(`m${i + 1} cluster.${fn} ${args.join(" ")} -> ${r.code}: ${(r.stdout + r.stderr).trim()}`);
  };
  try {
    await h.waitLeader([0, 1, 2], 3);

    // --- create on m3, which is not one of the ring's voters
    const created = await run(2, "ring_create", "jobs", "m1,m2");
    assert.equal(created.status, "committed");
    assert.equal(created.group, "cluster");
    assert.ok(created.index > 0 && created.term > 0);
    assert.deepEqual(created.data, { ring_id: "jobs", founding_voters: ["m1", "m2"], status: "active" });
    for (const i of [0, 1, 2]) {
      const rings = await run(i, "rings");
      assert.deepEqual(rings.rings.jobs, { founding_voters: ["m1", "m2"], status: "active" });
      assert.deepEqual(rings.active_rings, ["jobs"]);
    }
    for (const i of [0, 1]) {
      await until(`m${i + 1} to host ring jobs`, async () => ((await run(i, "ring_info", "jobs")).epoch >= 0 ? true : undefined), 20_000);
    }

    // --- policy from m3 (forwarded to a voter), then a partial update from m2
    const set = await run(2, "ring_set", "jobs", "replicas=2");
    assert.equal(set.status, "committed");
    assert.equal(set.group, "jobs", "committed in the ring's own log");
    assert.deepEqual(set.data, { ring_id: "jobs", members: "self", replicas: 2, version: set.index });
    const set2 = await run(1, "ring_set", "jobs", "members=voters");
    assert.deepEqual(set2.data, { ring_id: "jobs", members: "voters", replicas: 2, version: set2.index }, "replicas kept");

    for (const i of [0, 1]) {
      const info = await until(`m${i + 1}'s ring jobs to shard over both voters`, async () => {
        const r = await run(i, "ring_info", "jobs");
        return r.node_count === 2 ? r : undefined;
      }, 20_000);
      assert.deepEqual([info.is_clustered, info.nodes, info.replicas, info.hosted, info.members], [true, ["m1", "m2"], 2, true, "voters"]);
      assert.ok(info.epoch >= 1);
    }
    const outside = await run(2, "ring_info", "jobs");
    assert.deepEqual([outside.is_clustered, outside.nodes, outside.hosted, outside.epoch, outside.replicas], [true, ["m1", "m2"], false, -1, 2]);
    const ringMembers = await run(2, "members", "jobs");
    assert.deepEqual(ringMembers.voters, ["m1", "m2"]);
    assert.equal(ringMembers.node_id, "m3");
    const ringLeader = (await run(0, "members", "jobs")).leader_id;
    assert.ok(["m1", "m2"].includes(ringLeader), `the ring's leader is one of its voters: ${ringLeader}`);

    // --- route jobs to the ring; a return landing on m3 (outside the ring) is counted not_a_member there
    const routed = await run(2, "route_set", "jobs", "jobs");
    assert.deepEqual([routed.status, routed.group, routed.data], ["committed", "cluster", { data_type: "jobs", ring_id: "jobs" }]);
    const [key] = await testKeys(1);
    minion = minionThrough(HOSTS[2]!, "ring-m", key!); // straight to m3, not through the balancer
    await minion.start();
    const ping = await h.salt(2, ["ring-m", "test.ping", "--out", "json", "-t", "20"]);
    assert.equal(parseReturns(ping.stdout)["ring-m"], true, ping.stdout);
    const drops = await until("m3 to count the return it got outside the ring", async () => {
      const r = await run(2, "routes", "jobs");
      return r.drop_stats.jobs?.not_a_member >= 1 ? r : undefined;
    }, 15_000);
    assert.deepEqual(drops.routes, { jobs: "jobs" });
    assert.equal(drops.ring, "jobs");
    assert.deepEqual((await run(0, "routes")).drop_stats, {}, "m1 got no return: nothing counted there");

    // --- placement: the ping's job and return landed on m3 (outside the ring); m3 hands them to their owners
    // (m1 and m2: replicas 2 over two voters) and drops its own copy once both have them
    const placement = await until("the ping job to be placed on m1 and m2 only", async () => {
      const r = await run(0, "placement_check", "jobs");
      const jid = Object.keys(r.jids).find((j) => r.jids[j].join(",") === "m1,m2");
      return jid && r.ok && Object.values(r.handoff_pending).every((n) => n === 0) ? { r, jid } : undefined;
    }, 30_000);
    assert.deepEqual([placement.r.ring, placement.r.replicas, placement.r.members, placement.r.route], ["jobs", 2, "voters", "jobs"]);
    assert.ok(placement.r.checked >= 1);
    assert.deepEqual([placement.r.violations, placement.r.unreachable, placement.r.handoff_pending], [[], {}, { m1: 0, m2: 0, m3: 0 }]);
    assert.match(placement.r.note, /stored on its owners/);
    // m3 no longer holds the job, and still finds it (cluster-wide read)
    const looked = await h.saltRun(2, ["jobs.lookup_jid", placement.jid, "--out", "json"]);
    assert.deepEqual(JSON.parse(looked.stdout), { "ring-m": true }, looked.stdout + looked.stderr);
    await fails(2, "placement_check", ["jobs"], /run placement_check on one of them \(m1, m2\)/);

    // --- back to broadcast: route_clear, then collect_from_peers on m3 makes it whole again (job and return)
    await run(2, "route_clear", "jobs");
    await until("m3 to see jobs broadcast", async () => ((await run(2, "routes")).routes.jobs !== "jobs" ? true : undefined), 15_000);
    const collected = await h.saltRun(2, ["cluster.collect_from_peers", "banks=jobs/loads,jobs/minions,jobs/endtimes,jobs/nocache,jobs/returns", "--out", "json"], 120_000);
    assert.equal(collected.code, 0, collected.stdout + collected.stderr);
    const whole = await run(0, "placement_check", "jobs");
    assert.deepEqual(whole.jids[placement.jid], ["m1", "m2", "m3"], `m3 holds the job again: ${JSON.stringify(whole.jids)}`);
    const own = await h.saltRun(2, ["jobs.lookup_jid", placement.jid, "--out", "json"]);
    assert.deepEqual(JSON.parse(own.stdout), { "ring-m": true }, "read from m3's own cache (broadcast: no cluster-wide read)");
    await run(2, "route_set", "jobs", "jobs");
    if (process.env.BRINE_RING_DOC === "1") {
      for (const [i, fn, args] of [[2, "rings", []], [2, "routes", ["jobs"]], [0, "ring_info", ["jobs"]], [2, "ring_info", ["jobs"]], [2, "members", ["jobs"]], [0, "placement_check", ["jobs", "limit=3"]]] as [number, string, string[]][]) {
        t.diagnostic(`m${i + 1} cluster.${fn} ${args.join(" ")}: ${JSON.stringify(await run(i, fn, ...args))}`);
      }
      t.diagnostic(`created ${JSON.stringify(created)} set ${JSON.stringify(set)} routed ${JSON.stringify(routed)}`);
    }

    // --- errors an operator can act on
    await fails(2, "ring_create", ["other", "m1,m9"], /m9 is not a master of this cluster/);
    await fails(2, "ring_create", ["jobs", "m1,m3"], /active with voters m1, m2/);
    await fails(0, "ring_set", ["nope", "replicas=2"], /nope is not registered \(active rings: jobs\)/);
    await fails(0, "ring_set", ["jobs"], /needs members and\/or replicas/);

    // --- destroy, then re-create: the ring's group comes back from its files with its policy
    const destroyed = await run(0, "ring_destroy", "jobs");
    if (process.env.BRINE_RING_DOC === "1") t.diagnostic(`destroyed ${JSON.stringify(destroyed)}`);
    assert.deepEqual([destroyed.status, destroyed.data], ["committed", { ring_id: "jobs", founding_voters: ["m1", "m2"], status: "destroyed" }]);
    assert.deepEqual((await run(2, "rings")).active_rings, []);
    await fails(2, "ring_set", ["jobs", "replicas=1"], /jobs was destroyed/);
    const info0 = await until("m1 to stop publishing ring jobs", async () => {
      const r = await run(0, "ring_info", "jobs");
      return r.status === "destroyed" ? r : undefined;
    }, 15_000);
    assert.equal(info0.is_clustered, false);
    await run(1, "ring_create", "jobs", "m2,m1");
    const back = await until("m2 to host ring jobs again", async () => {
      const r = await run(1, "ring_info", "jobs");
      return r.epoch >= 0 && r.node_count === 2 ? r : undefined;
    }, 20_000);
    assert.deepEqual([back.members, back.replicas], ["voters", 2], "the re-created ring resumed its policy from disk");

    // With jobs routed to the ring, a change of replicas moves the copies itself (rebalancing: the voter that no
    // longer owns the job drops it once the owner has it, job-rebalance.test.ts), which would leave the shed below
    // nothing to drop; so the route goes before any replicas change (the no-quorum one below may commit late), as
    // for a ring whose data is not placed yet
    await run(2, "route_clear", "jobs");
    for (const i of [0, 1]) await until(`m${i + 1} to see jobs broadcast`, async () => ((await run(i, "routes")).routes.jobs !== "jobs" ? true : undefined), 15_000);

    // --- no quorum: with m1 cut off, ring jobs (m1, m2) cannot commit; the error says so. When the founder m3
    // forwards to has not yet seen the cut (its leader was m1), the proposal times out instead: then the answer
    // must say the outcome is unknown (a fresh-clone CI run at load 6 got that one)
    h.partition(0);
    await fails(2, "ring_set", ["jobs", "replicas=1"], /no quorum|no founder answered|may or may not have committed/);
    // the partition cuts the Raft worker's own channels too (sheds, placement), not only Raft: m1 reaches nobody
    await until("m1's shed to find m2 and m3 cut off", async () => {
      const r = await run(0, "shed_unowned_all", "jobs", "dry_run=True");
      return r.m2?.status === "error" && r.m3?.status === "error" ? r : undefined;
    }, 15_000);
    h.heal();

    // --- shed, with replicas 1 (each voter owns its share): a dry run on every master, then the real one
    await until("ring jobs to commit again after the heal", async () => ((await h.saltRun(1, ["cluster.ring_set", "jobs", "replicas=1", "--out", "json"], 60_000)).code === 0 ? true : undefined), 60_000);
    await until("m1 to see replicas 1", async () => ((await run(0, "ring_info", "jobs")).replicas === 1 ? true : undefined), 15_000);
    await until("m2 to see replicas 1", async () => ((await run(1, "ring_info", "jobs")).replicas === 1 ? true : undefined), 15_000);
    assert.deepEqual(await run(1, "shed_status"), { status: "missing", path: `${h.root}/m2/cache/cluster-shed-status.json` });
    const dry = await run(0, "shed_unowned_all", "jobs", "dry_run=True");
    assert.deepEqual(Object.keys(dry), ["m1", "m2", "m3"]);
    assert.deepEqual([dry.m3.status, dry.m3.reason], ["skipped", "m3 is not a voter of ring jobs"]);
    for (const id of ["m1", "m2"]) assert.deepEqual([dry[id].status, dry[id].ring, dry[id].dry_run], ["ok", "jobs", true], JSON.stringify(dry));
    assert.ok(dry.m1.dropped + dry.m2.dropped >= 1, `one of the voters holds a jid it does not own: ${JSON.stringify(dry)}`);
    const shed = await run(0, "shed_unowned_all", "jobs");
    for (const id of ["m1", "m2"]) {
      const { dry_run: _d, ...counted } = dry[id];
      const { dry_run: _r, ...done } = shed[id];
      assert.deepEqual(done, counted, `${id}: the real run drops what the dry run counted`);
    }
    const status2 = await run(1, "shed_status");
    assert.deepEqual([status2.source, status2.node_id, status2.dropped, status2.dry_run], ["peer_request", "m2", shed.m2.dropped, false]);
    assert.equal((await run(0, "shed_status")).source, "runner");
    if (process.env.BRINE_RING_DOC === "1") t.diagnostic(`shed_unowned_all dry ${JSON.stringify(dry)} status m2 ${JSON.stringify(status2)}`);
  } finally {
    await minion?.stop();
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
