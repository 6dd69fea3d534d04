/**
 * Jobs move when a ring's table changes, on three real master processes (127.0.0.241-243 behind HAProxy on
 * 127.0.0.240): ring `jobs` on m1, m2, m3 with `members: voters` and `replicas: 2`, `jobs` routed to it, 60
 * jobs to two in-repo minions, each placed on its two owners.
 * - `replicas=1` sheds the second copies, and `replicas=2` again gives each job its second owner
 *   (placement_check ok after each).
 * - While at `replicas: 1`, a minion's peer jobs (publish.publish: minion_pub, then pub_ret polled on m1, where
 *   the publishing minion is attached) get every return of the minion attached to m2, though m1 owns only
 *   about a third of the jids (and drops its copy of the others once their owner has it); so do the older
 *   minion_publish requests, which wait on m1.
 * - Then one master (neither the cluster's leader nor the ring's) is stopped and removed from the cluster: the
 *   ring follows the cluster's voters, its slot table is over the two left, every jid's owners are those two,
 *   and the jobs whose copies were on the removed master reach the one owner that lacked them: placement_check
 *   is ok again, each jid on both masters left, lookup_jid on each finds every return and list_jobs lists
 *   every job.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, clusterPrerequisites, until } from "../../tools/local-cluster.js";
import { LocalClient } from "../../src/lib/client/local-client.js";
import { loadMasterConfig } from "../../src/shared/config/load.js";

const LB = "127.0.0.240";
const HOSTS = ["127.0.0.241", "127.0.0.242", "127.0.0.243"];
const JOBS = 60;
const MINIONS = ["rebal-a", "rebal-b"];

test("jobs move when replicas change and when a voter leaves the ring (placement_check ok after each), and a minion's peer jobs get their returns from the owners", { timeout: 600_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-rebalance", privateCachedir: true, extra: { runner_returns: false, peer: { "rebal-a": ["test.*"] } } });
  const minions: TestMinion[] = [];
  const run = (i: number, fn: string, ...args: string[]) => h.clusterRunner(i, fn, args);
  const cfgs = h.masters.map((m) => loadMasterConfig(m.confDir));
  const runner = (i: number, fun: string, arg: unknown[]) => h.controlRunner(i, fun, arg);
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
    // each minion on a master of its own (m1, m2), not through the balancer: rebal-b's returns land on m2, so a
    // peer job rebal-a asks m1 about is found only by a cluster-wide read whenever m1 does not own its jid
    MINIONS.forEach((id, i) => minions.push(minionThrough(HOSTS[i]!, id, keys[i]!)));
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
    const initial = await placed(li, "every job placed on its two owners");
    for (const jid of jids) assert.equal(initial.jids[jid].length, 2, `${jid}: ${initial.jids[jid]}`);
    // every return is in (the minions answer within seconds; the hand-off follows)
    for (const jid of [jids[0]!, jids[JOBS - 1]!]) {
      await until(`${jid}'s two returns`, async () => (Object.keys(await runner(li, "jobs.lookup_jid", [jid])).length === MINIONS.length ? true : undefined), 60_000, 1000);
    }

    /** ring_set on the ring, then placement_check until every job is on `copies` owners */
    const replicas = async (n: number) => {
      await run(li, "ring_set", "jobs", `replicas=${n}`);
      for (const i of [0, 1, 2]) await until(`m${i + 1}'s ring jobs at replicas ${n}`, async () => ((await run(i, "ring_info", "jobs")).replicas === n ? true : undefined), 30_000);
      const r = await placed(li, `every job on its ${n} owner(s) after replicas=${n}`);
      for (const jid of jids) assert.equal(r.jids[jid].length, n, `${jid}: ${r.jids[jid]}`);
      return r;
    };

    // --- replicas 1: the copies of the owners dropped are shed once the table changed (rebalancing)
    await replicas(1);

    // --- a minion's peer jobs, with each job on one owner (m1, where rebal-a asks, owns about a third):
    // pub_ret answers every return wherever the job is placed
    for (let n = 0; n < 9; n++) {
      const got = await minions[0]!.peerPublish("rebal-b", "test.echo", [`peer-${n}`], { timeoutS: 20 });
      assert.deepEqual(got, { "rebal-b": `peer-${n}` }, `peer job ${n}`);
    }
    // the older form, which waits on the master for the returns
    const a = minions[0]!;
    const waited: string[] = [];
    for (let n = 0; n < 9; n++) {
      const got = (await a.channel.send({ cmd: "minion_publish", fun: "test.echo", arg: [`waited-${n}`], tgt: "rebal-b", tgt_type: "glob", ret: "", tmo: 20, id: "rebal-a", form: "full" }, a.requestOptions)) as Record<string, any>;
      assert.equal(got["rebal-b"]?.ret, `waited-${n}`, `minion_publish ${n}: ${JSON.stringify(got)}`);
      waited.push(got.__jid__ as string);
    }
    const peerCheck = await run(li, "placement_check", "jobs");
    const elsewhere = waited.filter((j) => !(peerCheck.jids[j] as string[] | undefined)?.includes("m1"));
    t.diagnostic(`${elsewhere.length} of the 9 minion_publish jobs are held by masters other than m1 only`);
    assert.ok(elsewhere.length > 0, "some peer jobs live only on other masters (each does with odds 2/3)");

    // --- replicas 2 again: each job gets its second owner
    const first = await replicas(2);

    // --- remove a voter that leads neither the cluster nor the ring
    const victim = ["m1", "m2", "m3"].find((id) => id !== leader && id !== ringLeader)!;
    const vi = h.masters.findIndex((m) => m.id === victim);
    const stay = ["m1", "m2", "m3"].filter((id) => id !== victim);
    const onVictim = jids.filter((j) => (first.jids[j] as string[]).includes(victim));
    t.diagnostic(`${victim} held ${onVictim.length} of ${JOBS} jobs; they must reach the owner that lacked them`);
    assert.ok(onVictim.length > 0, "the removed master owned some jobs");
    h.kill(vi, "SIGTERM");
    await h.waitExit(vi);
    // two voters left is under cluster_min_voters (3): forced, as an operator shrinking the cluster would
    assert.equal((await run(li, "remove_member", `id=${victim}`, "force=True")).status, "committed");
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
      const listed = await runner(i, "jobs.list_jobs", []);
      for (const jid of jids) assert.equal(listed[jid]?.Function, "test.echo", `${id}'s list_jobs lists ${jid}`);
    }
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
