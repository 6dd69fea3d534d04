/**
 * Asynchronous storage writes (RaftConfig.asyncStorageWrites; Raft thesis §10.2.1, etcd's AsyncStorageWrites):
 * a leader hands its own new entries to its disk and advances at once; the disk reports back later
 * (RawNode.appendDurable). The rules, one scenario each: the leader never counts its own entry before it is
 * durable (and applies only what its disk holds), a follower never acknowledges what is not durable, a term
 * or vote change is durable before any message that depends on it leaves, and a leader that loses its
 * leadership with writes in flight stays correct (a stale report never marks a newer entry durable).
 * The environment runs the worker's rule for which writes may be in flight (tools/raft-sim/node.ts).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { isBrineError } from "../../src/shared/errors.js";
import { RawNode } from "../../src/workers/raft/core/raw-node.js";
import { MemoryStorage } from "../../src/workers/raft/core/storage.js";
import type { Message, NodeId } from "../../src/workers/raft/core/types.js";
import { Env } from "./env.js";
import { bytes } from "./helpers.js";

/** Three voters with asynchronous writes, node 1 elected, everything delivered and landed. */
function asyncEnv(): Env {
  const env = new Env({}, { asyncWrites: true });
  env.addNodes([1, 2, 3]);
  env.campaign(1);
  env.stabilize();
  env.heartbeat(1);
  for (const id of env.ids()) env.takeResults(id);
  return env;
}

const lastIndex = (env: Env, id: NodeId) => env.rn(id).raft.log.lastIndex();
const committed = (env: Env, id: NodeId) => env.rn(id).raft.log.committed;
const applied = (env: Env, id: NodeId) => env.appliedBy.get(id)!.map((e) => e.index);
const queued = (env: Env, type: Message["type"], to?: NodeId) => env.queue.filter((m) => m.type === type && (to === undefined || m.to === to));

test("a leader's write in flight does not count: one follower's acknowledgement commits only once the leader's own write landed", () => {
  const env = asyncEnv();
  env.propose(1, "x");
  env.processReady(1);
  const idx = lastIndex(env, 1);
  assert.equal(env.node(1).writesInFlight, 1, "the leader's append is in flight");
  assert.equal(env.node(1).disk.lastIndex(), idx - 1, "not on the leader's disk yet");
  assert.equal(queued(env, "MsgApp").length, 2, "the appends left before the leader's write landed");
  env.deliver([2]);
  env.processReady(2);
  env.dropQueued([3]);
  env.deliver([1]); // 2's acknowledgement
  assert.equal(committed(env, 1), idx - 1, "the leader and one follower make a quorum only once the leader's copy is durable");
  env.landWrites(1);
  assert.equal(committed(env, 1), idx, "the landed write counts as the leader's own acknowledgement");
  env.processReady(1);
  assert.deepEqual(env.takeResults(1).map((r) => r.ok && r.kind !== "read" && r.index), [idx]);
  assert.ok(applied(env, 1).includes(idx));
});

test("two followers' acknowledgements commit an entry before the leader's write lands, and the leader applies it only once its disk holds it", () => {
  const env = asyncEnv();
  env.propose(1, "y");
  env.processReady(1);
  const idx = lastIndex(env, 1);
  env.deliver([2, 3]);
  env.processReady(2);
  env.processReady(3);
  env.deliver([1]);
  assert.equal(committed(env, 1), idx, "a quorum of followers holds it durably: committed");
  assert.equal(env.node(1).disk.lastIndex(), idx - 1);
  if (env.rn(1).hasReady()) env.processReady(1);
  assert.ok(!applied(env, 1).includes(idx), "applied before the leader's own disk held it");
  assert.deepEqual(env.takeResults(1), [], "answered before the leader's own disk held it");
  env.landWrites(1);
  env.processReady(1);
  assert.ok(applied(env, 1).includes(idx));
  assert.equal(env.takeResults(1).length, 1);
});

test("a follower acknowledges an append only once the entries are on its disk (its writes are never in flight)", () => {
  const env = asyncEnv();
  env.propose(1, "z");
  env.processReady(1);
  const idx = lastIndex(env, 1);
  env.deliver([2]);
  env.processReady(2);
  assert.equal(env.node(2).writesInFlight, 0);
  const acks = queued(env, "MsgAppResp", 1);
  assert.equal(acks.length, 1);
  assert.equal(acks[0]!.index, idx);
  assert.ok(env.node(2).disk.lastIndex() >= idx, "acknowledged what its disk does not hold");
});

test("a leader with a write in flight that grants a vote writes the new term and vote, after the write in flight, before the answer leaves", () => {
  const env = asyncEnv();
  env.propose(1, "w");
  env.processReady(1);
  env.dropQueued();
  assert.equal(env.node(1).writesInFlight, 1);
  // node 3 holds the leader's whole durable log and campaigns in a newer term (a transfer bypasses leases)
  const term = env.rn(1).raft.term;
  env.rn(1).step({ type: "MsgVote", from: 3, to: 1, term: term + 1, logTerm: term, index: lastIndex(env, 1), commit: 0, reject: false, rejectHint: 0, context: "transfer" });
  env.processReady(1);
  const votes = queued(env, "MsgVoteResp", 3);
  assert.equal(votes.length, 1);
  assert.equal(votes[0]!.reject, false);
  const hs = env.node(1).disk.initialState().hardState;
  assert.equal(hs.term, term + 1, "the vote left before its term was durable");
  assert.equal(hs.vote, 3, "the vote left before it was durable");
  assert.equal(env.node(1).writesInFlight, 0, "a later write reached the disk before the one in flight");
  assert.equal(env.node(1).disk.lastIndex(), lastIndex(env, 1), "the write in flight is on the disk too");
});

