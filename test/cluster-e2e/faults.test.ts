/**
 * Faults in the real setup (three master processes on 127.0.0.21-23 behind HAProxy on 127.0.0.20):
 *
 * 1. SIGKILL the Raft leader during a job: its minions reconnect through HAProxy to the others (without
 *    signing in again), every return
 *    of the job still reaches the CLI (on a surviving master), the survivors elect a new leader,
 *    `cluster.members` on them lists the dead voter as unhealthy, and when it comes back the ring of three and
 *    a healthy membership are seen on every master again.
 * 2. Partition one master from its peers: it cannot commit (a route_set through it fails with a coded error),
 *    the majority elects a leader and commits, and after the heal the cut-off master has caught up.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, parseReturns, clusterPrerequisites, sleep, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.20";
const HOSTS = ["127.0.0.21", "127.0.0.22", "127.0.0.23"];
const MINIONS = 9;

test("master cluster faults: SIGKILL of the leader during a job, and a partition", { timeout: 240_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-faults" });
  const minions: TestMinion[] = [];
  const idx = (id: string) => Number(id.slice(1)) - 1;
  try {
    const leader = await h.waitLeader([0, 1, 2], 3);
    const keys = await testKeys(MINIONS);
    for (let i = 0; i < MINIONS; i++) minions.push(minionThrough(LB, `fm-${i}`, keys[i]!));
    await Promise.all(minions.map((m) => m.start()));

    // --- 1. SIGKILL the leader while a job runs
    const victim = idx(leader);
    const cli = (victim + 1) % 3;
    const survivors = [0, 1, 2].filter((i) => i !== victim);
    const published = minions.map(
      (m) =>
        new Promise<void>((resolve) => {
          const on = (p: { load: { fun: unknown } }) => {
            if (p.load.fun !== "test.sleep") return;
            m.off("publish", on);
            resolve();
          };
          m.on("publish", on);
        }),
    );
    const reauthsBefore = minions.reduce((n, m) => n + m.stats.reauths, 0);
    const job = h.salt(cli, ["*", "test.sleep", "3", "--out", "json", "-t", "30"], 120_000);
    await Promise.race([Promise.all(published), sleep(15_000)]);
    const killedAt = Date.now();
    h.kill(victim, "SIGKILL");
    await h.waitExit(victim);

    const newLeader = await h.waitLeader(survivors, 3, 20_000, leader);
    const failoverMs = Date.now() - killedAt;
    assert.notEqual(newLeader, leader, "a new leader among the survivors");
    t.diagnostic(`leader ${leader} killed; ${newLeader} leads after ${failoverMs} ms (as seen through salt-run)`);

    const r = await job;
    const rets = parseReturns(r.stdout);
    for (const m of minions) assert.equal(rets[m.id], true, `${m.id}'s return of the job survived the kill: ${r.stdout}\n${r.stderr}`);

    for (const i of survivors) {
      await until(`m${i + 1} to list ${leader} as unhealthy`, async () => {
        const mem = await h.clusterRunner(i, "members");
        return JSON.stringify(mem.unhealthy_voters) === JSON.stringify([leader]) && mem.voter_count === 3 ? true : undefined;
      }, 15_000);
    }
    // HAProxy moved the victim's minions to the survivors: a new job reaches all of them
    await until("HAProxy to mark the dead master down", async () => {
      const st = await h.haproxyServers();
      return st.filter((s) => s.server === `m${victim + 1}`).every((s) => s.status.startsWith("DOWN")) ? true : undefined;
    }, 15_000);
    const r2 = await h.salt(survivors[0]!, ["*", "test.ping", "--out", "json", "-t", "20"]);
    const rets2 = parseReturns(r2.stdout);
    for (const m of minions) assert.equal(rets2[m.id], true, `${m.id} answers after the failover: ${r2.stdout}`);
    // one AES key and shared session keys: a minion moved to another master by the balancer does not sign in again
    assert.equal(minions.reduce((n, m) => n + m.stats.reauths, 0), reauthsBefore, "no minion had to sign in again");

    // the dead master comes back: healthy membership and the ring of three everywhere
    await h.startMaster(victim);
    await h.waitLeader([0, 1, 2], 3);
    for (const i of [0, 1, 2]) {
      await until(`m${i + 1} to see every voter healthy`, async () => {
        const mem = await h.clusterRunner(i, "members");
        return mem.unhealthy_voters.length === 0 ? true : undefined;
      }, 20_000);
      const ring = await h.clusterRunner(i, "ring_info");
      assert.deepEqual([ring.is_clustered, ring.node_count], [true, 3], `m${i + 1}'s ring`);
    }

    // --- 2. partition the current leader from its peers
    const leader2 = await h.waitLeader([0, 1, 2], 3);
    const cut = idx(leader2);
    const majority = [0, 1, 2].filter((i) => i !== cut);
    h.partition(cut);
    const leader3 = await h.waitLeader(majority, 3, 20_000, leader2);
    assert.notEqual(leader3, leader2);

    const refused = await h.saltRun(cut, ["cluster.route_set", "jobs", "cluster", "--out", "json"], 60_000);
    assert.notEqual(refused.code, 0, `the cut-off master must not commit: ${refused.stdout}`);
    const ok = await h.saltRun(majority[0]!, ["cluster.route_set", "jobs", "cluster", "--out", "json"], 60_000);
    assert.equal(ok.code, 0, ok.stderr);
    const committed = JSON.parse(ok.stdout);
    assert.equal(committed.status, "committed");
    const stale = await h.clusterRunner(cut, "routes");
    assert.equal(stale.routes.jobs, undefined, "the cut-off master has not seen the route");

    h.heal();
    await until(`m${cut + 1} to catch up after the heal`, async () => {
      const routes = await h.clusterRunner(cut, "routes");
      return routes.routes.jobs === "cluster" && routes.routing_version >= committed.index ? true : undefined;
    }, 30_000);
    await h.waitLeader([0, 1, 2], 3);
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
