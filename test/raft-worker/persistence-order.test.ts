/**
 * The persistence-order contract, checked from outside the shell: every message a node sends is compared,
 * when the transport receives it, with what that node's backend has durably committed at that moment.
 * A vote grant needs its (term, vote) on disk, an append acknowledgement its entries, any message its term.
 * Commits are slowed down (commitDelayMs) so a shell that sent before its commit finished would be caught.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MemoryBackend, type GroupWrite } from "../../src/workers/raft/backend.js";
import { GroupManager, type Transport } from "../../src/workers/raft/manager.js";
import { newMessage, type Message } from "../../src/workers/raft/core/types.js";
import { createRingBuffer } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";
import { TEST_LIMITS, TestCluster, aheadOfOwnWrite, persistenceViolation } from "./harness.js";

test("the checker itself: flags a vote, an acknowledgement, a term and an announced commit that are not yet durable", () => {
  const durable = { hardState: { term: 3, vote: 7, commit: 4 }, lastIndex: 5 };
  const vote = { ...newMessage("MsgVoteResp", 1, 7, 3) };
  assert.equal(persistenceViolation(durable, vote), undefined);
  assert.match(persistenceViolation(durable, { ...vote, to: 8 }) ?? "", /durable vote is 7/);
  assert.match(persistenceViolation(durable, { ...newMessage("MsgVoteResp", 1, 9, 4) }) ?? "", /durable term is 3/);
  assert.equal(persistenceViolation(durable, { ...newMessage("MsgVoteResp", 1, 8, 3), reject: true }), undefined, "a refusal promises nothing");
  assert.equal(persistenceViolation(durable, { ...newMessage("MsgAppResp", 1, 7, 3), index: 5 }), undefined);
  assert.match(persistenceViolation(durable, { ...newMessage("MsgAppResp", 1, 7, 3), index: 6 }) ?? "", /durable only through 5/);
  assert.equal(persistenceViolation(durable, { ...newMessage("MsgPreVote", 1, 7, 4) }), undefined, "pre-vote terms are never persisted");
  assert.match(persistenceViolation(undefined, newMessage("MsgHeartbeatResp", 1, 7, 3)) ?? "", /before anything was durable/);
  // a leader's append may carry entries its own write has not finished (thesis §10.2.1)...
  const app = { ...newMessage("MsgApp", 1, 7, 3), index: 5, logTerm: 3, entries: [{ term: 3, index: 6, type: "normal" as const, data: new Uint8Array(0) }] };
  assert.equal(persistenceViolation(durable, { ...app, commit: 5 }), undefined);
  assert.equal(aheadOfOwnWrite(durable, app), true);
  assert.equal(aheadOfOwnWrite(durable, { ...app, entries: [] }), false);
  // ...but never announce a commit index its own disk does not hold
  assert.match(persistenceViolation(durable, { ...app, commit: 6 }) ?? "", /announces commit 6 while durable only through 5/);
  assert.match(persistenceViolation(durable, { ...newMessage("MsgHeartbeat", 1, 7, 3), commit: 6 }) ?? "", /announces commit 6/);
  // ...unless a quorum holds it durably (two followers acknowledged it before the leader's own write landed)
  assert.equal(persistenceViolation(durable, { ...app, commit: 6 }, (i) => i <= 6), undefined);
  assert.match(persistenceViolation(durable, { ...app, commit: 7 }, (i) => i <= 6) ?? "", /announces commit 7/);
});

test("3 nodes, slow disks: no vote, acknowledgement or announced commit leaves a node before what it promises is durable; appends do not wait for the leader's own write", { timeout: 300_000 }, async (t) => {
  await TestCluster.run(["m1", "m2", "m3"], { commitDelayMs: 3, seed: 7 }, async (c, leader, follower) => {
    const route = (i: number) => ({ kind: "ROUTE" as const, value: { data_type: `dt${i % 5}`, ring_id: i % 3 === 0 ? null : "cluster" } });
    // one at a time, alternately through the leader and (forwarded) a follower: each commit needs its own
    // append and acknowledgement, so the counts checked below do not depend on how the machine batches
    const SEQUENTIAL = 20;
    for (let i = 0; i < SEQUENTIAL; i++) {
      const r = await (i % 2 === 0 ? leader : follower).manager.propose("cluster", route(i));
      assert.equal(r.applied, "applied");
    }
    // a burst: proposals arrive while commits are in flight
    const props = [];
    for (let i = 0; i < 40; i++) {
      props.push((i % 2 === 0 ? leader : follower).manager.propose("cluster", route(i)));
      if (i % 10 === 9) await new Promise((r) => setTimeout(r, 2));
    }
    const results = await Promise.all(props);
    assert.ok(results.every((r) => r.applied === "applied"), "every ROUTE applied");
    // a crash and restart of a node (the leader, unless leadership already moved) forces votes over persisted state
    c.crash(leader.name);
    const next = await c.waitFor("a new leader", () => {
      const l = c.leader();
      return l && l.name !== leader.name ? l : undefined;
    });
    await next.manager.propose("cluster", { kind: "ROUTE", value: { data_type: "after", ring_id: null } });
    await c.restart(leader.name);
    const last = await next.manager.propose("cluster", { kind: "ROUTE", value: { data_type: "rejoined", ring_id: null } });
    // the restarted node catches up from its disk plus the leader, the third node from the leader
    for (const n of c.nodes.values()) {
      await c.waitFor(`${n.name} to apply the last entry`, () => n.manager.status().groups[0]!.applied >= last.index);
    }
    const routes = await Promise.all([...c.nodes.values()].map((n) => n.manager.read("cluster", "routing", { stale: true })));
    for (const r of routes) assert.deepEqual(r.value, routes[0]!.value, "every node applied the same routing table");
    assert.equal((routes[0]!.value as { routes: Record<string, unknown> }).routes.rejoined, null);

    assert.deepEqual(c.violations, []);
    const count = (type: string) => c.checked.get(type) ?? 0;
    t.diagnostic(`checked ${[...c.checked].map(([k, v]) => `${k}=${v}`).join(" ")}; ${c.aheadOfOwnWrite} appends left before their sender's own write finished`);
    // the check really covered the promises that matter: two elections each needed a granted vote, and each
    // sequential proposal an append carrying it and an acknowledgement of it
    assert.ok(count("MsgVoteResp") >= 2, "votes were checked");
    assert.ok(count("MsgAppResp") >= SEQUENTIAL, "append acknowledgements were checked");
    assert.ok(count("MsgApp") >= SEQUENTIAL, "appends were checked");
    // and the leader replicated in parallel with its own write (commits take 3 ms; the appends did not wait)
    assert.ok(c.aheadOfOwnWrite > 0, "no append left before its leader's own write finished");
  });
});

test("a follower's linearizable read reflects every write acknowledged before it began", { timeout: 300_000 }, async () => {
  await TestCluster.run(["a1", "a2", "a3"], { commitDelayMs: 1, seed: 3 }, async (_c, leader, follower) => {
    for (let i = 0; i < 5; i++) {
      const w = await leader.manager.propose("cluster", { kind: "ROUTE", value: { data_type: `k${i}`, ring_id: null } });
      const r = await follower.manager.read("cluster", "routing");
      assert.equal(r.linearizable, true);
      assert.ok(r.index >= w.index, `read index ${r.index} below acknowledged write ${w.index}`);
      assert.ok(`k${i}` in (r.value as { routes: Record<string, unknown> }).routes, `k${i} missing from the follower's read`);
    }
  });
});

test("a single node: results and the ring wait for the durable commit; one commit covers a burst of proposals", async () => {
  const backend = new MemoryBackend();
  backend.commitDelayMs = 5;
  const events: string[] = [];
  backend.onCommit = (writes: readonly GroupWrite[]) => {
    const last = Math.max(0, ...writes.flatMap((w) => w.entries.map((e) => e.index)));
    events.push(`commit through ${last}`);
  };
  const sent: Message[] = [];
  const transport: Transport = { send: (_g, msgs) => void sent.push(...msgs) };
  const ring = RingWriter.attach(createRingBuffer());
  const reader = new RingReader(ring.buffer);
  const m = new GroupManager({ self: "solo", backend, transport, ring, limits: TEST_LIMITS });
  assert.equal(await m.bootstrap(["solo"]), true);
  assert.equal(await m.bootstrap(["solo"]), false, "a second bootstrap finds the group");
  await m.start();
  const commitsBefore = backend.commits;
  const N = 200;
  const results = await Promise.all(
    Array.from({ length: N }, (_, i) =>
      m.propose("cluster", { kind: "ROUTE", value: { data_type: `t${i % 4}`, ring_id: i % 2 ? "cluster" : null } }).then((r) => {
        events.push(`result ${r.index}`);
        // the shared buffer already shows the route (applied and published before results are delivered)
        assert.ok(`t${i % 4}` in reader.routes(), `t${i % 4} not yet in the shared buffer`);
        return r;
      }),
    ),
  );
  // every result came after the commit that holds its entry
  for (const r of results) {
    const resultAt = events.indexOf(`result ${r.index}`);
    const commitAt = events.findIndex((e) => e.startsWith("commit through ") && Number(e.split(" ")[2]) >= r.index);
    assert.ok(commitAt >= 0 && commitAt < resultAt, `result ${r.index} before its commit: ${events.slice(0, 8).join("; ")}`);
  }
  // group commit: far fewer commits than proposals (they arrived in one macrotask)
  assert.ok(backend.commits - commitsBefore <= 3, `${backend.commits - commitsBefore} commits for ${N} proposals`);
  assert.deepEqual(sent, [], "a one-voter group has no one to send to");
  await m.close();
  await assert.rejects(m.propose("cluster", { kind: "ROUTE", value: { data_type: "x", ring_id: null } }), { code: "RAFT_STOPPED" });
});
