/**
 * The leader's own write (Raft thesis §10.2.1, etcd's async storage writes), seen from outside the worker
 * shell, in both of `brine_raft_leader_write`'s ways (waited for on the Raft thread, the default, or in the
 * background on LMDB's write thread): appends leave before the leader's own write lands, no announced commit
 * index runs ahead of the leader's disk, the leader answers only what its own disk holds, and applying a
 * committed entry does not wait for its commit index to be durable (it reaches the disk with a later write, at
 * the latest one tick later).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { TestCluster } from "./harness.js";

const route = (i: number) => ({ kind: "ROUTE" as const, value: { data_type: `dt${i % 7}`, ring_id: null } });

test("a committed entry is applied and answered before its commit index is durable; the index reaches the disk with a later write", { timeout: 300_000 }, async () => {
  // commits take 2 ms, so a write of the commit index started at the end of an iteration is not yet durable
  // when the caller resumes
  await TestCluster.run(["c1", "c2", "c3"], { commitDelayMs: 2, seed: 11 }, async (c, leader) => {
    const N = 20;
    let answeredAhead = 0;
    let last = 0;
    for (let i = 0; i < N; i++) {
      const via = c.leader() ?? leader;
      const r = await via.manager.propose("cluster", route(i));
      assert.equal(r.applied, "applied");
      // the entries themselves are always durable on the answering node before it applies them
      assert.ok(via.backend.durable("cluster")!.lastIndex >= r.index, `entry ${r.index} applied before it was durable`);
      if (via.backend.durable("cluster")!.hardState.commit < r.index) answeredAhead++;
      last = r.index;
    }
    // (a shell that wrote the commit index before applying would answer none of them this way)
    assert.ok(answeredAhead > 0, "every result waited for a durable commit index");
    for (const n of c.nodes.values()) {
      await c.waitFor(`${n.name}'s commit index to reach its disk`, () => n.backend.durable("cluster")!.hardState.commit >= last);
    }
    assert.deepEqual(c.violations, []);
    assert.ok(c.aheadOfOwnWrite > 0, "no append left before its leader's own write finished");
  });
});

test("a sole voter replicating to a learner never announces a commit index its own disk does not hold yet", { timeout: 300_000 }, async () => {
  // A sole voter commits an entry as it appends it. Its appends may only leave before its own write if they
  // announce no such commit: the learner would apply an entry the leader could still lose in a crash.
  const c = new TestCluster(["s1", "s2"], { commitDelayMs: 3, seed: 5 });
  const s1 = c.node("s1");
  const s2 = c.node("s2");
  try {
    await s1.manager.bootstrap(["s1"]);
    await s1.manager.start();
    await s2.manager.join();
    await s2.manager.start();
    c.startTicking();
    await c.waitFor("s1 to lead", () => c.leader()?.name === "s1");
    await s1.manager.changeMembership("cluster", { kind: "addLearner", node_id: "s2" });
    let last = 0;
    for (let i = 0; i < 10; i++) last = (await s1.manager.propose("cluster", route(i))).index;
    const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => s1.manager.propose("cluster", route(i))));
    last = Math.max(last, ...burst.map((r) => r.index));
    await c.waitFor("the learner to apply every entry", () => s2.manager.status().groups[0]!.applied >= last);
    assert.deepEqual(c.violations, []);
    // the learner got its entries through appends only (no snapshot: the log is never compacted here), so
    // appends announcing commits were checked; how many depends on batching, hence only "some"
    assert.ok((c.checked.get("MsgApp") ?? 0) >= 1, "appends to the learner were checked");
  } finally {
    await c.stop();
  }
});

test("a leader with a slow disk: its appends are written in the background, two followers' answers commit an entry before its own write lands, and it answers only once that write landed", { timeout: 300_000 }, async () => {
  await TestCluster.run(["a1", "a2", "a3"], { commitDelayMs: 1, seed: 3, leaderWrite: "background" }, async (c, leader) => {
    // the leader's disk takes 25 ms, its followers' 1 ms: their answers arrive long before its own write lands
    leader.backend.commitDelayMs = 25;
    const before = leader.backend.backgroundCommits;
    let committedAhead = 0;
    c.onSend = (from, group, m) => {
      if (from !== leader.name || m.type !== "MsgApp") return;
      if (m.commit > (leader.backend.durable(group)?.lastIndex ?? 0)) committedAhead++;
    };
    for (let i = 0; i < 8; i++) {
      const r = await leader.manager.propose("cluster", route(i));
      assert.equal(r.applied, "applied");
      assert.ok(leader.backend.durable("cluster")!.lastIndex >= r.index, `answered ${r.index} before the leader's own write of it landed`);
      if (c.leader() !== leader) break; // a slow leader may lose its lease on a loaded box: what was checked holds
    }
    assert.ok(leader.backend.backgroundCommits > before, "every one of the leader's appends was waited for on its own thread");
    assert.ok(committedAhead > 0, "no append announced a commit beyond the leader's own disk: the followers' answers were never counted before the leader's own write landed");
    assert.deepEqual(c.violations, []);
  });
});

test("a leader that waits for its own write (the default): its appends leave before that write starts, none of its writes goes to the background, and it answers only what its disk holds", { timeout: 300_000 }, async () => {
  await TestCluster.run(["w1", "w2", "w3"], { commitDelayMs: 2, seed: 7 }, async (c, leader) => {
    const before = c.aheadOfOwnWrite;
    for (let i = 0; i < 8; i++) {
      const r = await leader.manager.propose("cluster", route(i));
      assert.equal(r.applied, "applied");
      assert.ok(leader.backend.durable("cluster")!.lastIndex >= r.index, `answered ${r.index} before the leader's own write of it landed`);
      if (c.leader() !== leader) break; // a leader may lose its lease on a loaded box: what was checked holds
    }
    const st = leader.manager.status();
    assert.equal(st.leaderWrite, "waited");
    assert.equal(st.backgroundCommits, 0, "a write went to the background");
    assert.equal(leader.backend.backgroundCommits, 0);
    // the flush comes before the commit: the followers write while the leader does
    assert.ok(c.aheadOfOwnWrite > before, "no append left before its leader's own write finished");
    assert.deepEqual(c.violations, []);
  });
});
