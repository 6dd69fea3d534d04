/**
 * Jobs move when a ring's voters change, on three real master processes (127.0.0.241-243 behind HAProxy on
 * 127.0.0.240): ring `jobs` on m1, m2, m3 with `members: voters` and `replicas: 2`, `jobs` routed to it, 60
 * jobs to two in-repo minions, each placed on its two owners. Then one master (neither the cluster's leader
 * nor the ring's) is stopped and removed from the cluster: the ring follows the cluster's voters, its slot
 * table is over the two left, every jid's owners are those two, and the jobs whose copies were on the removed
 * master reach the one owner that lacked them: placement_check is ok again, each jid on both masters left,
 * and lookup_jid on each finds every return. Before the removal, a minion's peer jobs (publish.publish:
 * minion_pub, then pub_ret polled on the master its requests reach) get every return, though that master is
 * not among the owners of a third of the jids and drops its copy once they have it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, skipReason, until } from "../../tools/local-cluster.js";
import { LocalClient } from "../../src/lib/client/local-client.js";
import { loadMasterConfig } from "../../src/shared/config/load.js";
import { controlCall } from "../../src/lib/client/control-client.js";

const LB = "127.0.0.240";
const HOSTS = ["127.0.0.241", "127.0.0.242", "127.0.0.243"];
const JOBS = 60;
const MINIONS = ["rebal-a", "rebal-b"];

test("a minion's peer jobs get their returns from the owners, and a voter removed from the ring: its jobs move to their new owners and placement_check is ok again", { timeout: 600_000 }, async (t) => {
  const why = await skipReason(LB, HOSTS);
  if (why) {
    t.skip(why);
    return;
  }
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-rebalance", privateCachedir: true, extra: { runner_returns: false, peer: { "rebal-a": ["test.*"] } } });
  const minions: TestMinion[] = [];
  const run = (i: number, fn: string, ...args: string[]) => h.clusterRunner(i, fn, args);
  const cfgs = h.masters.map((m) => loadMasterConfig(m.confDir));
  const runner = async (i: number, fun: string, arg: unknown[]): Promise<any> => {
    const r = await controlCall(cfgs[i]!.sock_dir, { op: "run", fun, arg, kwarg: {} });
    if (r.type !== "return") throw new Error(`${fun} on m${i + 1}: ${r.message ?? r.type}`);
    return r.ret;
  };
  try {
    const leader = await h.waitLeader([0, 1, 2], 3, 60_000);
    const li = h.masters.findIndex((m) => m.id === leader);
    await run(li, "ring_create", "jobs", "m1,m2,m3");
    for (const i of [0, 1, 2]) await until(`m${i + 1} to host ring jobs`, async () => ((await run(i, "ring_info", "jobs")).epoch >= 0 ? true : undefined), 30_000);
    await run(li, "ring_set", "jobs", "members=voters", "replicas=2");
    const ringLeader = await until("ring jobs to shard over three voters with replicas 2, with a leader", async () => {
      const m = await run(li, "members", "jobs");
      const infos = await Promise.all([0, 1, 2].map((i) => run(i, "ring_info", "jobs")));
      return m.leader_id && infos.every((r) => r.node_count === 3 && r.replicas === 2 && r.members === "voters") ? (m.leader_id as string) : undefined;
    }, 60_000);
    await run(li, "route_set", "jobs", "jobs");
    for (const i of [0, 1, 2]) await until(`m${i + 1} to see the route`, async () => ((await run(i, "routes")).routes.jobs === "jobs" ? true : undefined), 15_000);

    const keys = await testKeys(MINIONS.length);
    MINIONS.forEach((id, i) => minions.push(minionThrough(LB, id, keys[i]!)));
    await Promise.all(minions.map((m) => m.start()));
    const clients = cfgs.map((c) => new LocalClient(c));
    await until("both minions to answer", async () => {
      const got = new Set<string>();
      for await (const r of clients[li]!.cmdIter({ tgt: "rebal-*", fun: "test.ping", timeoutS: 10 })) if (!("missing" in r)) got.add(r.id);
      return got.size === MINIONS.length ? true : undefined;
    }, 60_000, 1000);

    const jids: string[] = [];
    for (let n = 0; n < JOBS; n++) {
      const r = await clients[n % 3]!.pub({ tgt: "rebal-*", fun: "test.echo", arg: [`job-${n}`], timeoutS: 30 });
      assert.ok(r.jid, JSON.stringify(r));
      jids.push(r.jid as string);
    }
    /** placement_check on master i until every jid is on its owners with every outbox empty */
    const placed = (i: number, what: string) =>
      until(what, async () => {
        const r = await run(i, "placement_check", "jobs");
        const pending = Object.values(r.handoff_pending as Record<string, number>).reduce((a, b) => a + b, 0);
        t.diagnostic(`m${i + 1} placement_check: ok ${r.ok}, violations ${r.violations.length}, pending ${JSON.stringify(r.handoff_pending)}`);
        return r.ok && pending === 0 && jids.every((j) => r.jids[j]) ? r : undefined;
      }, 180_000, 3000);
    const first = await placed(li, "every job placed on its two owners");
    for (const jid of jids) assert.equal(first.jids[jid].length, 2, `${jid}: ${first.jids[jid]}`);
    // every return is in (the minions answer within seconds; the hand-off follows)
    for (const jid of [jids[0]!, jids[JOBS - 1]!]) {
      await until(`${jid}'s two returns`, async () => (Object.keys(await runner(li, "jobs.lookup_jid", [jid])).length === MINIONS.length ? true : undefined), 60_000, 1000);
    }

    // --- a minion's peer jobs: pub_ret answers every return wherever the job is placed
    for (let n = 0; n < 9; n++) {
      const got = await minions[0]!.peerPublish("rebal-b", "test.echo", [`peer-${n}`], { timeoutS: 20 });
      assert.deepEqual(got, { "rebal-b": `peer-${n}` }, `peer job ${n}`);
    }

    // --- remove a voter that leads neither the cluster nor the ring
    const victim = ["m1", "m2", "m3"].find((id) => id !== leader && id !== ringLeader)!;
    const vi = h.masters.findIndex((m) => m.id === victim);
    const stay = ["m1", "m2", "m3"].filter((id) => id !== victim);
    const onVictim = jids.filter((j) => (first.jids[j] as string[]).includes(victim));
    t.diagnostic(`${victim} held ${onVictim.length} of ${JOBS} jobs; they must reach the owner that lacked them`);
    assert.ok(onVictim.length > 0, "the removed master owned some jobs");
    h.kill(vi, "SIGTERM");
    await h.waitExit(vi);
    assert.equal((await run(li, "remove_member", `id=${victim}`)).status, "committed");
    for (const id of stay) {
      const i = h.masters.findIndex((m) => m.id === id);
      await until(`${id}'s ring jobs to shard over the two left`, async () => ((await run(i, "ring_info", "jobs")).nodes.join(",") === stay.join(",") ? true : undefined), 60_000);
    }

    const after = await placed(li, "every job on both masters left");
    for (const jid of jids) assert.deepEqual([...after.jids[jid]].sort(), stay, `${jid} is on both masters left`);
    assert.deepEqual(after.violations, []);
    for (const id of stay) {
      const i = h.masters.findIndex((m) => m.id === id);
      for (const jid of onVictim.slice(0, 3)) {
        const ret = await runner(i, "jobs.lookup_jid", [jid]);
        assert.deepEqual(Object.keys(ret).sort(), MINIONS, `${id} finds ${jid}'s returns`);
      }
    }
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
