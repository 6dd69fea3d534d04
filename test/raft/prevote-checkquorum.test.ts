/**
 * Pre-vote (thesis §9.6) and check-quorum / leader lease (thesis §6.2, §4.2.3): the two mechanisms Salt's
 * Raft lacked (it had pre-vote, but no check-quorum), which together keep a partitioned or removed node from
 * deposing a healthy leader and make an isolated leader stop acting as one.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { CAMPAIGN_TRANSFER } from "../../src/workers/raft/core/types.js";
import { Env, electedEnv } from "./env.js";
import { ELECTION_TICKS, Net, msg, newRaft, storageWithLog, take, tickN } from "./helpers.js";

const elected = (): Env => electedEnv();


test("pre-vote: granting a pre-vote changes neither the voter's term nor its vote", () => {
  const r = newRaft(2, [1, 2, 3], { preVote: true });
  r.loadState({ term: 3, vote: 1, commit: 1 });
  r.step(msg("MsgPreVote", 3, 2, 4, { index: 1, logTerm: 1 }));
  const [resp] = take(r);
  assert.equal(resp!.type, "MsgPreVoteResp");
  assert.equal(resp!.reject, false);
  assert.equal(resp!.term, 4, "the grant names the term the candidate would run in");
  assert.equal(r.term, 3);
  assert.equal(r.vote, 1);
});

test("pre-vote: a pre-candidate does not increment its term", () => {
  const r = newRaft(1, [1, 2, 3], { preVote: true });
  const term = r.term;
  tickN(r, 2 * ELECTION_TICKS);
  assert.equal(r.role, "pre-candidate");
  assert.equal(r.term, term);
  assert.ok(take(r).every((m) => m.type === "MsgPreVote" && m.term === term + 1));
});

test("pre-vote: a pre-vote is refused to a candidate whose log is behind", () => {
  const r = newRaft(2, [1, 2, 3], { preVote: true, storage: storageWithLog([1, 2, 3], [2, 2], 2) });
  r.step(msg("MsgPreVote", 3, 2, 3, { index: 2, logTerm: 2 }));
  assert.equal(take(r)[0]!.reject, true);
});

test("pre-vote: a partitioned follower keeps its term, and rejoining does not disturb the leader", () => {
  const env = elected();
  const term = env.rn(1).raft.term;
  env.partition([[1, 2], [3]]);
  for (let k = 0; k < 5; k++) {
    env.tick(3, ELECTION_TICKS);
    env.stabilize();
  }
  assert.equal(env.rn(3).raft.term, term, "pre-votes only: no term inflation");
  env.heal();
  env.tick(1, 1);
  env.stabilize();
  assert.equal(env.leader(), 1);
  assert.equal(env.rn(1).raft.term, term);
  assert.equal(env.rn(3).raft.lead, 1);
});

test("pre-vote + lease versus plain Raft: a rejoining node that timed out while cut off deposes the leader only in plain Raft", () => {
  for (const guarded of [false, true]) {
    const net = Net.of([1, 2, 3], { preVote: guarded, checkQuorum: guarded });
    net.campaign(1);
    const term = net.get(1).term;
    net.isolate(3);
    for (let k = 0; k < 3; k++) net.campaign(3);
    net.recover();
    net.campaign(3); // its next election timeout, now that it can reach the others
    if (guarded) {
      assert.equal(net.get(1).role, "leader");
      assert.equal(net.get(1).term, term, "no term inflation reached the leader");
    } else {
      assert.notEqual(net.get(1).role, "leader", "plain Raft: the leader was deposed");
      assert.ok(net.get(1).term > term + 2);
    }
  }
});

test("check-quorum: a leader that hears from no quorum for an election timeout steps down", () => {
  const env = elected();
  env.partition([[1], [2, 3]]);
  env.tick(1, ELECTION_TICKS);
  assert.equal(env.rn(1).raft.role, "leader", "the first check still counts answers from before the partition");
  env.tick(1, ELECTION_TICKS);
  assert.equal(env.rn(1).raft.role, "follower");
  assert.equal(env.rn(1).raft.lead, 0);
});

test("check-quorum: a leader that keeps hearing from a quorum stays leader", () => {
  const env = elected();
  env.partition([[1, 2], [3]]);
  for (let k = 0; k < 5 * ELECTION_TICKS; k++) {
    env.tick(1, 1);
    env.stabilize([1, 2]);
  }
  assert.equal(env.rn(1).raft.role, "leader");
});

test("check-quorum: a follower within the leader lease ignores (pre-)vote requests of a higher term", () => {
  for (const type of ["MsgVote", "MsgPreVote"] as const) {
    const r = newRaft(2, [1, 2, 3], { checkQuorum: true, preVote: true });
    r.becomeFollower(2, 1);
    r.step(msg(type, 3, 2, 5, { index: 9, logTerm: 9 }));
    assert.equal(r.term, 2, type);
    assert.equal(r.lead, 1, type);
    assert.deepEqual(take(r), [], `${type}: not even a rejection`);
  }
});

test("check-quorum: a leadership-transfer vote bypasses the lease", () => {
  const r = newRaft(2, [1, 2, 3], { checkQuorum: true, preVote: true });
  r.becomeFollower(2, 1);
  r.step(msg("MsgVote", 3, 2, 3, { index: 9, logTerm: 9, context: CAMPAIGN_TRANSFER }));
  assert.equal(r.term, 3);
  assert.equal(r.vote, 3);
  assert.equal(take(r)[0]!.reject, false);
});

test("check-quorum: once the lease expires, the follower considers vote requests again", () => {
  const r = newRaft(2, [1, 2, 3], { checkQuorum: true, preVote: true, limits: { electionTicksMin: 10 } });
  r.becomeFollower(2, 1);
  // Keep it below its own randomized timeout but past the lease (electionTicksMin).
  r.electionElapsed = 10;
  r.randomizedElectionTimeout = 15;
  r.step(msg("MsgPreVote", 3, 2, 3, { index: 9, logTerm: 9 }));
  assert.equal(take(r)[0]!.reject, false);
});

test("check-quorum: a stale leader is told about the newer term and steps down", () => {
  const r = newRaft(2, [1, 2, 3], { checkQuorum: true });
  r.becomeFollower(5, 3);
  r.step(msg("MsgHeartbeat", 1, 2, 4));
  const [resp] = take(r);
  assert.equal(resp!.type, "MsgAppResp");
  assert.equal(resp!.term, 5);
  const old = newRaft(1, [1, 2, 3], { checkQuorum: true });
  old.becomeCandidate();
  old.becomeLeader();
  old.step({ ...resp!, to: 1, from: 2 });
  assert.equal(old.role, "follower");
  assert.equal(old.term, 5);
});
