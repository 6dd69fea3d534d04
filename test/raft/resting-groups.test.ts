/**
 * Resting (quiesced) groups with followers: a leader with nothing in flight sends a last heartbeat flagged
 * `quiesce` and stops heartbeating; followers that hold its log rest too, their election timers stopped and
 * the leader's lease held. What must still hold: a crashed leader is replaced within the election timeout
 * once the transport reports its session lost; a follower cut off from its leader does not keep the stale
 * lease; waking a group that rested for long starts no election; nothing rests while work is in flight.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type Env, electedEnv } from "./env.js";
import { ELECTION_TICKS, msg } from "./helpers.js";

/** `n` ticks on every live node, each followed by its Ready; nothing is delivered. */
function tickAll(env: Env, n: number): void {
  for (let i = 0; i < n; i++) {
    for (const id of env.ids()) {
      const rn = env.node(id).rn;
      if (!rn) continue;
      rn.tick();
      if (rn.hasReady()) env.processReady(id);
    }
  }
}

/** A 3-voter group led by 1 with one entry committed everywhere, put to rest; returns the env. */
function restingEnv(voters = [1, 2, 3]): Env {
  const env = electedEnv(voters);
  env.propose(1, "a");
  env.stabilize();
  env.heartbeat(1); // the followers learn the commit
  assert.equal(env.rn(1).quiesce(), true, "an idle leader whose followers hold everything may rest");
  env.stabilize();
  for (const id of voters) assert.equal(env.rn(id).quiesced, true, `node ${id} rests`);
  for (const id of voters) env.takeResults(id);
  return env;
}

test("a resting group sends nothing for many election timeouts and nobody campaigns", () => {
  const env = restingEnv();
  const term = env.rn(1).raft.term;
  tickAll(env, 20 * ELECTION_TICKS);
  assert.deepEqual(env.queue, [], "no heartbeat, no answer, no vote request");
  assert.equal(env.leader(), 1);
  assert.equal(env.rn(1).raft.term, term);
  for (const id of [2, 3]) assert.equal(env.rn(id).raft.lead, 1);
});

test("the leader's last heartbeat carries its commit: a follower that had not learned it applies it and rests", () => {
  const env = electedEnv();
  env.propose(1, "a");
  env.stabilize(); // committed on the leader; the followers learn it only with the next heartbeat
  assert.ok(env.rn(2).raft.log.committed < env.rn(1).raft.log.committed);
  // the leader has applied it (stabilize ran its Ready), so it may rest now
  assert.equal(env.rn(1).quiesce(), true);
  env.stabilize();
  for (const id of [2, 3]) {
    assert.equal(env.rn(id).raft.log.committed, env.rn(1).raft.log.committed);
    assert.equal(env.rn(id).quiesced, true);
    assert.equal(env.rn(id).raft.log.applied, env.rn(1).raft.log.applied, `node ${id} applied the commit its rest came with`);
  }
});

test("a follower that lacks the leader's last entry answers instead of resting, and the answer wakes the leader", () => {
  const env = electedEnv();
  env.propose(1, "a");
  env.stabilize();
  env.heartbeat(1);
  // the leader believes every follower holds index `last`; node 3's copy of the quiesce heartbeat names an
  // entry it does not hold (as after a lost append that the leader's view did not catch)
  assert.equal(env.rn(1).quiesce(), true);
  env.processReady(1);
  const last = env.rn(1).raft.log.lastIndex();
  env.queue = env.queue.map((m) => (m.to === 3 ? { ...m, index: last + 1, logTerm: env.rn(1).raft.term } : m));
  env.deliver([2, 3]);
  assert.equal(env.rn(2).quiesced, true);
  assert.equal(env.rn(3).quiesced, false, "it does not rest on a log it does not hold");
  env.processReady(3);
  assert.deepEqual(env.queue.map((m) => `${m.type} ${m.from}->${m.to} ${m.reject ? "declined" : ""}`), ["MsgHeartbeatResp 3->1 declined"]);
  env.deliver([1]);
  assert.equal(env.rn(1).quiesced, false, "the leader is awake again and heartbeats");
  env.tick(1);
  env.processReady(1);
  assert.ok(env.queue.some((m) => m.type === "MsgHeartbeat" && m.to === 3 && !m.quiesce));
});

test("a late answer to a heartbeat sent before the rest does not wake the leader", () => {
  const env = restingEnv();
  env.rn(1).step(msg("MsgHeartbeatResp", 2, 1, env.rn(1).raft.term));
  assert.equal(env.rn(1).quiesced, true);
  assert.equal(env.rn(1).hasReady(), false);
});

test("a leader crashes while its group rests: the followers campaign once the transport reports it lost, within the election timeout", () => {
  const env = restingEnv();
  const term = env.rn(1).raft.term;
  env.crash(1);
  tickAll(env, 5 * ELECTION_TICKS);
  assert.deepEqual(env.queue, [], "a resting follower's timer waits for the transport's word, not for ticks");
  // the peer channel reports the session lost (a crashed master's kernel closes its connections at once)
  for (const id of [2, 3]) env.rn(id).reportUnreachable(1);
  for (const id of [2, 3]) assert.equal(env.rn(id).quiesced, false);
  let ticks = 0;
  while (env.leader() === undefined || env.leader() === 1) {
    tickAll(env, 1);
    env.stabilize([2, 3]);
    assert.ok(++ticks <= ELECTION_TICKS, `a new leader within one election timeout of the report (${ticks} ticks)`);
  }
  assert.equal(ticks, 1, "the first-ranked survivor campaigns at the first tick");
  assert.equal(env.rn(env.leader()!).raft.term, term + 1, "one election, one term");
});

