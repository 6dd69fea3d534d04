/**
 * Failover in the worker shell: the peer channel's report that a follower's session to its leader dropped
 * reaches the core (which campaigns within 1 + rank ticks instead of an election timeout), and a leader that
 * stops on purpose hands its leadership over first (GroupManager.handOff), with no election timeout at all.
 * Ticks are given by hand, so the figures are ticks, not wall time.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { TestCluster, TEST_LIMITS, type TestNode } from "./harness.js";

const termOf = (n: TestNode) => n.manager.status().groups.find((g) => g.group === "cluster")!.term;

/**
 * A founded cluster of three with a leader that both followers follow, in the same term, with time stopped
 * (ticking is stopped, then the state checked; on a loaded machine 5-ms ticks may start elections, so it
 * ticks again until the picture is steady).
 */
async function quietCluster(): Promise<{ c: TestCluster; leader: TestNode; followers: TestNode[] }> {
  const c = new TestCluster(["h1", "h2", "h3"], { seed: 5 });
  await c.bootstrapAll();
  for (let attempt = 1; ; attempt++) {
    c.startTicking();
    const leader = await c.waitFor("a leader", () => c.leader());
    const followers = [...c.nodes.values()].filter((n) => n !== leader);
    await c.waitFor("followers following", () => followers.every((f) => f.manager.status().groups[0]!.leaderId === leader.name));
    c.stopTicking();
    await settle(c);
    const steady = c.leader() === leader && followers.every((f) => f.manager.status().groups[0]!.leaderId === leader.name && termOf(f) === termOf(leader));
    if (steady) return { c, leader, followers };
    if (attempt >= 20) throw new Error("the cluster never held still");
  }
}

/** Roles and terms, for a failure message. */
const picture = (c: TestCluster) => [...c.nodes.values()].map((n) => (n.up ? `${n.name} ${n.manager.status().groups[0]!.role} t${termOf(n)}` : `${n.name} down`)).join(", ");

/** Lets delivered messages and the pumps they start run out. */
async function settle(c: TestCluster): Promise<void> {
  for (let i = 0; i < 20; i++) {
    await new Promise((r) => setImmediate(r));
    for (const n of c.nodes.values()) if (n.up) await n.manager.idle();
  }
}

test("followers told their session to a crashed leader dropped elect a new leader within two ticks", { timeout: 120_000 }, async () => {
  const { c, leader, followers } = await quietCluster();
  try {
    const term = termOf(leader);
    c.crash(leader.name);
    for (const f of followers) f.manager.peerReachable(leader.name, false);
    let ticks = 0;
    for (; ticks < 2 && !c.leader(); ticks++) {
      for (const f of followers) f.manager.tick();
      await settle(c);
    }
    const next = c.leader();
    assert.ok(next, `a new leader after ${ticks} ticks (election timeout: ${TEST_LIMITS.raft.electionTicksMin} ticks): ${picture(c)}`);
    assert.equal(termOf(next), term + 1, "one election");
    assert.deepEqual(c.violations, []);
  } finally {
    await c.stop();
  }
});

test("a stopping leader hands its leadership to a follower before it closes, without waiting for any tick", { timeout: 120_000 }, async () => {
  const { c, leader } = await quietCluster();
  try {
    const term = termOf(leader);
    const groups = leader.manager.handOff();
    assert.deepEqual(groups, ["cluster"]);
    await c.waitFor("the hand-off", () => !leader.manager.leadsAny(groups));
    await settle(c);
    const next = c.leader();
    assert.ok(next && next !== leader, "a follower leads");
    assert.equal(termOf(next), term + 1);
    // the new leader commits (with the stopping master still a voter, or without it)
    const r = await next.manager.propose("cluster", { kind: "ROUTE", value: { data_type: "after-handoff", ring_id: null } });
    assert.equal(r.term, term + 1);
    assert.deepEqual(c.violations, []);
  } finally {
    await c.stop();
  }
});

test("a single master has nobody to hand leadership to", { timeout: 60_000 }, async () => {
  const c = new TestCluster(["s1"], { seed: 2 });
  await c.bootstrapAll();
  c.startTicking();
  try {
    const leader = await c.waitFor("a leader", () => c.leader());
    assert.deepEqual(leader.manager.handOff(), []);
    assert.equal(leader.manager.leadsAny(["cluster"]), true);
  } finally {
    await c.stop();
  }
});
