/**
 * The readiness rule for a learner and a follower's view of an unreachable leader, on real master processes
 * (127.0.0.101-104 behind HAProxy on 127.0.0.100), in Salt's isolated-filesystem topology:
 * - a 4th master joins through a follower and enters as a learner, but its state-sync before promotion cannot run
 *   (its state-sync manifest store, `<brine_lmdb_dir>/state-sync`, is a file here, so every attempt fails and is
 *   retried): it never writes its readiness file, and `cluster.health` on it says it is a learner not in sync;
 * - the leader is killed and the two other voters are cut from each other (no quorum, so no new leader): the
 *   learner still names the leader it knows and reports that it could not ask it (only its own lag is known);
 * - healed (a new leader), and the store's way cleared, the learner's state-sync runs, it is promoted and ready.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ClusterHarness, clusterPrerequisites, until } from "../../tools/local-cluster.js";
import { chaosPollMs } from "../../src/main-thread/cluster/cluster-service.js";

const LB = "127.0.0.100";
const HOSTS = ["127.0.0.101", "127.0.0.102", "127.0.0.103", "127.0.0.104"];

test("a learner whose state-sync has not finished is not ready and cluster.health says why; a learner whose leader is unreachable reports that it could not ask it", { timeout: 300_000 }, async (t) => {
  await clusterPrerequisites(LB, HOSTS);
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "learner-health", isolated: { secret: "learner secret" }, startWith: 1 });
  const readyFile = (i: number) => path.join(h.dirOf(i), "cache", "health", "ready");
  const health = (i: number) => h.clusterRunner(i, "health");
  const logTail = (i: number) => {
    try {
      return readFileSync(h.masters[i]!.logFile, "utf8").split("\n").slice(-25).join("\n");
    } catch {
      return "(no log)";
    }
  };
  try {
    const fp = await h.joinPinned([1, 2]);
    const leader = await h.waitLeader([0, 1, 2], 3, 60_000);
    const li = h.masters.findIndex((m) => m.id === leader);
    const [via, other] = [0, 1, 2].filter((i) => i !== li) as [number, number];

    // the 4th joins through a follower; its state-sync store cannot be opened (a file where its directory goes)
    // (under cluster_id the LMDB environments are under cachedir/brine-node/<id>/: src/shared/shared-fs.ts)
    const blocker = path.join(h.dirOf(3), "cache", "brine-node", "m4", "brine-lmdb", "state-sync");
    mkdirSync(path.dirname(blocker), { recursive: true });
    writeFileSync(blocker, "not a directory\n");
    h.configure(3, { cluster_peers: [HOSTS[via]], cluster_pub_fingerprint: fp });
    await h.startMaster(3);
    let last: unknown;
    const held = await until("m4 a learner, not ready", async () => {
      const v = await health(3).catch((e: Error) => ({ error: e.message }));
      last = v;
      return v?.learners?.includes("m4") && /learner not in sync: state-sync from/.test(v.ready_reason ?? "") ? v : undefined;
    }, 90_000, 500).catch((e: Error) => {
      throw new Error(`${e.message}; its last cluster.health: ${JSON.stringify(last)}; its log ends: ${logTail(3)}`);
    });
    assert.equal(held.ready, false, JSON.stringify(held));
    assert.equal(held.leader, leader);
    assert.equal(held.members.m4.role, "learner");
    assert.equal(existsSync(readyFile(3)), false, "no readiness file on a learner in the middle of its state-sync");
    // not for a moment either (the readiness timer ticks every second; it once found the learner between its
    // addition and the start of its state-sync, "learner in sync")
    assert.doesNotMatch(readFileSync(h.masters[3]!.logFile, "utf8"), /readiness: ready/, "m4 never ready before its promotion");
    // the members see it as a learner too, and it stays one while its state-sync cannot run
    assert.deepEqual((await h.clusterRunner(li, "members")).voters, ["m1", "m2", "m3"]);
    await new Promise((r) => setTimeout(r, 6000));
    const still = await health(3);
    assert.deepEqual([still.ready, still.members.m4.role], [false, "learner"], JSON.stringify(still));

    // the leader unreachable, and no other leader possible: the learner keeps the leader it knows and says it could not ask it
    // the two other voters are cut from each other first (each master reads its chaos file every 200 ms,
    // chaosPollMs), then the leader is killed: killed first, its followers campaign as soon as its connection
    // drops (e063c0e) and could elect a new leader before the cut took effect
    writeFileSync(h.masters[via]!.chaosFile, h.masters[other]!.id);
    writeFileSync(h.masters[other]!.chaosFile, h.masters[via]!.id);
    await new Promise((r) => setTimeout(r, 5 * chaosPollMs));
    h.kill(li, "SIGKILL");
    const lost = await until("m4 reporting its leader unreachable", async () => {
      const v = await health(3).catch(() => undefined);
      return v && v.leader === leader && /could not be asked/.test(v.lag_known_for ?? "") ? v : undefined;
    }, 60_000, 500);
    assert.match(lost.lag_known_for, new RegExp(`^this master only \\(the leader ${leader} could not be asked: `), JSON.stringify(lost));
    assert.equal(lost.ready, false);
    assert.equal(typeof lost.members.m4.lag, "number", "its own lag is still known");

    // healed: a new leader; the store's way cleared: the state-sync runs, the learner is promoted and ready
    writeFileSync(h.masters[via]!.chaosFile, "");
    writeFileSync(h.masters[other]!.chaosFile, "");
    rmSync(blocker);
    // a learner in sync is ready before its promotion commits (the readiness rule): wait for both
    const promoted = await until("m4 promoted and ready", async () => {
      if (!existsSync(readyFile(3))) return undefined;
      const v = await health(3).catch(() => undefined);
      return v?.members?.m4?.role === "voter" ? v : undefined;
    }, 90_000, 500);
    assert.equal(promoted.ready, true, JSON.stringify(promoted));
  } finally {
    await h.stop();
  }
});
