/**
 * Resting groups in the worker shell: a three-master cluster group with nothing to do rests after its quiet
 * period (quiesceAfterTicks), after which no node sends anything however long it is ticked; a proposal wakes
 * it and commits without an election; a leader that crashes while the group rests is replaced within two
 * ticks of the peer channel's report that its session dropped. Ticks are given by hand once the group rests.
 * And the flag on the wire: the peer link keeps it and refuses a malformed one.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { TestCluster, TEST_LIMITS, type TestNode } from "./harness.js";
import { checkPeerMessage, decodeRaftPayload, encodeRaftPayload } from "../../src/workers/raft/raft-transport.js";
import { raftIdOf } from "../../src/shared/node-ids.js";
import type { Message } from "../../src/workers/raft/core/types.js";

const cluster = (n: TestNode) => n.manager.status().groups.find((g) => g.group === "cluster")!;

/** Lets delivered messages and the pumps they start run out. */
async function settle(c: TestCluster): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  for (const n of c.nodes.values()) if (n.up) await n.manager.idle();
}

/** Every live node's manager ticked once, then settled. */
async function tickAll(c: TestCluster, n = 1): Promise<void> {
  for (let i = 0; i < n; i++) {
    for (const node of c.nodes.values()) if (node.up) node.manager.tick();
    await settle(c);
  }
}

/** A founded cluster of three whose group rests on every node, with time stopped. */
async function restingCluster(): Promise<{ c: TestCluster; leader: TestNode; followers: TestNode[] }> {
  const c = new TestCluster(["h1", "h2", "h3"], { seed: 7 });
  await c.bootstrapAll();
  c.startTicking();
  const leader = await c.waitFor("a leader", () => c.leader());
  await c.waitFor("every node resting", () => [...c.nodes.values()].every((n) => cluster(n).quiesced && cluster(n).leaderId === leader.name));
  c.stopTicking();
  await settle(c);
  return { c, leader, followers: [...c.nodes.values()].filter((n) => n !== leader) };
}

test("a cluster group with nothing to do rests: no node sends anything for a hundred election timeouts, and a proposal wakes it without an election", { timeout: 180_000 }, async () => {
  const { c, leader, followers } = await restingCluster();
  try {
    const term = cluster(leader).term;
    let sent = 0;
    c.onSend = () => sent++;
    await tickAll(c, 100 * TEST_LIMITS.raft.electionTicksMin!);
    assert.equal(sent, 0, "no heartbeat, answer or vote request while the group rests");
    for (const n of c.nodes.values()) assert.equal(cluster(n).quiesced, true);
    // a proposal on a follower: forwarded, committed, answered; nobody campaigned
    const r = await followers[0]!.manager.propose("cluster", { kind: "ROUTE", value: { data_type: "wake", ring_id: null } });
    assert.equal(r.applied, "applied");
    assert.ok(sent > 0);
    for (const n of c.nodes.values()) {
      assert.equal(cluster(n).term, term, `${n.name} is still in term ${term}`);
      assert.equal(cluster(n).leaderId, leader.name);
    }
    // and it rests again after its quiet period
    await tickAll(c, TEST_LIMITS.quiesceAfterTicks + 2);
    for (const n of c.nodes.values()) assert.equal(cluster(n).quiesced, true, `${n.name} rests again`);
    assert.deepEqual(c.violations, []);
  } finally {
    await c.stop();
  }
});

test("a leader that crashes while its group rests is replaced within two ticks of the peer channel's report", { timeout: 180_000 }, async () => {
  const { c, leader, followers } = await restingCluster();
  try {
    const term = cluster(leader).term;
    c.crash(leader.name);
    await tickAll(c, 3 * TEST_LIMITS.raft.electionTicksMin!);
    assert.equal(c.leader(), undefined, "resting followers wait for the transport's word, not for their timers");
    for (const f of followers) f.manager.peerReachable(leader.name, false);
    let ticks = 0;
    for (; ticks < 2 && !c.leader(); ticks++) await tickAll(c);
    const next = c.leader();
    assert.ok(next, `a new leader after ${ticks} ticks`);
    assert.equal(cluster(next).term, term + 1, "one election");
    assert.deepEqual(c.violations, []);
  } finally {
    await c.stop();
  }
});

test("the quiesce flag of a heartbeat crosses the peer wire, and a malformed one is refused", () => {
  const a = raftIdOf("h1");
  const b = raftIdOf("h2");
  const m: Message = { type: "MsgHeartbeat", from: a, to: b, term: 3, logTerm: 3, index: 9, commit: 9, reject: false, rejectHint: 0, quiesce: true };
  const { messages } = decodeRaftPayload(encodeRaftPayload("cluster", [m]));
  const ok = checkPeerMessage(messages[0], a, b);
  assert.ok(typeof ok !== "string", String(ok));
  assert.equal(ok.quiesce, true);
  assert.equal(ok.index, 9);
  const plain = checkPeerMessage(decodeRaftPayload(encodeRaftPayload("cluster", [{ ...m, quiesce: undefined }])).messages[0], a, b);
  assert.ok(typeof plain !== "string" && plain.quiesce === undefined);
  assert.match(String(checkPeerMessage({ ...m, quiesce: "yes" }, a, b)), /quiesce is not a boolean/);
});
