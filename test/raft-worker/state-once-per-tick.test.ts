/**
 * A group's state (term, vote, commit index, membership) is written with a commit only when more than its
 * commit index moved; a state whose commit index alone moved rides the first commit after each tick. Under
 * traffic that is one put of the state per tick instead of one per commit (one B-tree leaf fewer to write
 * and fsync on every commit: DurableWrites.tick).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { GroupWrite } from "../../src/workers/raft/backend.js";
import { TestCluster } from "./harness.js";

const route = (i: number) => ({ kind: "ROUTE" as const, value: { data_type: `dt${i % 7}`, ring_id: null } });

/** Every message sent has reached its receiver and every node's pump is idle (twice: the answers to the answers). */
async function settle(c: TestCluster): Promise<void> {
  for (let round = 0; round < 2; round++) {
    for (const n of c.nodes.values()) await c.delivered(n.name);
    await Promise.all([...c.nodes.values()].map((n) => n.manager.idle()));
  }
}

test("between two ticks, commits of entries write no state; the first commit after a tick writes each node's newest; a clean stop writes the last", { timeout: 300_000 }, async () => {
  const c = new TestCluster(["s1", "s2", "s3"], { seed: 5 });
  const written = new Map<string, { entryCommits: number; states: number[] }>();
  for (const n of c.nodes.values()) {
    const mine = { entryCommits: 0, states: [] as number[] };
    written.set(n.name, mine);
    n.backend.onCommit = (ws: readonly GroupWrite[]) => {
      for (const w of ws) {
        if (w.group !== "cluster") continue;
        if (w.entries.length > 0) mine.entryCommits++;
        if (w.state) mine.states.push(w.state.hardState.commit);
      }
    };
  }
  await c.bootstrapAll();
  c.startTicking();
  let last = 0;
  try {
    const leader = await c.waitFor("a leader", () => c.leader());
    // the election's term and vote were written; from here on no tick: no election, only traffic
    const r0 = await leader.manager.propose("cluster", route(0));
    assert.equal(r0.applied, "applied");
    c.stopTicking();
    await settle(c);
    // a tick absorbed before the ticking stopped may have left a state due: one commit takes it
    assert.equal((await leader.manager.propose("cluster", route(0))).applied, "applied");
    await settle(c);
    const before = new Map([...written].map(([name, w]) => [name, { ...w, states: [...w.states] }]));
    const N = 30;
    for (let i = 1; i <= N; i++) {
      const r = await leader.manager.propose("cluster", route(i));
      assert.equal(r.applied, "applied");
      last = r.index;
    }
    await settle(c);
    for (const [name, w] of written) {
      const b = before.get(name)!;
      // every sequential proposal is a commit of its own, on the leader and on each follower
      assert.ok(w.entryCommits - b.entryCommits >= N, `${name}: ${w.entryCommits - b.entryCommits} commits of entries, expected ${N} or more`);
      assert.deepEqual(w.states.slice(b.states.length), [], `${name} wrote its state with commits that moved only its commit index (state commits ${JSON.stringify(w.states)}, before ${JSON.stringify(b.states)})`);
    }
    // one tick: the next commit on each node carries its newest state, once
    for (const n of c.nodes.values()) n.manager.tick();
    const r = await leader.manager.propose("cluster", route(N + 1));
    assert.equal(r.applied, "applied");
    last = r.index;
    await settle(c);
    for (const [name, w] of written) {
      const after = w.states.slice(before.get(name)!.states.length);
      assert.equal(after.length, 1, `${name} wrote its state ${after.length} times after one tick`);
      assert.ok(after[0]! >= r0.index, `${name}'s state after the tick holds commit ${after[0]}`);
    }
    assert.deepEqual(c.violations, []);
  } finally {
    await c.stop();
  }
  // a clean stop leaves every node's newest commit index on its disk
  const leaderCommit = Math.max(...[...c.nodes.values()].map((n) => n.backend.durable("cluster")!.hardState.commit));
  assert.equal(leaderCommit, last, "the leader's last commit index is on its disk after a clean stop");
  for (const n of c.nodes.values()) assert.equal(n.backend.durable("cluster")!.hardState.commit, n.manager.status().groups.find((g) => g.group === "cluster")!.commit, `${n.name} stopped with its commit index on its disk`);
});