test("a follower cut off from a resting leader does not keep the stale lease: it grants a vote once the transport reports the leader lost", () => {
  const env = restingEnv();
  const term = env.rn(1).raft.term;
  // a silent partition: 1 on its own. Both followers' peer channels miss the leader's keepalives and
  // report it lost; each campaigns, and each grants the other's pre-vote (no lease held for a lost leader)
  env.partition([[1], [2, 3]]);
  env.rn(3).reportUnreachable(1);
  env.rn(2).reportUnreachable(1);
  let ticks = 0;
  while (env.leader() === 1) {
    tickAll(env, 1);
    env.stabilize([2, 3]);
    assert.ok(++ticks <= ELECTION_TICKS, `a new leader among the followers within one election timeout (${ticks} ticks)`);
  }
  const next = env.leader()!;
  assert.equal(env.rn(next).raft.term, term + 1);
  // the old leader still rests and believes it leads: harmless, it commits nothing (no quorum); once the
  // partition heals the first word of the newer term makes it a follower
  assert.equal(env.rn(1).raft.role, "leader");
  env.heal();
  env.heartbeat(next);
  assert.equal(env.rn(1).raft.role, "follower");
  assert.equal(env.rn(1).raft.lead, next);
  assert.equal(env.rn(1).raft.term, term + 1);
});

test("a follower whose own session to a healthy resting leader flaps cannot depose it: the other follower's lease holds", () => {
  const env = restingEnv();
  const term = env.rn(1).raft.term;
  env.rn(3).reportUnreachable(1); // only node 3 lost its session; node 2 still reaches the leader
  tickAll(env, 2);
  env.stabilize([2, 3]); // node 3's pre-vote reaches node 2 only
  assert.equal(env.rn(2).quiesced, true, "a pre-vote its lease ignores does not wake a resting follower");
  assert.equal(env.rn(2).raft.term, term);
  assert.equal(env.leader(), 1);
  // the link is back: node 3's next pre-vote reaches the leader, which wakes, ignores it (its lease) and
  // heartbeats; node 3 follows it again, in the same term
  for (let i = 0; i < 2 * ELECTION_TICKS; i++) {
    tickAll(env, 1);
    env.stabilize();
  }
  assert.equal(env.leader(), 1);
  for (const id of [1, 2, 3]) assert.equal(env.rn(id).raft.term, term, `node ${id} is still in term ${term}`);
  assert.equal(env.rn(3).raft.lead, 1);
});

test("no election storm on wake-up: a group that rested for a hundred election timeouts wakes on a follower's proposal and commits it without an election", () => {
  const env = restingEnv();
  const term = env.rn(1).raft.term;
  const elections = [1, 2, 3].map((id) => env.rn(id).raft.elections);
  tickAll(env, 100 * ELECTION_TICKS);
  env.propose(3, "b");
  for (let i = 0; i < 3 * ELECTION_TICKS; i++) {
    tickAll(env, 1);
    env.stabilize();
  }
  assert.equal(env.leader(), 1);
  for (const id of [1, 2, 3]) {
    assert.equal(env.rn(id).raft.term, term);
    assert.equal(env.rn(id).raft.elections, elections[id - 1]);
  }
  const results = env.takeResults(3);
  assert.equal(results.length, 1);
  assert.equal(results[0]!.ok, true, "the proposal committed");
});

test("a resting leader wakes on a proposal, a read and a transfer; a request on a resting leader gets its answer", () => {
  for (const wake of ["propose", "read", "transfer"] as const) {
    const env = restingEnv();
    if (wake === "propose") env.propose(1, "b");
    else if (wake === "read") env.readIndex(1);
    else env.transfer(1, 2);
    assert.equal(env.rn(1).quiesced, false, `${wake} wakes the leader`);
    env.stabilize();
    if (wake === "transfer") {
      assert.equal(env.leader(), 2);
      continue;
    }
    const results = env.takeResults(1);
    assert.equal(results.length, 1, wake);
    assert.equal(results[0]!.ok, true, wake);
  }
});

test("nothing rests while work is in flight: a follower behind, an uncommitted entry, a pending read, a transfer", () => {
  const behind = electedEnv();
  behind.partition([[1, 2], [3]]);
  behind.propose(1, "a");
  behind.stabilize();
  behind.heartbeat(1);
  assert.equal(behind.rn(1).quiesce(), false, "node 3 does not hold the last entry");
  assert.equal(behind.rn(1).quiesced, false);

  const uncommitted = electedEnv();
  uncommitted.propose(1, "a");
  uncommitted.processReady(1); // appended and sent, not acknowledged yet
  assert.equal(uncommitted.rn(1).quiesce(), false);

  const reading = electedEnv();
  reading.readIndex(1);
  reading.processReady(1); // the round's heartbeats are out, not answered yet
  assert.equal(reading.rn(1).quiesce(), false);

  const follower = electedEnv();
  assert.equal(follower.rn(2).quiesce(), false, "only a leader puts its group to rest");
});

test("the transport's word about anything but its leader's loss leaves a resting follower at rest", () => {
  const env = restingEnv();
  env.rn(2).reportReachable(1);
  env.rn(2).reportUnreachable(3);
  env.rn(2).reportReachable(3);
  assert.equal(env.rn(2).quiesced, true);
  assert.equal(env.rn(2).hasReady(), false);
  // the leader's, though, wakes a resting leader: a member that comes back is probed, one that is lost is
  // no longer counted on
  env.rn(1).reportUnreachable(3);
  assert.equal(env.rn(1).quiesced, false);
});
