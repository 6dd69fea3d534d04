/**
 * Learners (non-voting members): they replicate the log but never campaign and never count toward a quorum,
 * whether for commit, for elections, for check-quorum or for read-index; and they stay learners across
 * restarts (Salt's Raft came back from disk with voting=True).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { isBrineError } from "../../src/shared/errors.js";
import { Env, electedEnv } from "./env.js";
import { ELECTION_TICKS, bytes, msg, newRaft, take, text, tickN } from "./helpers.js";

const withLearner = (): Env => electedEnv([1, 2, 3], [4]);


test("a learner never campaigns, however long it hears nothing", () => {
  const r = newRaft(4, [1, 2, 3], { learners: [4] });
  tickN(r, 10 * ELECTION_TICKS);
  assert.equal(r.role, "follower");
  assert.deepEqual(take(r), []);
});

test("campaign() on a learner fails with RAFT_NOT_VOTER", () => {
  const env = withLearner();
  assert.throws(() => env.campaign(4), (e) => isBrineError(e, "RAFT_NOT_VOTER"));
});

test("learners' acknowledgements do not count toward commit", () => {
  const r = newRaft(1, [1, 2, 3], { learners: [4, 5] });
  r.becomeCandidate();
  r.becomeLeader();
  take(r);
  const idx = r.log.lastIndex();
  r.step(msg("MsgAppResp", 4, 1, r.term, { index: idx }));
  r.step(msg("MsgAppResp", 5, 1, r.term, { index: idx }));
  assert.equal(r.log.committed, 1, "leader + two learners (three of five members) are not a majority of three voters");
  r.step(msg("MsgAppResp", 2, 1, r.term, { index: idx }));
  assert.equal(r.log.committed, idx);
});

test("a candidate does not count a learner's vote", () => {
  const r = newRaft(1, [1, 2, 3], { learners: [4, 5] });
  r.step(msg("MsgHup", 1, 1, 0));
  assert.equal(r.role, "candidate");
  assert.ok(take(r).every((m) => m.to !== 4 && m.to !== 5), "vote requests go to voters only");
  r.step(msg("MsgVoteResp", 4, 1, r.term));
  r.step(msg("MsgVoteResp", 5, 1, r.term));
  assert.equal(r.role, "candidate", "two learner grants + self are not a majority");
  r.step(msg("MsgVoteResp", 2, 1, r.term));
  assert.equal(r.role, "leader");
});

test("check-quorum counts only voters: a leader that hears only from a learner steps down", () => {
  const env = withLearner();
  env.partition([[1, 4], [2, 3]]);
  for (let k = 0; k < 2 * ELECTION_TICKS; k++) {
    env.tick(1, 1);
    env.stabilize([1, 4]);
  }
  assert.equal(env.rn(1).raft.role, "follower");
});

test("a learner receives and applies the replicated log", () => {
  const env = withLearner();
  env.propose(1, "for-everyone");
  env.stabilize();
  env.heartbeat(1); // the commit index reaches it with the next heartbeat
  const applied = env.appliedBy.get(4)!.map((e) => text(e.data));
  assert.deepEqual(applied, ["", "for-everyone"]);
});

test("a learner stays a learner across a restart", () => {
  const env = withLearner();
  env.crash(4);
  env.restart(4);
  const r = env.rn(4).raft;
  assert.deepEqual(r.confState.learners, [4]);
  assert.equal(r.promotable(), false);
  tickN(r, 5 * ELECTION_TICKS);
  assert.ok(r.msgs.every((m) => m.type !== "MsgPreVote" && m.type !== "MsgVote"));
});

test("a learner added by a conf change stays a learner after restarting before any snapshot", () => {
  const env = new Env();
  env.addNodes([1, 2, 3]);
  env.addJoiner(4);
  env.campaign(1);
  env.stabilize();
  env.proposeConf(1, { kind: "addLearner", node: 4 });
  env.stabilize();
  env.crash(4);
  env.restart(4);
  assert.deepEqual(env.rn(4).raft.confState.learners, [4]);
  assert.equal(env.rn(4).raft.promotable(), false);
});

test("a learner may propose: the proposal is forwarded and acknowledged", () => {
  const env = withLearner();
  const id = env.rn(4).propose(bytes("from-learner"));
  env.stabilize();
  const [r] = env.takeResults(4);
  assert.equal(r!.id, id);
  assert.equal(r!.ok, true);
});

test("once promoted, the former learner votes and counts toward quorum", () => {
  const env = withLearner();
  env.proposeConf(1, { kind: "addVoter", node: 4 });
  env.stabilize();
  const r = env.rn(1).raft;
  assert.deepEqual(r.confState.voters, [1, 2, 3, 4]);
  // Quorum is now 3 of 4: leader + 4 alone cannot commit, leader + 2 + 4 can.
  env.partition([[1, 4], [2, 3]]);
  env.propose(1, "needs-three");
  env.stabilize([1, 4]);
  const idx = r.log.lastIndex();
  assert.ok(r.log.committed < idx);
  env.heal();
  env.tick(1, 1);
  env.stabilize();
  env.tick(1, 1);
  env.stabilize();
  assert.equal(r.log.committed, idx);
  assert.equal(env.rn(4).raft.promotable(), true);
});
