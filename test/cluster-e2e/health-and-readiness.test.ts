/**
 * `salt-run cluster.health` and the readiness file on three real master processes (127.0.0.151-153 behind
 * HAProxy on 127.0.0.150), each with its own cachedir:
 * - every master writes `cachedir/health/ready` once it is a caught-up voter; cluster.health on each names the
 *   same leader and term, every member a voter with its link up, and the leader gives every member's lag (a
 *   follower too, as the leader reports it);
 * - the three share one indexed key store (`keys.cache_driver: mmap_key` in the shared cluster_pki_dir, three
 *   processes): a minion accepted through m1 is targeted by a publish on m3 and listed by salt-key on m2;
 * - the state-sync thread's status file is reported per channel and peer;
 * - a master cut off from the others loses its readiness file (no leader) while the majority keeps theirs;
 *   healed, it is ready again; a stopped master leaves no file and the leader reports its link down.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { testKeys } from "../helpers/minions.js";
import { ClusterHarness, minionThrough, parseReturns, clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.150";
const HOSTS = ["127.0.0.151", "127.0.0.152", "127.0.0.153"];

test("cluster.health and the readiness file follow leadership, links and a partition", { timeout: 300_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const [keys] = await testKeys(1);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-health", privateCachedir: true, extra: { runner_returns: false, "keys.cache_driver": "mmap_key" } });
  let minion: TestMinion | undefined;
  const cachedir = (i: number) => path.join(h.root, h.masters[i]!.id, "cache");
  const readyFile = (i: number) => path.join(cachedir(i), "health", "ready");
  const health = (i: number) => h.clusterRunner(i, "health");
  try {
    const leader = await h.waitLeader([0, 1, 2], 3);
    await until("every master's readiness file", async () => ([0, 1, 2].every((i) => existsSync(readyFile(i))) ? true : undefined), 20_000);

    const views = await Promise.all([0, 1, 2].map(health));
    for (const [i, v] of views.entries()) {
      assert.equal(v.node_id, `m${i + 1}`);
      assert.equal(v.ready, true, JSON.stringify(v));
      assert.equal(v.leader, leader);
      assert.equal(v.term, views[0].term);
      assert.ok(v.commit_index > 0);
      assert.deepEqual(v.learners, []);
      assert.deepEqual(Object.keys(v.members).sort(), ["m1", "m2", "m3"]);
      for (const [id, m] of Object.entries<any>(v.members)) {
        assert.equal(m.role, "voter");
        assert.equal(m.leader, id === leader);
        assert.equal(m.link, id === v.node_id ? "self" : "up", `${v.node_id} sees ${id}`);
      }
    }
    const li = Number(leader.slice(1)) - 1;
    const onLeader = views[li];
    assert.equal(onLeader.lag_known_for, "every member");
    for (const m of Object.values<any>(onLeader.members)) assert.equal(typeof m.lag, "number");
    // a follower asks the leader (raft/progress) and gives every member's lag too
    for (const [i, v] of views.entries()) {
      if (i === li) continue;
      assert.match(v.lag_known_for, new RegExp(`^every member \\(the others' as the leader ${leader} reported them\\)`), JSON.stringify(v));
      for (const [id, m] of Object.entries<any>(v.members)) assert.equal(typeof m.lag, "number", `${v.node_id} knows ${id}'s lag`);
    }

    // one indexed key store, three processes: accepted through m1 (auto_accept), targeted from m3, listed on m2
    minion = minionThrough(HOSTS[0]!, "kh-1", keys!);
    await minion.start();
    const pinged = await h.salt(2, ["kh-1", "test.ping", "--out", "json", "-t", "15"]);
    assert.deepEqual(parseReturns(pinged.stdout), { "kh-1": true }, pinged.stdout + pinged.stderr);
    const listed = await h.saltKey(1, ["-L", "--out", "json"]);
    assert.deepEqual(JSON.parse(listed.stdout).minions, ["kh-1"], listed.stdout + listed.stderr);
    assert.equal(existsSync(path.join(h.shared, "pki", "minions", "kh-1")), false, "no key file: the store holds it");

    // the state-sync thread's status file, as that thread writes it: reported per channel and peer
    const synced = await until("a master reporting its last state-sync", async () => {
      for (const i of [0, 1, 2]) {
        const v = await health(i);
        if (v.state_sync && Object.keys(v.state_sync).length) return v;
      }
      return undefined;
    }, 30_000);
    assert.equal(synced.state_sync.error, undefined, JSON.stringify(synced.state_sync));
    for (const [channel, peers] of Object.entries<any>(synced.state_sync)) {
      for (const [peer, e] of Object.entries<any>(peers)) {
        assert.ok(["m1", "m2", "m3"].includes(peer) && peer !== synced.node_id, `${channel}: ${peer}`);
        for (const k of ["items", "bytes", "deleted"]) assert.equal(typeof e[k], "number", `${channel}/${peer}.${k}`);
        // the masters share cluster_pki_dir: a key channel's pull found it shared and says so
        if (channel === "keys" || channel === "denied_keys") assert.equal(e.shared, true, `${channel}/${peer}: ${JSON.stringify(e)}`);
      }
    }

    // cut a follower off (Raft and forwarding dropped; the peer sessions stay up): it loses its leader and its
    // readiness, the majority side keeps both
    const cut = (li + 2) % 3;
    const cutId = h.masters[cut]!.id;
    h.partition(cut);
    await until(`${cutId} to lose its readiness file`, async () => (existsSync(readyFile(cut)) ? undefined : true), 30_000);
    const isolated = await health(cut);
    assert.equal(isolated.ready, false);
    assert.match(isolated.ready_reason, /without a leader|not a member|behind/);
    const majority = await health(li);
    assert.equal(majority.ready, true, "the majority side stays ready");
    assert.ok(existsSync(readyFile(li)));

    h.heal();
    await until(`${cutId} to be ready again`, async () => (existsSync(readyFile(cut)) ? true : undefined), 60_000);

    const other = (li + 1) % 3;
    // a stopped master leaves no readiness file, and the leader reports its link down
    const otherId = h.masters[other]!.id;
    h.kill(other, "SIGTERM");
    await h.waitExit(other);
    assert.equal(existsSync(readyFile(other)), false, "a stopped master leaves no readiness file");
    const after = await until(`${leader} to see ${otherId}'s link down`, async () => {
      const v = await health(li);
      return v.members[otherId].link === "down" ? v : undefined;
    }, 30_000);
    assert.equal(after.ready, true, "two of three voters: the leader stays ready");
    assert.equal(typeof after.members[otherId].lag, "number");
  } finally {
    await minion?.stop();
    await h.stop();
  }
});
