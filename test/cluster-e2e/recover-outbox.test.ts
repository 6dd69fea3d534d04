/**
 * A removed master's waiting records placed again (issue 16), on four real master processes: `jobs` routed to ring
 * `jobs` on m1 and m2 (members: self: both own every job); a minion attached to m4, outside the ring. With m1 and m2
 * stopped, m4 publishes to its minion and stores the return, which waits in its hand-off outbox (no owner can be
 * reached). m4 is stopped, m1 and m2 start again, and m4 is removed (`remove_member`: its outbox `unknown`, it could not be asked), then
 * `cluster.recover_outbox path=<m4's cachedir>` on m1 reads m4's LMDB directory: the job and its return reach both
 * owners, and `jobs.lookup_jid` on m3 (outside the ring) finds the return.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { open } from "lmdb";
import { ClusterHarness, minionThrough, clusterPrerequisites, until } from "../../tools/local-cluster.js";
import { LocalClient } from "../../src/lib/client/local-client.js";
import { loadMasterConfig } from "../../src/shared/config/load.js";
import { testKeys } from "../helpers/minions.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";

const LB = "127.0.0.174";
const HOSTS = ["127.0.0.175", "127.0.0.176", "127.0.0.177", "127.0.0.178"];

/** m4's outbox size and whether it holds `jid`'s return from `id`, read from its LMDB environment. */
function outboxOf(lmdbDir: string, jid: string, id: string): { outbox: number; returned: boolean } {
  const root = open({ path: lmdbDir, readOnly: true, maxDbs: 64, compression: false });
  try {
    return { outbox: root.openDB({ name: "jobs/handoff", encoding: "binary" }).getCount(), returned: root.openDB({ name: "jobs/returns", encoding: "binary" }).doesExist(`${jid}/${id}`) };
  } finally {
    void root.close();
  }
}

test("a removed master's outbox, read from its directory by recover_outbox on a live master, reaches the owners", { timeout: 600_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  // m4 works with the others down: no nonce decider to ask (its wait would refuse nothing, but costs every request)
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-recover-outbox", privateCachedir: true, extra: { runner_returns: false, brine_cluster_replay_owner_wait_ms: 0 } });
  const minions: TestMinion[] = [];
  const run = (i: number, fn: string, ...args: string[]) => h.clusterRunner(i, fn, args);
  const cfgs = h.masters.map((m) => loadMasterConfig(m.confDir));
  try {
    const leader = await h.waitLeader([0, 1, 2, 3], 4, 90_000);
    const li = h.masters.findIndex((m) => m.id === leader);
    await run(li, "ring_create", "jobs", "m1,m2");
    for (const i of [0, 1]) await until(`m${i + 1} to host ring jobs`, async () => ((await run(i, "ring_info", "jobs")).epoch >= 0 ? true : undefined), 30_000);
    await run(li, "route_set", "jobs", "jobs");
    for (const i of [0, 1, 2, 3]) await until(`m${i + 1} to see the route`, async () => ((await run(i, "routes")).routes.jobs === "jobs" ? true : undefined), 15_000);
    const [key] = await testKeys(1);
    const minion = minionThrough(HOSTS[3]!, "ro-a", key!);
    minions.push(minion);
    await minion.start();

    // the owners stopped: the job and its minion's return wait in m4's outbox
    for (const i of [0, 1]) h.kill(i, "SIGTERM");
    for (const i of [0, 1]) await h.waitExit(i);
    const m4 = new LocalClient(cfgs[3]!);
    const pub = await m4.pub({ tgt: "ro-a", fun: "test.echo", arg: ["kept"], timeoutS: 10 });
    const jid = String(pub.jid);
    assert.deepEqual(pub.minions, ["ro-a"]);
    const lmdb4 = String(cfgs[3]!.brine_lmdb_dir ?? path.join(cfgs[3]!.cachedir, "brine-node", "m4", "brine-lmdb"));
    await until("the return stored on m4, waiting in its outbox", async () => {
      const o = outboxOf(lmdb4, jid, "ro-a");
      t.diagnostic(`m4 (${lmdb4}): outbox ${o.outbox}, return stored ${o.returned}; pub ${JSON.stringify(pub)}`);
      return o.returned && o.outbox >= 2 ? o : undefined;
    }, 30_000, 500);
    h.kill(3, "SIGTERM");
    await h.waitExit(3);
    await Promise.all([0, 1].map((i) => h.startMaster(i)));
    const after = await h.waitLeader([0, 1, 2], 4, 90_000);
    const removed = await run(h.masters.findIndex((m) => m.id === after), "remove_member", "id=m4");
    assert.equal(removed.status, "committed");
    assert.equal(removed.data.outbox.status, "unknown", JSON.stringify(removed.data));
    assert.match(removed.data.outbox.reason, /cluster\.recover_outbox path=/);
    assert.equal((await run(0, "placement_check", "jobs")).jids[jid], undefined, "no live master has the job");

    const dry = await run(0, "recover_outbox", `path=${cfgs[3]!.cachedir}`, "dry_run=True");
    assert.deepEqual([dry.dry_run, dry.jids, dry.jobs_route], [true, 1, "jobs"], JSON.stringify(dry));
    assert.ok(dry.job_records >= 2, `the job record and the return: ${JSON.stringify(dry)}`);
    const real = await run(0, "recover_outbox", `path=${cfgs[3]!.cachedir}`);
    assert.equal(real.job_records, dry.job_records, "the real run adopts what the dry run counted");
    const placed = await until("the job and its return on both owners, outboxes empty", async () => {
      const r = await run(0, "placement_check", "jobs");
      const pending = Object.values(r.handoff_pending as Record<string, number>).reduce((a, b) => a + b, 0);
      return pending === 0 && [...(r.jids[jid] ?? [])].sort().join() === "m1,m2" ? r : undefined;
    }, 60_000, 1000);
    assert.ok(placed.jids[jid]);
    const looked = await h.controlRunner(2, "jobs.lookup_jid", [jid]);
    assert.deepEqual(looked, { "ro-a": "kept" }, "m3 finds the return the removed master took");
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop();
  }
});
