/**
 * The RawNode API contract a shell relies on: call order (ready/advance), what step() refuses, idle groups
 * (resting groups), restart from storage, and Ready contents.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { isBrineError } from "../../src/shared/errors.js";
import { resolveLimits } from "../../src/workers/raft/core/limits.js";
import { RawNode } from "../../src/workers/raft/core/raw-node.js";
import { Rng } from "../../tools/raft-sim/rng.js";
import { MemoryStorage } from "../../src/workers/raft/core/storage.js";
import { electedEnv } from "./env.js";
import { ELECTION_TICKS, TEST_LIMITS, msg } from "./helpers.js";

function node(id = 1, storage = MemoryStorage.bootstrap([1, 2, 3])): RawNode {
  return new RawNode({ id, storage, rand: new Rng(id).fn(), limits: TEST_LIMITS });
}

test("ready() twice without advance(), or advance() without ready(), is refused (RAFT_API_MISUSE)", () => {
  const rn = node();
  rn.campaign();
  rn.ready();
  assert.throws(() => rn.ready(), (e) => isBrineError(e, "RAFT_API_MISUSE"));
  rn.advance();
  assert.throws(() => rn.advance(), (e) => isBrineError(e, "RAFT_API_MISUSE"));
});

test("step() refuses local message kinds and messages addressed to another node", () => {
  const rn = node();
  assert.throws(() => rn.step(msg("MsgHup", 2, 1, 0)), (e) => isBrineError(e, "RAFT_API_MISUSE"));
  assert.throws(() => rn.step(msg("MsgApp", 2, 3, 2)), (e) => isBrineError(e, "RAFT_API_MISUSE"));
});

test("step() drops responses from nodes outside the configuration", () => {
  const rn = node();
  rn.campaign();
  rn.ready();
  rn.advance();
  const term = rn.raft.term;
  rn.step(msg("MsgVoteResp", 9, 1, term)); // not a member
  assert.equal(rn.raft.prs.votes.has(9), false);
});

test("a Ready carries the new HardState once, and mustSync when term, vote or entries changed", () => {
  const rn = node();
  rn.campaign();
  const rd = rn.ready();
  // pre-vote first: no term change yet, nothing to sync
  assert.equal(rd.hardState, undefined);
  assert.equal(rd.mustSync, false);
  assert.deepEqual(rd.softState, { lead: 0, role: "pre-candidate" });
  rn.advance();
  rn.step(msg("MsgPreVoteResp", 2, 1, rn.raft.term + 1));
  const rd2 = rn.ready();
  assert.deepEqual(rd2.hardState, { term: 2, vote: 1, commit: 1 });
  assert.equal(rd2.mustSync, true);
  rn.advance();
  assert.equal(rn.hasReady(), false, "nothing new");
});

test("a resting follower never starts an election on its own; a request wakes it and its timer runs again", () => {
  const env = electedEnv();
  assert.equal(env.rn(1).quiesce(), true);
  env.stabilize();
  assert.equal(env.rn(2).quiesced, true);
  env.crash(1); // nobody tells node 2: its timer rests on a transport that has not reported the loss yet
  for (let k = 0; k < 10 * ELECTION_TICKS; k++) env.rn(2).tick();
  assert.equal(env.rn(2).raft.role, "follower");
  assert.equal(env.rn(2).hasReady(), false, "nothing to send while it rests");
  env.propose(2, "x"); // wakes it; forwarded to the crashed leader, never answered
  env.stabilize([2, 3]);
  assert.equal(env.rn(2).quiesced, false);
  for (let k = 0; k < ELECTION_TICKS - 1; k++) env.rn(2).tick();
  assert.equal(env.rn(2).raft.role, "follower", "a fresh election timeout after waking, not an expired one");
  env.rn(2).tick();
  assert.equal(env.rn(2).raft.role, "pre-candidate", "awake, its own timer runs out and it campaigns");
});

test("a resting leader sends no heartbeats", () => {
  const env = electedEnv();
  assert.equal(env.rn(1).quiesce(), true);
  env.stabilize();
  for (let k = 0; k < 5 * ELECTION_TICKS; k++) env.rn(1).tick();
  assert.equal(env.rn(1).hasReady(), false);
  assert.equal(env.rn(1).raft.role, "leader");
});

test("a node restarted from its storage resumes term, vote, commit, log and membership", () => {
  const env = electedEnv();
  env.propose(1, "a");
  env.stabilize();
  const before = env.rn(2).status();
  env.crash(2);
  env.restart(2);
  const after = env.rn(2).status();
  assert.equal(after.term, before.term);
  assert.equal(after.vote, before.vote);
  assert.equal(after.commit, before.commit);
  assert.equal(after.lastIndex, before.lastIndex);
  assert.deepEqual(after.confState, before.confState);
  assert.equal(after.role, "follower");
  assert.equal(after.applied, 1, "the state machine restarts from the genesis snapshot, entries are handed out again");
  env.processReady(2);
  assert.equal(env.rn(2).status().applied, before.applied);
});

test("restarting with applied beyond the durable commit is refused", () => {
  const s = MemoryStorage.bootstrap([1, 2, 3]);
  assert.throws(() => new RawNode({ id: 1, storage: s, rand: () => 0, applied: 5 }), (e) => isBrineError(e, "CONFIG_INVALID"));
});

test("limits are validated up front with named errors", () => {
  assert.throws(() => resolveLimits({ heartbeatTicks: 10, electionTicksMin: 10 }), (e) => isBrineError(e, "CONFIG_INVALID"));
  assert.throws(() => resolveLimits({ maxInflightMsgs: 0 }), (e) => isBrineError(e, "CONFIG_INVALID"));
  assert.throws(() => resolveLimits({ snapshotChunkBytes: 2 ** 31, snapshotBytesMax: 1024 }), (e) => isBrineError(e, "CONFIG_INVALID"));
  assert.equal(resolveLimits({}).electionTicksMin, 10);
});

test("status() reports the leader's view of every follower", () => {
  const env = electedEnv([1, 2, 3], [4]);
  const st = env.rn(1).status();
  assert.equal(st.role, "leader");
  assert.deepEqual([...st.progress!.keys()].sort(), [1, 2, 3, 4]);
  assert.equal(st.progress!.get(4)!.isLearner, true);
  assert.equal(st.progress!.get(2)!.match, st.lastIndex);
  assert.equal(env.rn(2).status().progress, undefined);
  // the cheap getters agree with status()
  const rn = env.rn(2);
  const st2 = rn.status();
  assert.deepEqual([rn.role, rn.lead, rn.term, rn.applied], [st2.role, st2.lead, st2.term, st2.applied]);
  assert.deepEqual(rn.confState, st2.confState);
});
