/**
 * Replies go out per frame (issue 14): a request worker sends each reply as soon as the callback that made
 * it ready is done, never waiting for the slow frames of its batch (src/workers/req-handler/batch-replies.ts), and the
 * main thread answers each request exactly once, from the batch's result, a part, or an error when the
 * worker is gone (src/main-thread/open-batches.ts). Both are pure: these tests drive them turn by turn.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { BatchReplies } from "../../src/workers/req-handler/batch-replies.js";
import { OpenBatches } from "../../src/main-thread/open-batches.js";

test("a batch whose frames are all ready at the first flush goes as one result, with no part", () => {
  const b = new BatchReplies(3);
  assert.equal(b.settle(0), true, "the first ready frame schedules a flush");
  assert.equal(b.settle(2), false, "one flush per turn");
  assert.equal(b.settle(1), false);
  assert.deepEqual(b.flush(), { kind: "result" });
  assert.equal(b.finished, true);
  assert.equal(b.hold(), false, "the task already ended with its result");
});

test("a ready reply leaves in a part at the next flush while a slow frame of its batch still runs", () => {
  const b = new BatchReplies(4);
  b.settle(1);
  b.settle(3);
  assert.deepEqual(b.flush(), { kind: "part", indices: [1, 3] });
  assert.equal(b.settle(0), true);
  assert.deepEqual(b.flush(), { kind: "part", indices: [0] });
  assert.equal(b.finished, false);
  // the slow one: its reply rides in the batch's result, after the parts (the task ends with it)
  assert.equal(b.settle(2), true);
  assert.deepEqual(b.flush(), { kind: "final", indices: [2] });
  assert.equal(b.finished, true);
  assert.equal(b.hold(), false, "the task ended with its result");
});

test("past the hold the task ends before its slow frame; that frame's reply still goes, in a part", () => {
  const b = new BatchReplies(2);
  b.settle(0);
  assert.deepEqual(b.flush(), { kind: "part", indices: [0] });
  assert.equal(b.hold(), true, "the task gives its slot back");
  assert.equal(b.hold(), false, "only once");
  b.settle(1);
  assert.deepEqual(b.flush(), { kind: "part", indices: [1] }, "the task has ended: the last reply goes in a part, not a result");
  assert.equal(b.finished, true);
});

test("a batch with no frame ready by the hold sends every reply in parts, even if they then all come at once", () => {
  const b = new BatchReplies(2);
  assert.equal(b.hold(), true);
  b.settle(0);
  b.settle(1);
  assert.deepEqual(b.flush(), { kind: "part", indices: [0, 1] });
});

test("the hold passing between a frame's readiness and its flush still leaves that reply to the flush", () => {
  const b = new BatchReplies(1);
  assert.equal(b.settle(0), true);
  assert.equal(b.hold(), true);
  assert.deepEqual(b.flush(), { kind: "part", indices: [0] });
});

test("a frame settling after the batch ended is a bug, thrown, not a second reply", () => {
  const b = new BatchReplies(1);
  b.settle(0);
  b.flush();
  assert.throws(() => b.settle(0), /settled after the batch ended/);
});

test("a complete result answers every frame of its batch in order and closes it", () => {
  const o = new OpenBatches<string>();
  o.add(1, ["a", "b", "c"]);
  assert.deepEqual(o.complete(1), ["a", "b", "c"]);
  assert.deepEqual(o.complete(1), [], "closed");
  assert.deepEqual(o.answer(1, [0]), [undefined]);
});

test("parts answer each frame once, in any grouping, and the batch closes with its last reply", () => {
  const o = new OpenBatches<string>();
  o.add(7, ["a", "b", "c"]);
  assert.deepEqual(o.answer(7, [2, 0]), ["c", "a"]);
  assert.deepEqual(o.answer(7, [0]), [undefined], "a frame is answered once");
  assert.equal(o.release(7, 1000), true, "the task ended with a reply still owed");
  assert.deepEqual(o.answer(7, [1]), ["b"]);
  assert.equal(o.release(7, 1000), false, "closed");
  assert.deepEqual(o.expire(Infinity), []);
});

test("a part that arrives after its task's end (two channels, no order between them) still answers its frames", () => {
  const o = new OpenBatches<string>();
  o.add(3, ["x", "y"]);
  assert.equal(o.release(3, 10), true);
  assert.deepEqual(o.answer(3, [0, 1]), ["x", "y"]);
  assert.equal(o.released, 0);
});

test("a failed task answers only the frames no part answered, and a part after that answers none", () => {
  const o = new OpenBatches<string>();
  o.add(2, ["a", "b", "c"]);
  assert.deepEqual(o.answer(2, [1]), ["b"]);
  assert.deepEqual(o.fail(2), ["a", "c"]);
  assert.deepEqual(o.answer(2, [0, 2]), [undefined, undefined]);
});

test("replies owed by a released batch expire after the limit; a running batch is left to its task", () => {
  const o = new OpenBatches<string>();
  o.add(1, ["old1", "old2"]);
  o.add(2, ["new"]);
  o.add(3, ["running"]);
  o.answer(1, [1]);
  o.release(1, 100);
  o.release(2, 500);
  assert.equal(o.released, 2);
  assert.deepEqual(o.expire(200), ["old1"]);
  assert.equal(o.released, 1);
  assert.deepEqual(o.expire(Infinity), ["new"], "at shutdown every released batch");
  assert.deepEqual(o.fail(3), ["running"]);
});

test("a batch's parts and results apply in their numbered order, whichever channel brought them first", () => {
  const o = new OpenBatches<string>();
  o.add(4, ["a", "b", "c"]);
  assert.deepEqual(o.inOrder(4, 1, "part 1"), [], "held: message 0 has not come");
  assert.deepEqual(o.inOrder(4, 2, "final 2"), [], "held too");
  assert.deepEqual(o.inOrder(4, 0, "hold result 0"), ["hold result 0", "part 1", "final 2"], "0 releases what waited behind it");
  assert.deepEqual(o.inOrder(4, 3, "part 3"), ["part 3"]);
});

test("a message of a closed batch (answered with an error) is applied at once: its effects still go", () => {
  const o = new OpenBatches<string>();
  o.add(6, ["a"]);
  o.fail(6);
  assert.deepEqual(o.inOrder(6, 5, "late part"), ["late part"]);
});

test("a full result for a batch that already sent parts is refused as a bug", () => {
  const o = new OpenBatches<string>();
  o.add(5, ["a", "b"]);
  o.answer(5, [0]);
  assert.throws(() => o.complete(5), /full result after 1 replies went in parts/);
});
