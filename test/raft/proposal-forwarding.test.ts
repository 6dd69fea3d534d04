/**
 * Proposals from any node: forwarded to the leader (batched), and every request gets exactly one outcome:
 * success with the committed (index, term, value), or a coded error whose code says whether a retry is safe.
 * Salt raised NotLeader on a follower, and lost proposals made while there was no leader.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { RequestTracker } from "../../src/workers/raft/core/proposals.js";
import type { RequestResult } from "../../src/workers/raft/core/types.js";
import { Env, electedEnv } from "./env.js";
import { ELECTION_TICKS, bytes, entry, msg, newRaft, take, text } from "./helpers.js";

const cluster = (): Env => electedEnv();


function outcome(results: RequestResult[], id: number): string {
  const r = results.find((x) => x.id === id);
  assert.ok(r, `request ${id} has a result`);
  return r.ok ? "ok" : r.code;
}

test("a follower's proposal is forwarded to the leader and acknowledged with the committed index, term and value", () => {
  const env = cluster();
  const id = env.propose(2, "hello");
  env.processReady(2);
  assert.deepEqual(env.queue.map((m) => `${m.type}->${m.to}`), ["MsgProp->1"]);
  env.stabilize();
  const [r] = env.takeResults(2);
  assert.ok(r && r.ok && r.kind === "propose");
  assert.equal(r.id, id);
  assert.equal(text(r.value), "hello");
  const committed = env.appliedBy.get(1)!.find((e) => e.index === r.index)!;
  assert.equal(committed.term, r.term);
  assert.equal(text(committed.data), "hello");
});

test("proposals made between two Readies travel in one MsgProp and are appended together", () => {
  const env = cluster();
  const ids = ["a", "b", "c"].map((v) => env.propose(3, v));
  env.processReady(3);
  const props = env.queue.filter((m) => m.type === "MsgProp");
  assert.equal(props.length, 1);
  assert.deepEqual(props[0]!.requests, ids);
  env.stabilize();
  const results = env.takeResults(3);
  const indexes = ids.map((id) => {
    const r = results.find((x) => x.id === id)!;
    assert.ok(r.ok && r.kind === "propose");
    return r.index;
  });
  assert.deepEqual(indexes, [indexes[0]!, indexes[0]! + 1, indexes[0]! + 2]);
});

test("a proposal made while there is no leader waits, and goes to the leader once one is elected", () => {
  const env = new Env();
  env.addNodes([1, 2, 3]);
  const id = env.propose(2, "early");
  env.stabilize();
  assert.deepEqual(env.takeResults(2), [], "waiting, not failed");
  env.campaign(1);
  env.stabilize();
  env.stabilize();
  assert.equal(outcome(env.takeResults(2), id), "ok");
});

test("no leader within the deadline: RAFT_NO_LEADER (never sent, safe to retry)", () => {
  const env = new Env({ requestDeadlineTicks: 20 });
  env.addNodes([1, 2, 3]);
  const id = env.propose(2, "orphan");
  env.tick(2, 19);
  env.stabilize([2]);
  assert.deepEqual(env.takeResults(2).filter((r) => r.id === id), []);
  env.tick(2, 1);
  env.stabilize([2]);
  assert.equal(outcome(env.takeResults(2), id), "RAFT_NO_LEADER");
});

test("forwarded but never answered: RAFT_UNKNOWN after the deadline (it may have committed)", () => {
  const env = cluster();
  env.partition([[1], [2, 3]]);
  const id = env.propose(2, "into-the-void");
  env.stabilize([2, 3]);
  env.tick(2, 30);
  env.stabilize([2, 3]);
  assert.equal(outcome(env.takeResults(2), id), "RAFT_UNKNOWN");
});

test("appended by a leader that lost its term, then overwritten: RAFT_REJECTED (certainly not committed)", () => {
  const r = newRaft(2, [1, 2, 3]);
  r.becomeFollower(2, 1);
  const id = r.tracker.add("propose", bytes("doomed"));
  r.flushRequests();
  const [prop] = take(r);
  assert.equal(prop!.type, "MsgProp");
  // Leader 1 appends it at 2 in term 2 and says so.
  r.step(msg("MsgPropResp", 1, 2, 0, { requests: [id], index: 2, logTerm: 2, incarnation: prop!.incarnation, batch: prop!.batch }));
  // A new leader (term 3) commits its own entry at index 2 instead.
  r.step(msg("MsgApp", 3, 2, 3, { index: 1, logTerm: 1, entries: [entry(2, 3, "other")], commit: 2 }));
  const ents = r.log.nextCommittedEnts(1 << 20);
  r.handOutCommitted(ents);
  r.log.applyingTo(2);
  r.tracker.onCommitted(ents);
  const [res] = r.tracker.drainResults();
  assert.ok(res && !res.ok);
  assert.equal(res.code, "RAFT_REJECTED");
  assert.match(res.detail, /overwritten/);
});

test("an acknowledgement that arrives after the entry was applied settles the request at once", () => {
  const r = newRaft(2, [1, 2, 3]);
  r.becomeFollower(2, 1);
  const id = r.tracker.add("propose", bytes("fast"));
  r.flushRequests();
  const [prop] = take(r);
  r.step(msg("MsgApp", 1, 2, 2, { index: 1, logTerm: 1, entries: [{ ...entry(2, 2), data: bytes("fast") }], commit: 2 }));
  const ents = r.log.nextCommittedEnts(1 << 20);
  r.handOutCommitted(ents);
  r.log.applyingTo(2);
  r.tracker.onCommitted(ents);
  assert.deepEqual(r.tracker.drainResults(), []);
  r.step(msg("MsgPropResp", 1, 2, 0, { requests: [id], index: 2, logTerm: 2, incarnation: prop!.incarnation, batch: prop!.batch }));
  const [res] = r.tracker.drainResults();
  assert.ok(res && res.ok && res.kind === "propose" && res.index === 2);
});

test("a duplicated MsgProp is appended once; the duplicate gets the same answer", () => {
  const env = cluster();
  env.propose(2, "once");
  env.processReady(2);
  const prop = env.queue.find((m) => m.type === "MsgProp")!;
  env.queue.push(prop);
  env.stabilize();
  const copies = env.appliedBy.get(1)!.filter((e) => text(e.data) === "once");
  assert.equal(copies.length, 1);
  assert.equal(env.takeResults(2).length, 1, "one result, despite two answers");
});

test("a duplicated 'retry elsewhere' answer cannot re-send a request already sent again (batches)", () => {
  const t = new RequestTracker(100, 100);
  const id = t.add("propose", bytes("x"));
  t.takeWaiting(() => true, 1);
  const first = t.stamp([id]);
  t.requeue([id], first); // leader 1 said: not me
  t.takeWaiting(() => true, 2);
  const second = t.stamp([id]);
  t.requeue([id], first); // the same refusal, duplicated by the network
  assert.equal(t.hasWaiting(), false, "still forwarded to 2, not queued again");
  t.appended([id], 10, 3, first);
  t.appended([id], 11, 3, second);
  t.onCommitted([{ index: 11, term: 3, type: "normal", data: bytes("x") }]);
  const [res] = t.drainResults();
  assert.ok(res && res.ok && res.kind === "propose" && res.index === 11);
});

test("answers meant for a previous life of a restarted node are ignored", () => {
  const r = newRaft(2, [1, 2, 3]);
  const id = r.tracker.add("propose", bytes("x"));
  r.becomeFollower(2, 1);
  r.flushRequests();
  const [prop] = take(r);
  r.step(msg("MsgPropResp", 1, 2, 0, { requests: [id], reject: true, reason: "RAFT_REJECTED", incarnation: prop!.incarnation! + 1, batch: prop!.batch }));
  assert.deepEqual(r.tracker.drainResults(), []);
});

test("an overloaded leader refuses proposals with RAFT_REJECTED (maxUncommittedEntriesBytes)", () => {
  const env = electedEnv([1, 2, 3], [], { maxUncommittedEntriesBytes: 100 });
  env.partition([[1], [2, 3]]);
  const first = env.propose(1, "x".repeat(80));
  env.stabilize([1]);
  const second = env.propose(1, "y".repeat(80));
  env.stabilize([1]);
  const results = env.takeResults(1);
  assert.deepEqual(results.filter((r) => r.id === first), [], "first is appended, waiting for commit");
  assert.equal(outcome(results, second), "RAFT_REJECTED");
});

test("too many requests pending on one node: refused at once", () => {
  const t = new RequestTracker(100, 2);
  t.add("propose", bytes("a"));
  t.add("propose", bytes("b"));
  const third = t.add("propose", bytes("c"));
  const [res] = t.drainResults();
  assert.ok(res && !res.ok && res.id === third && res.code === "RAFT_REJECTED");
});

test("every request gets exactly one result, whatever happens (crash of the leader mid-flight)", () => {
  const env = cluster();
  const ids = [env.propose(2, "p1"), env.readIndex(2), env.propose(3, "p2")];
  env.processReady(2);
  env.processReady(3);
  env.deliver([1]);
  env.crash(1);
  for (let k = 0; k < 4 * ELECTION_TICKS; k++) {
    env.tick(2, 1);
    env.tick(3, 1);
    env.stabilize([2, 3]);
  }
  const r2 = env.takeResults(2);
  const r3 = env.takeResults(3);
  assert.equal(r2.filter((r) => r.id === ids[0]).length, 1);
  assert.equal(r2.filter((r) => r.id === ids[1]).length, 1);
  assert.equal(r3.filter((r) => r.id === ids[2]).length, 1);
});
