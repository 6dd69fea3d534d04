/**
 * The simulator's checker must be able to fail: each property is fed evidence of its violation and must
 * throw. (A checker that never fires would make "0 violations" meaningless.)
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { Checker, Violation } from "../../tools/raft-sim/checker.js";
import type { NodeObserver } from "../../tools/raft-sim/node.js";
import { SimNode } from "../../tools/raft-sim/node.js";
import { Rng } from "../../tools/raft-sim/rng.js";
import { MemoryStorage } from "../../src/workers/raft/core/storage.js";
import type { RequestResult } from "../../src/workers/raft/core/types.js";
import { bytes, entry } from "./helpers.js";

const quiet: NodeObserver = { persisted() {}, sent() {}, applied() {}, snapshotInstalled() {}, result() {} };

function node(id: number): SimNode {
  const n = new SimNode(id, MemoryStorage.bootstrap([1, 2, 3]), new Rng(id), { limits: {}, snapshotEveryEntries: 1e9, snapshotKeepEntries: 0, snapshotPadBytes: 0 }, quiet);
  n.start();
  return n;
}

/** Node `a` applies entry 2 with `applied` data, after proposing `proposed` as request 1. */
function applyAt2(c: Checker, a: SimNode, proposed: string, applied = proposed): void {
  c.proposed(a, 1, bytes(proposed));
  a.app.apply(entry(2, 2, applied));
  c.appliedEntry(a, entry(2, 2, applied));
}

const ack = (value: string): RequestResult => ({ id: 1, kind: "propose", ok: true, index: 2, term: 2, value: bytes(value) });

const violates = (fn: () => void, pattern: RegExp) => assert.throws(fn, (e) => e instanceof Violation && pattern.test(e.message));

test("checker: two leaders in one term violate election safety", () => {
  const c = new Checker();
  const a = node(1);
  const b = node(2);
  for (const n of [a, b]) {
    n.rn!.raft.becomeCandidate();
    n.rn!.raft.becomeLeader();
  }
  violates(() => c.afterStep([a, b]), /election safety/);
});

test("checker: different entries applied at one index violate state machine safety", () => {
  const c = new Checker();
  const a = node(1);
  const b = node(2);
  a.app.apply(entry(2, 2, "x"));
  c.appliedEntry(a, entry(2, 2, "x"));
  b.app.apply(entry(2, 2, "y"));
  violates(() => c.appliedEntry(b, entry(2, 2, "y")), /state machine safety/);
});

test("checker: the same (index, term) with different data violates log matching", () => {
  const c = new Checker();
  const a = node(1);
  const b = node(2);
  a.disk.append([entry(2, 2, "x")]);
  c.persisted(a, [entry(2, 2, "x")]);
  b.disk.append([entry(2, 2, "y")]);
  violates(() => c.persisted(b, [entry(2, 2, "y")]), /log matching/);
});

test("checker: a read below an index acknowledged before it began is a stale read", () => {
  const c = new Checker();
  const a = node(1);
  applyAt2(c, a, "v");
  c.result(a, ack("v"));
  c.readStarted(a, 2);
  const stale: RequestResult = { id: 2, kind: "read", ok: true, index: 1 };
  violates(() => c.result(a, stale), /stale read/);
});

test("checker: an acknowledgement naming an entry that was not applied there is a lost write", () => {
  const c = new Checker();
  const a = node(1);
  applyAt2(c, a, "mine", "other");
  violates(() => c.result(a, ack("mine")), /other data|another value/);
});

test("checker: a granted vote not yet on disk violates durability before promises", () => {
  const c = new Checker();
  const a = node(1);
  a.disk.setHardState({ term: 3, vote: 2, commit: 1 });
  violates(() => c.sent(a, "MsgVoteResp", 3, 3, 0, false), /before persisting/);
});

test("checker: acknowledged writes must reach every member by the end", () => {
  const c = new Checker();
  const a = node(1);
  applyAt2(c, a, "v");
  c.result(a, ack("v"));
  violates(() => c.finalCheck([a, node(2)]), /not applied on member 2/);
});
