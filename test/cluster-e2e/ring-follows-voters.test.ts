/**
 * A ring's voters follow the cluster's, on three real master processes (127.0.0.197-199 behind HAProxy on
 * 127.0.0.196): ring `jobs` on all three; one master that leads neither the cluster nor the ring is stopped and
 * removed from the cluster with `cluster.remove_member`; the ring's leader then removes it from the ring's group,
 * so `cluster.members jobs` and `cluster.ring_info jobs` (policy voters: the slot table) list the two left.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { ClusterHarness, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.196";
const HOSTS = ["127.0.0.197", "127.0.0.198", "127.0.0.199"];

test("a master removed from the cluster leaves the rings it was a voter of", { timeout: 240_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-ring-follow", privateCachedir: true, extra: { runner_returns: false } });
  const run = (i: number, fn: string, ...args: string[]) => h.clusterRunner(i, fn, args);
  try {
    const leader = await h.waitLeader([0, 1, 2], 3, 60_000);
    const li = h.masters.findIndex((m) => m.id === leader);
    await run(li, "ring_create", "jobs", "m1,m2,m3");
    await run(li, "ring_set", "jobs", "members=voters");
    const ringLeader = await until("ring jobs to have a leader sharding over three voters", async () => {
      const r = await run(li, "members", "jobs");
      const info = await run(li, "ring_info", "jobs");
      return r.leader_id && r.voters.length === 3 && info.node_count === 3 ? (r.leader_id as string) : undefined;
    }, 60_000);
    // neither the cluster's leader (remove_member runs there) nor the ring's (which never removes itself)
    const victim = ["m1", "m2", "m3"].find((id) => id !== leader && id !== ringLeader)!;
    const vi = h.masters.findIndex((m) => m.id === victim);
    const stay = ["m1", "m2", "m3"].filter((id) => id !== victim);
    h.kill(vi, "SIGTERM");
    await h.waitExit(vi);
    // two voters left is below cluster_min_voters (3): the floor holds unless forced
    const refused = await h.saltRun(li, ["cluster.remove_member", `id=${victim}`, "--out", "json"]);
    assert.match(refused.stdout + refused.stderr, /leaves 2 voter\(s\), fewer than cluster_min_voters \(3\).*force=True/);
    const removed = await run(li, "remove_member", `id=${victim}`, "force=True");
    assert.equal(removed.status, "committed");
    for (const id of stay) {
      const i = h.masters.findIndex((m) => m.id === id);
      const r = await until(`${id} to see ${victim} gone from ring jobs`, async () => {
        const m = await run(i, "members", "jobs");
        const info = await run(i, "ring_info", "jobs");
        return m.voters.join(",") === stay.join(",") && info.nodes.join(",") === stay.join(",") ? { m, info } : undefined;
      }, 60_000);
      assert.equal(r.info.node_count, 2, `${id}: the slot table is over the two voters left`);
      assert.ok(r.m.membership_version >= 0, "the ring's own membership changed (a CONFIG in its log)");
    }
  } finally {
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