test("a leader deposed with a write in flight: the newer leader's entries replace its own, and its write's late report marks nothing of them durable", () => {
  const env = asyncEnv();
  env.partition([[1], [2, 3]]);
  env.propose(1, "lost");
  env.processReady(1);
  const idx = lastIndex(env, 1);
  const oldTerm = env.rn(1).raft.term;
  env.dropQueued();
  // 2 and 3 lose the leader's session and elect 2, which commits an entry of its own at the same index
  env.rn(2).reportUnreachable(1);
  env.rn(3).reportUnreachable(1);
  env.tick(2);
  env.stabilize([2, 3]);
  env.propose(2, "kept");
  env.stabilize([2, 3]);
  assert.equal(env.rn(2).raft.role, "leader");
  const kept = env.rn(2).raft.log.committed;
  assert.ok(kept >= idx);
  env.heal();
  env.heartbeat(2);
  env.stabilize();
  assert.equal(env.rn(1).raft.role, "follower");
  assert.equal(env.rn(1).raft.log.term(idx), env.rn(2).raft.log.term(idx), "the deposed leader holds the new leader's entry");
  assert.notEqual(env.rn(1).raft.log.term(idx), oldTerm);
  const results = env.takeResults(1);
  assert.ok(results.every((r) => !r.ok), "the deposed leader's proposal was reported committed");
  assert.deepEqual(env.appliedBy.get(1)!.map((e) => `${e.index}/${e.term}`), env.appliedBy.get(2)!.map((e) => `${e.index}/${e.term}`).slice(0, env.appliedBy.get(1)!.length));
});

test("appendDurable of an entry that a newer leader replaced meanwhile leaves the replacement unstable", () => {
  const disk = MemoryStorage.bootstrap([1, 2, 3]);
  const rn = new RawNode({ id: 1, storage: disk, rand: () => 0, asyncStorageWrites: true });
  // node 1 receives entry 2 of term 2 from leader 2, then leader 3 of term 3 replaces it before it was written
  rn.step({ type: "MsgApp", from: 2, to: 1, term: 2, logTerm: 1, index: 1, commit: 1, reject: false, rejectHint: 0, entries: [{ term: 2, index: 2, type: "normal", data: bytes("a") }] });
  let rd = rn.ready();
  disk.append(rd.entries); // the shell's storage view holds what it handed to its disk
  rn.advance({ writeInFlight: true });
  rn.step({ type: "MsgApp", from: 3, to: 1, term: 3, logTerm: 1, index: 1, commit: 1, reject: false, rejectHint: 0, entries: [{ term: 3, index: 2, type: "normal", data: bytes("b") }] });
  rd = rn.ready();
  assert.deepEqual(rd.entries.map((e) => `${e.index}/${e.term}`), ["2/3"], "the replacement is handed out again for writing");
  disk.append(rd.entries);
  rn.advance({ writeInFlight: true });
  rn.appendDurable(2, 2); // the first write's late report
  assert.equal(rn.raft.log.durableLastIndex(), 1, "the report of the replaced entry marked its replacement durable");
  rn.appendDurable(2, 3);
  assert.equal(rn.raft.log.durableLastIndex(), 2);
});

test("the asynchronous-write calls are refused where they would break the contract (RAFT_API_MISUSE)", () => {
  const sync = new RawNode({ id: 1, storage: MemoryStorage.bootstrap([1]), rand: () => 0 });
  sync.campaign();
  sync.ready();
  assert.throws(() => sync.advance({ writeInFlight: true }), (e) => isBrineError(e, "RAFT_API_MISUSE"));
  assert.throws(() => sync.appendDurable(1, 1), (e) => isBrineError(e, "RAFT_API_MISUSE"));
  const view = MemoryStorage.bootstrap([1]);
  const rn = new RawNode({ id: 1, storage: view, rand: () => 0, asyncStorageWrites: true });
  rn.campaign();
  const rd = rn.ready();
  view.append(rd.entries);
  const last = rd.entries[rd.entries.length - 1]!;
  assert.throws(() => rn.appendDurable(last.index, last.term), (e) => isBrineError(e, "RAFT_API_MISUSE"), "a report between ready() and advance()");
  rn.advance({ writeInFlight: true });
  assert.equal(rn.raft.log.committed, 1, "a sole voter committed its entry before it was durable");
  rn.appendDurable(last.index, last.term);
  assert.equal(rn.raft.log.committed, last.index, "a sole voter commits once its own write is durable");
});

test("a sole voter elected with its commit index behind its log answers a read only at the commit of its own first entry, once that is durable", () => {
  // entries 2 and 3 of term 1 are on the disk, the commit index it knows is 1 (a former leader may have
  // committed and acknowledged 3): a read served at 1 would miss an acknowledged write
  const view = MemoryStorage.bootstrap([1]);
  view.append([
    { term: 1, index: 2, type: "normal", data: bytes("a") },
    { term: 1, index: 3, type: "normal", data: bytes("b") },
  ]);
  const rn = new RawNode({ id: 1, storage: view, rand: () => 0, asyncStorageWrites: true });
  rn.campaign();
  const read = rn.readIndex();
  let rd = rn.ready();
  assert.deepEqual(rd.results, [], "a read was answered before this leader committed an entry of its term");
  view.append(rd.entries);
  const last = rd.entries[rd.entries.length - 1]!;
  rn.advance({ writeInFlight: true });
  rn.appendDurable(last.index, last.term);
  rd = rn.ready();
  const r = rd.results.find((x) => x.id === read);
  assert.ok(r?.ok && r.kind === "read", "the read was not answered once its first entry committed");
  assert.equal(r.index, last.index);
  rn.advance();
});
