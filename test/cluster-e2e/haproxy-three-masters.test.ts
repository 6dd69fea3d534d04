/**
 * The real setup: three brine masters (own processes, 127.0.0.11-13 on the standard ports, shared
 * cluster_pki_dir and cachedir) behind a real HAProxy on 127.0.0.1:4505/4506, test minions that know only the
 * balancer. `salt '*' test.ping` on master 1 gets every minion's return, including those attached to masters 2
 * and 3; the runners show three voters and a ring of three on every master; every master hands out the same
 * AES key; the job cache of another master holds the job; `salt-key -d` on master 2 is seen by all and the
 * rotation it causes gives every master the same new key.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, parseReturns, PUB_PORT, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.1";
const HOSTS = ["127.0.0.11", "127.0.0.12", "127.0.0.13"];
const MINIONS = 9;

test("3 masters behind HAProxy share every job: test.ping on master 1 reaches the minions of all three", { timeout: 180_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS });
  const minions: TestMinion[] = [];
  try {
    // static bootstrap: the runners show three voters and a ring of three on every master
    const leader = await h.waitLeader([0, 1, 2], 3);
    assert.ok(["m1", "m2", "m3"].includes(leader));
    for (let i = 0; i < 3; i++) {
      const members = await h.clusterRunner(i, "members");
      assert.deepEqual(members.voters, ["m1", "m2", "m3"]);
      assert.equal(members.node_id, `m${i + 1}`);
      assert.deepEqual(members.unhealthy_voters, []);
      const ring = await h.clusterRunner(i, "ring_info");
      assert.equal(ring.is_clustered, true);
      assert.equal(ring.node_count, 3);
      assert.deepEqual(ring.nodes, ["m1", "m2", "m3"]);
    }

    // minions know only the balancer
    const keys = await testKeys(MINIONS + 3);
    for (let i = 0; i < MINIONS; i++) minions.push(minionThrough(LB, `cm-${i}`, keys[i]!));
    await Promise.all(minions.map((m) => m.start()));
    for (const m of minions) assert.equal(m.creds?.publishPort, PUB_PORT, "the publish port announced is the balancer's");

    // HAProxy spread the minions over all three masters (both the publish and the request connections)
    const servers = await h.haproxyServers();
    for (const backend of ["salt-master-pub-backend", "salt-master-req-backend"]) {
      for (const s of ["m1", "m2", "m3"]) {
        const row = servers.find((x) => x.backend === backend && x.server === s);
        assert.ok(row && row.scur > 0, `${backend}/${s} has minions attached: ${JSON.stringify(servers)}`);
      }
    }

    const reauthsBefore = minions.reduce((n, m) => n + m.stats.reauths, 0);
    const r = await h.salt(0, ["*", "test.ping", "--out", "json", "-t", "15"]);
    assert.equal(r.code, 0, r.stderr);
    const rets = parseReturns(r.stdout);
    for (const id of minions.map((m) => m.id)) assert.equal(rets[id], true, `${id} returned through the cluster: ${r.stdout}`);
    assert.deepEqual(Object.keys(rets).sort(), minions.map((m) => m.id).sort(), "exactly one return per minion");
    assert.equal(minions.reduce((n, m) => n + m.stats.reauths, 0), reauthsBefore, "no minion had to sign in again");

    // every master hands out the same AES key (Salt's scenarios/cluster test): sign in at each master directly
    const aesOf = async () => {
      const probes = HOSTS.map((host, i) => minionThrough(host, `probe-${i}`, keys[MINIONS + i]!));
      try {
        await Promise.all(probes.map((p) => p.start()));
        return new Set(probes.map((p) => p.creds!.aes));
      } finally {
        await Promise.all(probes.map((p) => p.stop()));
      }
    };
    const before = await aesOf();
    assert.equal(before.size, 1, "one AES key for the cluster");
    const aesFile = path.join(h.shared, "pki", ".aes");
    assert.equal(readFileSync(aesFile, "latin1").trim(), [...before][0]);

    // the job is in master 3's job cache too (forwarded events mirrored), with every return
    const jobs = await h.saltRun(2, ["jobs.list_jobs", "--out", "json"]);
    const jids = Object.keys(JSON.parse(jobs.stdout));
    assert.ok(jids.length >= 1, jobs.stdout);
    const jid = jids.sort().at(-1)!;
    await until("master 3's job cache to hold every return", async () => {
      const got = (await h.controlRunner(2, "jobs.lookup_jid", [jid])) as Record<string, unknown>;
      return minions.every((m) => got[m.id] === true) ? true : undefined;
    }, 15_000);

    // salt-key -d on master 2: every master refuses the key, and the rotation gives all the same new key
    const gone = minions.pop()!;
    await gone.stop();
    const del = await h.saltKey(1, ["-d", gone.id, "-y"]);
    assert.equal(del.code, 0, del.stderr);
    const listed = await h.saltKey(2, ["-L", "--out", "json"]);
    assert.ok(!JSON.parse(listed.stdout).minions.includes(gone.id), "master 3 sees the deletion");
    const orig = [...before][0];
    await until("the rotated key in .aes", async () => (readFileSync(aesFile, "latin1").trim() !== orig ? true : undefined), 15_000);
    const after = await until("every master to hand out the rotated key", async () => {
      const s = await aesOf();
      return s.size === 1 && !s.has(orig!) ? s : undefined;
    }, 20_000, 500);
    assert.equal([...after][0], readFileSync(aesFile, "latin1").trim());

    // the remaining minions still answer, wherever they are attached (they sign in again after the rotation)
    const r2 = await h.salt(2, ["-L", minions.map((m) => m.id).join(","), "test.ping", "--out", "json", "-t", "20"]);
    const rets2 = parseReturns(r2.stdout);
    for (const m of minions) assert.equal(rets2[m.id], true, `${m.id} after the rotation: ${r2.stdout}`);
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop(process.env.BRINE_KEEP_CLUSTER === "1");
  }
});
