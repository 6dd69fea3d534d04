/**
 * The isolated-filesystem cluster as an operator runs it: real salt-master processes behind a real HAProxy, each
 * master with its own directories and nothing shared.
 *
 * m1 starts alone and founds (its peers are named with their ids and none answers: the lowest id founds); the
 * operator reads the `cluster.pub` fingerprint from `salt-key -F` on m1 and starts m2 and m3 with it and the
 * secret. A minion key is accepted on m1 (auto_accept is off) and an SLS and a pillar written into m1's roots are
 * sent to the other masters with `cluster.sync_roots`. Then a 4th master process starts from a vanilla directory
 * whose config names only cluster_id, cluster_secret, cluster_pub_fingerprint and one peer (m3): it joins, pulls
 * the keys and the roots, and is promoted to voter on every master. A minion that knows only the balancer, sent
 * to m4 by HAProxy, signs in there with the key m4 pulled (never pending), gets its pillar from m4's synced
 * pillar_roots, and `state.apply` published on m4 runs the SLS the minion fetched from m4's synced file_roots.
 *
 * Then `cluster.remove_member id=m4` run on a follower (forwarded to the leader) takes m4 out; m4 restarted from
 * empty directories with the secret is refused as removed, with a log line on both sides, and exits after
 * cluster_join_timeout; once `cluster.readmit_member id=m4` is committed it joins again and becomes a voter.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, parseReturns, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.230";
const HOSTS = ["127.0.0.231", "127.0.0.232", "127.0.0.233", "127.0.0.234"];

const SLS = "joined:\n  test.succeed_without_changes:\n    - comment: served by the synced file_roots\n";

test("a 4th master process joins a running 3-master isolated cluster behind HAProxy from a vanilla directory, and a minion sent to it runs state.apply from the synced roots; removed on a follower, it is refused as removed until readmit_member", { timeout: 300_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  // m4 makes its own key pair, as a vanilla install does (the others are given pooled ones: tools/master-key-pool.ts)
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "iso-real", isolated: { secret: "staple battery" }, startWith: 1, extra: { auto_accept: false }, ownKeys: [3] });
  const minions: TestMinion[] = [];
  try {
    // m1 founded: the operator reads the fingerprint joiners pin
    const fp = await h.joinPinned([1, 2]);

    // a minion's key, accepted on m1 by the operator (auto_accept is off everywhere)
    const [key] = await testKeys(1);
    await h.only(0);
    const first = minionThrough(LB, "iso-minion", key!, undefined, { authDeadlineMs: 60_000 });
    minions.push(first);
    const signedIn = first.start();
    await until("iso-minion pending on m1", async () => ((await h.saltKey(0, ["-l", "un", "--out", "json"])).stdout.includes("iso-minion") ? true : undefined), 30_000, 300);
    const accepted = await h.saltKey(0, ["-a", "iso-minion", "-y"]);
    assert.equal(accepted.code, 0, accepted.stderr);
    await signedIn;
    await first.stop();
    minions.pop();

    // roots written on m1 only, sent to every peer with sync_roots (whose answer names each peer)
    const m1 = h.dirOf(0);
    mkdirSync(path.join(m1, "srv", "salt"), { recursive: true });
    mkdirSync(path.join(m1, "srv", "pillar"), { recursive: true });
    writeFileSync(path.join(m1, "srv", "salt", "joined.sls"), SLS);
    writeFileSync(path.join(m1, "srv", "pillar", "top.sls"), "base:\n  '*':\n    - site\n");
    writeFileSync(path.join(m1, "srv", "pillar", "site.sls"), "site:\n  name: isolated\n");
    const synced = await h.clusterRunner(0, "sync_roots");
    for (const peer of ["m2", "m3"]) assert.deepEqual(synced[peer]?.errors, [], `sync_roots on ${peer}: ${JSON.stringify(synced)}`);
    assert.ok(existsSync(path.join(h.dirOf(2), "srv", "salt", "joined.sls")), "m3 holds the SLS after sync_roots");
    await until("iso-minion's key on m3", async () => (existsSync(path.join(h.dirOf(2), "cluster-pki", "minions", "iso-minion")) ? true : undefined), 40_000, 500);

    // the 4th master: a vanilla directory, a config naming only m3 as its peer
    const m4 = h.dirOf(3);
    assert.ok(!existsSync(path.join(m4, "srv")) && !existsSync(path.join(m4, "pki")) && !existsSync(path.join(m4, "cluster-pki")), "m4 starts from nothing");
    h.configure(3, { cluster_peers: [HOSTS[2]], cluster_pub_fingerprint: fp });
    await h.startMaster(3);
    await h.waitLeader([0, 1, 2, 3], 4, 90_000);
    for (let i = 0; i < 4; i++) assert.deepEqual((await h.clusterRunner(i, "members")).voters, ["m1", "m2", "m3", "m4"], `m${i + 1} lists m4 as a voter`);
    assert.ok(existsSync(path.join(m4, "cluster-pki", "minions", "iso-minion")), "m4 pulled the accepted key");
    assert.deepEqual(readdirSync(path.join(m4, "srv", "salt")), ["joined.sls"], "m4 pulled the file_roots");
    assert.deepEqual(readdirSync(path.join(m4, "srv", "pillar")).sort(), ["site.sls", "top.sls"], "m4 pulled the pillar_roots");

    // a minion that knows only the balancer, sent to m4
    await h.only(3);
    await h.waitUp([3]);
    const minion = minionThrough(LB, "iso-minion", key!, undefined, { authDeadlineMs: 20_000 });
    minions.push(minion);
    await minion.start();
    const onM4 = (await h.haproxyServers()).filter((s) => s.server === "m4");
    assert.ok(onM4.length === 2 && onM4.every((s) => s.scur > 0), `the minion's connections are on m4: ${JSON.stringify(onM4)}`);
    assert.deepEqual(minion.pillar, { site: { name: "isolated" } }, "its pillar comes from m4's synced pillar_roots");

    const r = await h.salt(3, ["iso-minion", "state.apply", "joined", "--out", "json", "-t", "30"]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    const ret = parseReturns(r.stdout)["iso-minion"] as Record<string, { result: boolean; comment: string; __sls__: string }>;
    const state = ret?.["test_|-joined_|-joined_|-succeed_without_changes"];
    assert.ok(state, `a state from joined.sls: ${r.stdout}`);
    assert.equal(state.result, true);
    assert.equal(state.comment, "served by the synced file_roots");
    assert.equal(state.__sls__, "joined");

    // an SLS no master has: the minion's fetch from m4 finds nothing and says so, as Salt does
    const missing = await h.salt(3, ["iso-minion", "state.apply", "nowhere", "--out", "json", "-t", "30"]);
    assert.deepEqual(parseReturns(missing.stdout)["iso-minion"], ["No matching sls found for 'nowhere' in env 'base'"]);
    await minion.stop();
    minions.pop();

    // remove_member run on a follower is forwarded to the leader: m4 leaves Raft and every member forgets its key
    const leader = await h.waitLeader([0, 1, 2, 3], 4);
    const follower = [0, 1, 2].find((i) => h.masters[i]!.id !== leader)!;
    const removed = await h.clusterRunner(follower, "remove_member", ["id=m4"]);
    assert.equal(removed.status, "committed", JSON.stringify(removed));
    await h.waitLeader([0, 1, 2], 3);
    await until("m4's key forgotten on every member", async () => ([0, 1, 2].every((i) => !existsSync(path.join(h.dirOf(i), "cluster-pki", "peers", "m4.pub"))) ? true : undefined), 20_000, 300);

    // restarted from scratch with the secret, the removed master is refused (both sides say why) and gives up
    h.kill(3, "SIGTERM");
    await h.waitExit(3);
    rmSync(path.join(m4, "cluster-pki"), { recursive: true, force: true });
    rmSync(path.join(m4, "cache"), { recursive: true, force: true });
    h.configure(3, { cluster_join_timeout: 6 });
    await assert.rejects(h.startMaster(3), (e: Error) => {
      assert.match(e.message, /exited \(\d+\) while starting: .*m4 was removed from cluster iso-real with cluster\.remove_member.*readmit_member id=m4/s);
      return true;
    });
    assert.match(readFileSync(h.masters[2]!.logFile, "utf8"), /cluster join: refused m4 \(removed\)/, "the member it asked logs the refusal");
    assert.ok(!existsSync(path.join(m4, "cluster-pki", "cluster.pem")), "nothing handed to the removed master");

    // re-admitted by the runner, it joins again and becomes a voter
    const readmitted = await h.clusterRunner(1, "readmit_member", ["id=m4"]);
    assert.equal(readmitted.status, "committed", JSON.stringify(readmitted));
    h.configure(3, { cluster_join_timeout: 300 });
    await h.startMaster(3);
    await h.waitLeader([0, 1, 2, 3], 4, 90_000);
  } finally {
    await Promise.all(minions.map((m) => m.stop().catch(() => undefined)));
    await h.stop(process.env.KEEP_CLUSTER === "1");
    if (process.env.KEEP_CLUSTER === "1") console.log(`kept ${h.root}`);
  }
});
