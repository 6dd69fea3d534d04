/**
 * ReadIndex (thesis §6.4): a linearizable read is served at the leader's commit index, only after a heartbeat
 * round confirms a quorum still follows it, and only once the reading node has applied through that index.
 * This is the answer to the stale reads Jepsen found in etcd and Consul (2014).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { RequestResult } from "../../src/workers/raft/core/types.js";
import { Env, electedEnv } from "./env.js";
import { ELECTION_TICKS, msg, newRaft, take } from "./helpers.js";

function cluster(): Env {
  const env = electedEnv();
  env.propose(1, "a");
  env.stabilize();
  env.takeResults(1);
  return env;
}


function readOk(results: RequestResult[], id: number): number {
  const r = results.find((x) => x.id === id);
  assert.ok(r, `read ${id} has a result`);
  assert.ok(r.ok, `read ${id} failed: ${r.ok ? "" : r.code}`);
  assert.equal(r.kind, "read");
  return r.index;
}

test("a leader serves a read at its commit index only after a quorum answers a heartbeat round", () => {
  const env = cluster();
  const id = env.readIndex(1);
  env.processReady(1);
  const hb = env.queue.filter((m) => m.type === "MsgHeartbeat");
  assert.equal(hb.length, 2, "the read triggers a heartbeat round");
  assert.ok(hb.every((m) => m.context !== undefined));
  assert.deepEqual(env.takeResults(1), [], "no answer before the round");
  env.deliver([2]);
  env.processReady(2);
  env.deliver([1]);
  env.processReady(1);
  assert.equal(readOk(env.takeResults(1), id), env.rn(1).raft.log.committed);
});

test("a leader cut off from the majority never confirms a read; it fails when the leader steps down or the deadline passes", () => {
  const env = cluster();
  env.partition([[1], [2, 3]]);
  const id = env.readIndex(1);
  for (let k = 0; k < 40; k++) {
    env.tick(1, 1);
    env.stabilize([1]);
  }
  const r = env.takeResults(1).find((x) => x.id === id);
  assert.ok(r && !r.ok);
  assert.equal(r.code, "RAFT_NO_LEADER");
});

test("a deposed leader that has not noticed cannot serve a stale read", () => {
  const env = cluster();
  env.partition([[1], [2, 3]]);
  // The majority elects 2 and commits a write that 1 cannot see.
  env.tick(2, ELECTION_TICKS);
  env.stabilize([2, 3]);
  env.tick(3, ELECTION_TICKS);
  env.stabilize([2, 3]);
  const newLeader = env.leader() === 1 ? [2, 3].find((id) => env.rn(id).raft.role === "leader")! : env.leader()!;
  env.propose(newLeader, "fresh");
  env.stabilize([2, 3]);
  assert.equal(env.rn(1).raft.role, "leader", "1 still believes it leads");
  const id = env.readIndex(1);
  env.stabilize([1]);
  assert.equal(env.takeResults(1).find((x) => x.id === id), undefined, "no read confirmed without a quorum");
  env.heal();
  env.stabilize();
  const r = env.takeResults(1).find((x) => x.id === id);
  // Either still pending or retried through the new leader: never served at the stale index.
  if (r?.ok) assert.ok(r.kind === "read" && r.index >= env.rn(newLeader).raft.log.committed);
});

test("a new leader defers reads until it has committed an entry of its own term", () => {
  const r = newRaft(1, [1, 2, 3]);
  r.becomeCandidate();
  r.becomeLeader();
  take(r);
  r.handleReadIndex({ from: 2, requests: [7], batch: 1, incarnation: 5, key: "2/5/1" });
  assert.deepEqual(take(r).filter((m) => m.type === "MsgHeartbeat"), [], "no round yet: commit index may be stale");
  r.step(msg("MsgAppResp", 2, 1, r.term, { index: r.log.lastIndex() }));
  const hb = take(r).filter((m) => m.type === "MsgHeartbeat");
  assert.equal(hb.length, 2, "the deferred read starts its round once the no-op commits");
  r.step(msg("MsgHeartbeatResp", 2, 1, r.term, { context: "2/5/1" }));
  const resp = take(r).find((m) => m.type === "MsgReadIndexResp")!;
  assert.equal(resp.index, r.log.committed);
  assert.deepEqual(resp.requests, [7]);
  assert.equal(resp.incarnation, 5);
});

test("a follower's read is forwarded and answered only after the follower has applied through the read index", () => {
  const env = cluster();
  env.partition([[1, 2], [3]]);
  env.propose(1, "b");
  env.stabilize([1, 2]);
  env.heal();
  const id = env.readIndex(3);
  // Deliver everything except entries to node 3: it learns the read index but has not applied it.
  env.processReady(3);
  env.deliver([1]);
  env.processReady(1);
  env.deliver([2]);
  env.processReady(2);
  env.deliver([1]);
  env.processReady(1);
  const readIndex = env.rn(1).raft.log.committed;
  env.queue = env.queue.filter((m) => m.type === "MsgReadIndexResp");
  env.deliver([3]);
  env.processReady(3);
  assert.equal(env.takeResults(3).length, 0, `3 applied ${env.node(3).app.applied} < read index ${readIndex}`);
  env.tick(1, 1);
  env.tick(1, 1);
  env.stabilize();
  env.tick(1, 1);
  env.stabilize();
  const index = readOk(env.takeResults(3), id);
  assert.equal(index, readIndex);
  assert.ok(env.node(3).app.applied >= index);
});

test("a single-voter group answers reads at once", () => {
  const env = electedEnv([1]);
  const id = env.readIndex(1);
  env.stabilize();
  assert.equal(readOk(env.takeResults(1), id), 2);
});

test("reads made together share one heartbeat round", () => {
  const env = cluster();
  const ids = [env.readIndex(1), env.readIndex(1), env.readIndex(1)];
  env.processReady(1);
  assert.equal(env.queue.filter((m) => m.type === "MsgHeartbeat").length, 2);
  env.stabilize();
  const results = env.takeResults(1);
  for (const id of ids) readOk(results, id);
});

test("a learner's heartbeat acknowledgement does not confirm a read", () => {
  const r = newRaft(1, [1, 2, 3], { learners: [4] });
  r.becomeCandidate();
  r.becomeLeader();
  r.step(msg("MsgAppResp", 2, 1, r.term, { index: r.log.lastIndex() }));
  take(r);
  r.handleReadIndex({ from: 2, requests: [1], batch: 1, incarnation: 0, key: "k" });
  take(r);
  r.step(msg("MsgHeartbeatResp", 4, 1, r.term, { context: "k" }));
  assert.deepEqual(take(r).filter((m) => m.type === "MsgReadIndexResp"), []);
  r.step(msg("MsgHeartbeatResp", 3, 1, r.term, { context: "k" }));
  assert.equal(take(r)[0]!.type, "MsgReadIndexResp");
});

test("a follower whose read is answered at an index it does not know to be committed is told the commit at once", () => {
  const r = newRaft(1, [1, 2, 3]);
  r.becomeCandidate();
  r.becomeLeader();
  r.step(msg("MsgAppResp", 2, 1, r.term, { index: r.log.lastIndex() }));
  r.step(msg("MsgAppResp", 3, 1, r.term, { index: r.log.lastIndex() }));
  r.tracker.add("propose", new TextEncoder().encode("x"));
  r.flushRequests();
  const x = r.log.lastIndex();
  // 3 holds x: it commits; 2's copy is still in flight, so 2 knows an older commit index
  r.step(msg("MsgAppResp", 3, 1, r.term, { index: x }));
  assert.equal(r.log.committed, x);
  take(r);
  r.handleReadIndex({ from: 2, requests: [7], batch: 1, incarnation: 5, key: "2/5/1" });
  const beat = take(r).find((m) => m.type === "MsgHeartbeat" && m.to === 2)!;
  assert.ok(beat.commit < x, "the heartbeat only tells 2 what it is known to hold");
  r.step(msg("MsgHeartbeatResp", 3, 1, r.term, { context: "2/5/1" }));
  const out = take(r).filter((m) => m.to === 2);
  assert.deepEqual(out.map((m) => [m.type, m.type === "MsgReadIndexResp" ? m.index : m.commit]), [["MsgApp", x], ["MsgReadIndexResp", x]], "2 learns the read index and that it is committed, without waiting for a heartbeat");
});
