/**
 * Jobs stored only on their ring owners, on five real master processes (127.0.0.221-225 behind HAProxy on
 * 127.0.0.220): ring `jobs` on m1, m2, m3 with `members: voters` and `replicas: 2`, `jobs` routed to it.
 * - 1,000 jobs published on each master in turn (the test's LocalClient per master) to four in-repo minions
 *   attached through the balancer: placement_check (on a voter) finds every jid on exactly its two owners,
 *   with every master's hand-off outbox empty;
 * - the owners hold every return: list_jobs on every master lists every job; lookup_jid on every master
 *   returns the four minions' returns for a sample of jids (not all 5,000 combinations: a runner thread per
 *   call on a box shared with other agents);
 * - returns landing on a master outside the ring count `not_a_member` in its cluster.routes, and the salt CLI
 *   on such a master still gets every return (the wait reads events, which every master forwards);
 * - one owner killed (SIGKILL): lookup_jid and list_jobs still answer everything from the others, and jobs
 *   published after the kill are readable too (their copies wait on the master that took them).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, parseReturns, clusterPrerequisites, until } from "../../tools/local-cluster.js";
import { LocalClient } from "../../src/lib/client/local-client.js";
import { loadMasterConfig } from "../../src/shared/config/load.js";

const LB = "127.0.0.220";
const HOSTS = ["127.0.0.221", "127.0.0.222", "127.0.0.223", "127.0.0.224", "127.0.0.225"];
const JOBS = 1000;
const MINIONS = ["place-a", "place-b", "place-c", "place-d"];
/** jobs published at once (each a clear publish request to one master) */
const IN_FLIGHT = 16;

