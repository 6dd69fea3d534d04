/**
 * The log's bookkeeping: reads across the durable and unstable parts, byte limits, conflict search by term,
 * and the invariants the rest of the core relies on.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { isBrineError } from "../../src/shared/errors.js";
import { RaftLog } from "../../src/workers/raft/core/log.js";
import { Inflights } from "../../src/workers/raft/core/progress.js";
import { committedIndex, voteResult } from "../../src/workers/raft/core/quorum.js";
import { MemoryStorage } from "../../src/workers/raft/core/storage.js";
import { ENTRY_OVERHEAD_BYTES } from "../../src/workers/raft/core/types.js";
import { entry, storageWithLog } from "./helpers.js";

/** Log with terms [1(genesis), 1, 2, 2] durable and [3, 3] unstable (indexes 5, 6). */
function mixedLog(): RaftLog {
  const log = new RaftLog(storageWithLog([1, 2, 3], [1, 2, 2]));
  log.append([entry(5, 3, "e"), entry(6, 3, "f")]);
  return log;
}

test("slice() reads across the durable and unstable parts", () => {
  const log = mixedLog();
  assert.deepEqual(log.slice(2, 7, 1 << 20).map((e) => e.index), [2, 3, 4, 5, 6]);
  assert.deepEqual(log.slice(4, 6, 1 << 20).map((e) => e.index), [4, 5]);
  assert.deepEqual(log.slice(5, 7, 1 << 20).map((e) => e.index), [5, 6]);
});

test("slice() stops at maxBytes but always returns at least one entry", () => {
  const log = mixedLog();
  const one = ENTRY_OVERHEAD_BYTES + 1;
  assert.equal(log.slice(2, 7, 0).length, 1);
  assert.deepEqual(log.slice(4, 7, 2 * one).map((e) => e.index), [4, 5], "the limit spans the durable/unstable seam");
});

test("out-of-range reads fail with RAFT_COMPACTED or RAFT_UNAVAILABLE", () => {
  const s = storageWithLog([1, 2, 3], [1, 2, 2]);
  s.setHardState({ term: 2, vote: 0, commit: 3 });
  s.createSnapshot(3, { voters: [1, 2, 3], learners: [], confIndex: 0 }, new Uint8Array());
  s.compact(3);
  const log = new RaftLog(s);
  assert.equal(log.term(3), 2, "the snapshot boundary keeps its term");
  assert.throws(() => log.term(2), (e) => isBrineError(e, "RAFT_COMPACTED"));
  assert.throws(() => log.slice(3, 5, 1 << 20), (e) => isBrineError(e, "RAFT_COMPACTED"));
  assert.throws(() => log.slice(4, 9, 1 << 20), (e) => isBrineError(e, "RAFT_UNAVAILABLE"));
  assert.equal(log.entriesFrom(2, 1 << 20), undefined, "compacted: the leader must send a snapshot");
});

test("findConflictByTerm() skips back a whole term, and answers term 0 inside the compacted prefix", () => {
  const log = new RaftLog(storageWithLog([1, 2, 3], [1, 1, 2, 2, 2, 4])); // indexes 2..7
  assert.deepEqual(log.findConflictByTerm(7, 3), [6, 2]);
  assert.deepEqual(log.findConflictByTerm(7, 4), [7, 4]);
  assert.deepEqual(log.findConflictByTerm(5, 1), [3, 1]);
  assert.deepEqual(log.findConflictByTerm(99, 9), [7, 4], "clamped to the last index");
  const s = storageWithLog([1, 2, 3], [2, 2, 3]);
  s.setHardState({ term: 3, vote: 0, commit: 3 });
  s.createSnapshot(3, { voters: [1, 2, 3], learners: [], confIndex: 0 }, new Uint8Array());
  s.compact(3);
  const compacted = new RaftLog(s);
  assert.deepEqual(compacted.findConflictByTerm(4, 1), [2, 0]);
});

test("maybeAppend() refuses to replace a committed entry", () => {
  const log = new RaftLog(storageWithLog([1, 2, 3], [2, 2]));
  log.commitTo(3);
  assert.throws(() => log.maybeAppend(1, 1, 3, [entry(2, 5)]), (e) => isBrineError(e, "RAFT_REJECTED"));
});

test("commit never moves back, and never past the last index", () => {
  const log = mixedLog();
  log.commitTo(5);
  log.commitTo(3);
  assert.equal(log.committed, 5);
  assert.throws(() => log.commitTo(7), (e) => isBrineError(e, "RAFT_UNAVAILABLE"));
});

test("stableTo() ignores an acknowledgement for entries replaced meanwhile", () => {
  const log = mixedLog();
  log.append([entry(6, 4, "g")]); // a new leader replaced index 6
  log.unstable.stableTo(6, 3); // the old write finished
  assert.equal(log.unstable.entries.length, 2, "the replacement is still unstable");
  log.unstable.stableTo(6, 4);
  assert.equal(log.unstable.entries.length, 0);
});

test("assertInvariants() catches applied beyond committed", () => {
  const log = mixedLog();
  log.assertInvariants();
  log.applying = 5;
  assert.throws(() => log.assertInvariants(), (e) => isBrineError(e));
});

test("MemoryStorage.append() replaces a conflicting suffix and refuses a gap", () => {
  const s = MemoryStorage.bootstrap([1]);
  s.append([entry(2, 1), entry(3, 1), entry(4, 1)]);
  s.append([entry(3, 2)]);
  assert.equal(s.lastIndex(), 3);
  assert.equal(s.term(3), 2);
  assert.throws(() => s.append([entry(9, 2)]), (e) => isBrineError(e, "RAFT_UNAVAILABLE"));
});

test("quorum: the committed index is the highest one a majority of voters holds", () => {
  const match = new Map([[1, 9], [2, 7], [3, 4], [4, 2], [5, 8]]);
  assert.equal(committedIndex(new Set([1, 2, 3]), (id) => match.get(id)!), 7);
  assert.equal(committedIndex(new Set([1, 2, 3, 4, 5]), (id) => match.get(id)!), 7);
  assert.equal(committedIndex(new Set([1, 3, 4, 5]), (id) => match.get(id)!), 4);
  assert.equal(committedIndex(new Set(), () => 99), 0);
  assert.equal(voteResult(new Set([1, 2, 3]), new Map([[1, true], [2, false]])), "pending");
  assert.equal(voteResult(new Set([1, 2, 3]), new Map([[1, true], [9, true]])), "pending", "non-voters do not count");
  assert.equal(voteResult(new Set([1, 2, 3]), new Map([[2, false], [3, false]])), "lost");
});

test("inflights: a bounded window freed by acknowledgement", () => {
  const inf = new Inflights(3);
  inf.add(5);
  inf.add(8);
  inf.add(10);
  assert.equal(inf.full(), true);
  assert.throws(() => inf.add(11));
  inf.freeLE(8);
  assert.equal(inf.count, 1);
  inf.add(12);
  inf.add(13);
  assert.equal(inf.full(), true);
  inf.freeLE(100);
  assert.equal(inf.count, 0);
});
