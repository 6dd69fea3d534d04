/**
 * Leadership transfer (thesis §3.10), which Salt's Raft did not have: the leader brings the target up to
 * date, then tells it to campaign at once (MsgTimeoutNow); proposals made meanwhile wait for the new leader.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { isBrineError } from "../../src/shared/errors.js";
import { Env, electedEnv } from "./env.js";
import { ELECTION_TICKS } from "./helpers.js";

const cluster = (): Env => electedEnv([1, 2, 3], [4]);

/** Node 3 misses entry "x" (index 3) while cut off, then the partition heals. */
function lagging3(): Env {
  const env = cluster();
  env.partition([[1, 2, 4], [3]]);
  env.propose(1, "x");
  env.stabilize();
  env.heal();
  return env;
}


test("to an up-to-date voter, the leader sends TimeoutNow at once and the target wins the next term", () => {
  const env = cluster();
  const term = env.rn(1).raft.term;
  env.transfer(1, 2);
  env.processReady(1);
  assert.deepEqual(env.queue.map((m) => m.type), ["MsgTimeoutNow"]);
  env.stabilize();
  assert.equal(env.leader(), 2);
  assert.equal(env.rn(2).raft.term, term + 1);
  assert.equal(env.rn(1).raft.lead, 2);
});

test("a lagging target is caught up first, then told to campaign", () => {
  const env = lagging3();
  env.transfer(1, 3);
  env.processReady(1);
  assert.ok(env.queue.every((m) => m.type !== "MsgTimeoutNow"), "not before 3 has the log");
  env.stabilize();
  assert.equal(env.leader(), 3);
  assert.equal(env.rn(3).raft.log.term(3), 2, "the new leader holds the entry it lacked");
});

test("proposals made during a transfer wait and are committed by the new leader", () => {
  const env = lagging3();
  env.transfer(1, 3);
  const id = env.propose(1, "during-transfer");
  env.stabilize();
  assert.equal(env.leader(), 3);
  const r = env.takeResults(1).find((x) => x.id === id);
  assert.ok(r && r.ok, "acknowledged after the transfer");
  assert.equal(r.kind === "propose" && r.term, env.rn(3).raft.term);
});

test("a transfer that cannot finish within an election timeout is abandoned and proposals resume", () => {
  const env = cluster();
  env.partition([[1, 2, 4], [3]]);
  env.transfer(1, 3);
  env.stabilize([1, 2, 4]);
  assert.equal(env.rn(1).raft.leadTransferee, 3);
  for (let k = 0; k < ELECTION_TICKS; k++) {
    env.tick(1, 1);
    env.stabilize([1, 2, 4]);
  }
  assert.equal(env.rn(1).raft.leadTransferee, 0);
  assert.equal(env.leader(), 1);
  const id = env.propose(1, "after-abort");
  env.stabilize([1, 2, 4]);
  assert.ok(env.takeResults(1).find((r) => r.id === id)?.ok);
});

test("a learner cannot be a transfer target (RAFT_NOT_VOTER)", () => {
  const env = cluster();
  assert.throws(() => env.rn(1).transferLeader(4), (e) => isBrineError(e, "RAFT_NOT_VOTER"));
  assert.throws(() => env.rn(1).transferLeader(9), (e) => isBrineError(e, "RAFT_NOT_VOTER"));
});

test("a transfer asked of a follower is forwarded to the leader", () => {
  const env = cluster();
  env.transfer(2, 3);
  env.processReady(2);
  assert.deepEqual(env.queue.map((m) => `${m.type}->${m.to}`), ["MsgTransferLeader->1"]);
  env.stabilize();
  assert.equal(env.leader(), 3);
});

test("transferring to the current leader does nothing", () => {
  const env = cluster();
  env.transfer(1, 1);
  env.stabilize();
  assert.equal(env.leader(), 1);
  assert.equal(env.rn(1).raft.leadTransferee, 0);
});

test("the target campaigns past the followers' leader lease (they heard from the leader just now)", () => {
  const env = cluster();
  env.tick(1, 1);
  env.stabilize(); // followers' lease refreshed by a heartbeat
  env.transfer(1, 2);
  env.stabilize();
  assert.equal(env.leader(), 2);
});