test("jobs live on their two ring owners: 1,000 jobs placed, read from every master, and read with one owner down", { timeout: 900_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-placement", privateCachedir: true, extra: { runner_returns: false } });
  const minions: TestMinion[] = [];
  const run = (i: number, fn: string, ...args: string[]) => h.clusterRunner(i, fn, args);
  const cfgs = h.masters.map((m) => loadMasterConfig(m.confDir));
  const runner = (i: number, fun: string, arg: unknown[]) => h.controlRunner(i, fun, arg);
  try {
    await h.waitLeader([0, 1, 2, 3, 4], 5, 60_000);
    await run(3, "ring_create", "jobs", "m1,m2,m3");
    for (const i of [0, 1, 2]) await until(`m${i + 1} to host ring jobs`, async () => ((await run(i, "ring_info", "jobs")).epoch >= 0 ? true : undefined), 30_000);
    await run(4, "ring_set", "jobs", "members=voters", "replicas=2");
    for (const i of [0, 1, 2]) {
      await until(`m${i + 1}'s ring jobs to shard over its three voters with replicas 2`, async () => {
        const r = await run(i, "ring_info", "jobs");
        return r.node_count === 3 && r.replicas === 2 && r.members === "voters" ? true : undefined;
      }, 30_000);
    }
    await run(0, "route_set", "jobs", "jobs");
    for (const i of [0, 1, 2, 3, 4]) await until(`m${i + 1} to see the route`, async () => ((await run(i, "routes")).routes.jobs === "jobs" ? true : undefined), 15_000);

    const keys = await testKeys(MINIONS.length);
    MINIONS.forEach((id, i) => minions.push(minionThrough(LB, id, keys[i]!)));
    await Promise.all(minions.map((m) => m.start()));

    // the salt CLI on a master outside the ring gets every return
    const ping = await until("the four minions to answer through m4", async () => {
      const r = await h.salt(3, ["place-*", "test.ping", "--out", "json", "-t", "20"]);
      const got = parseReturns(r.stdout);
      return MINIONS.every((m) => got[m] === true) ? got : undefined;
    }, 60_000, 1000);
    assert.deepEqual(Object.keys(ping).sort(), MINIONS);

    // --- 1,000 jobs, 200 published on each master in turn, IN_FLIGHT at once. Not on several masters at once: two
    // masters publishing in the same millisecond can give two jobs the same jid (each master's jid clock is its
    // own), which is not what this test is about
    const clients = cfgs.map((c) => new LocalClient(c));
    const jids: string[] = [];
    const perOrigin = JOBS / clients.length;
    for (const [o, client] of clients.entries()) {
      let next = 0;
      await Promise.all(
        Array.from({ length: IN_FLIGHT }, async () => {
          for (;;) {
            const n = next++;
            if (n >= perOrigin) return;
            const r = await client.pub({ tgt: "place-*", fun: "test.echo", arg: [`job-${o * perOrigin + n}`], timeoutS: 30 });
            assert.ok(r.jid, `job ${n} on m${o + 1}: ${JSON.stringify(r)}`);
            jids.push(r.jid as string);
          }
        }),
      );
    }
    assert.equal(new Set(jids).size, JOBS);

    // --- every jid on exactly its two owners, nothing waiting in any outbox
    const placed = await until(
      "every job placed on its two owners",
      async () => {
        const r = await run(0, "placement_check", "jobs", "limit=5000");
        const pending = Object.values(r.handoff_pending as Record<string, number>).reduce((a, b) => a + b, 0);
        t.diagnostic(`placement_check: checked ${r.checked}, violations ${r.violations.length}, pending ${JSON.stringify(r.handoff_pending)}`);
        return r.ok && pending === 0 && jids.every((j) => r.jids[j]) ? r : undefined;
      },
      300_000,
      5_000,
    );
    for (const jid of jids) assert.equal(placed.jids[jid].length, 2, `${jid}: ${placed.jids[jid]}`);
    assert.deepEqual(placed.violations, []);
    const perMaster: Record<string, number> = {};
    for (const holders of Object.values(placed.jids as Record<string, string[]>)) for (const m of holders) perMaster[m] = (perMaster[m] ?? 0) + 1;
    t.diagnostic(`jobs held per master: ${JSON.stringify(perMaster)}`);
    assert.equal(perMaster.m4 ?? 0, 0, "m4 is outside the ring: it keeps nothing");
    assert.equal(perMaster.m5 ?? 0, 0, "m5 is outside the ring: it keeps nothing");

    // every return arrives (the minions answer within seconds; the hand-off follows)
    const sample = jids.filter((_, i) => i % 250 === 0);
    for (const i of [0, 1, 2, 3, 4]) {
      const listed = await runner(i, "jobs.list_jobs", []);
      for (const jid of jids) assert.ok(listed[jid], `m${i + 1}'s list_jobs lists ${jid}`);
      for (const jid of sample) {
        const ret = await until(`m${i + 1} to find the four returns of ${jid}`, async () => {
          const r = await runner(i, "jobs.lookup_jid", [jid]);
          return Object.keys(r).length === MINIONS.length ? r : undefined;
        }, 60_000, 1000);
        for (const m of MINIONS) assert.match(String(ret[m]), /^job-\d+$/, `m${i + 1} ${jid} ${m}: ${JSON.stringify(ret)}`);
      }
    }

    // --- returns that landed outside the ring were counted there
    const outside = await Promise.all([3, 4].map((i) => run(i, "routes", "jobs")));
    const notMember = outside.reduce((a, r) => a + (r.drop_stats.jobs?.not_a_member ?? 0), 0);
    assert.ok(notMember > 0, `returns reached m4/m5 through the balancer and were counted: ${JSON.stringify(outside.map((r) => r.drop_stats))}`);

    // --- kill one owner: reads still answer everything
    h.kill(1, "SIGKILL");
    await h.waitExit(1);
    // a minion whose publish connection went through m2 reconnects through the balancer first (else it never
    // sees the next jobs: nothing to do with placement)
    await until("the four minions to answer through m1 with m2 down", async () => {
      const got = new Set<string>();
      for await (const r of clients[0]!.cmdIter({ tgt: "place-*", fun: "test.ping", timeoutS: 10 })) if (!("missing" in r)) got.add(r.id);
      return got.size === MINIONS.length ? true : undefined;
    }, 90_000, 1000);
    const after: string[] = [];
    for (let n = 0; n < 4; n++) {
      const r = await clients[[0, 2, 3, 4][n % 4]!]!.pub({ tgt: "place-*", fun: "test.echo", arg: [`after-${n}`], timeoutS: 30 });
      after.push(r.jid as string);
    }
    for (const i of [0, 2, 3, 4]) {
      const listed = await runner(i, "jobs.list_jobs", []);
      for (const jid of [...jids, ...after]) assert.ok(listed[jid], `with m2 down, m${i + 1}'s list_jobs lists ${jid}`);
      for (const jid of [...sample.slice(0, 2), ...after.slice(0, 2)]) {
        const ret = await until(`m${i + 1} to find the four returns of ${jid} with m2 down`, async () => {
          const r = await runner(i, "jobs.lookup_jid", [jid]);
          return Object.keys(r).length === MINIONS.length ? r : undefined;
        }, 60_000, 1000);
        assert.deepEqual(Object.keys(ret).sort(), MINIONS);
      }
    }
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
