/**
 * Calls between threads (src/shared/port-calls.ts, the one RPC style): each call gets its own id, the answer
 * naming it resolves exactly that caller once, a call no answer reaches fails at its deadline, a gone thread
 * fails every caller, and an error crosses a port with its catalogue code and its exact text.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { PortCalls, portError, revivePortError } from "../../src/shared/port-calls.js";
import { CoarseTimer } from "../../src/shared/coarse-timer.js";
import { BrineError, isBrineError } from "../../src/shared/errors.js";

const timer = new CoarseTimer(5);

test("an answer resolves the call it names, once; answers to nobody are refused", async () => {
  const calls = new PortCalls<string>(10_000, () => new Error("late"), timer);
  const posted: number[] = [];
  const a = calls.call((id) => posted.push(id));
  const b = calls.call((id) => posted.push(id));
  assert.equal(posted.length, 2);
  assert.notEqual(posted[0], posted[1]);
  assert.equal(calls.inFlight, 2);
  assert.equal(calls.resolve(posted[1]!, "second"), true);
  assert.equal(calls.resolve(posted[1]!, "again"), false, "answered already");
  assert.equal(calls.resolve(9999, "x"), false, "never made");
  assert.equal(calls.resolve(posted[0]!, "first"), true);
  assert.deepEqual(await Promise.all([a, b]), ["first", "second"]);
  assert.equal(calls.inFlight, 0);
  assert.equal(timer.pending, 0, "deadlines are cancelled with their answer");
});

test("a call with no answer fails at its deadline with the caller's error, and a late answer reaches nobody", async () => {
  const calls = new PortCalls<string>(20, () => new BrineError("THREAD_NO_ANSWER", "test"), timer);
  let id = 0;
  const p = calls.call((i) => (id = i));
  await assert.rejects(p, (e) => isBrineError(e, "THREAD_NO_ANSWER") && e.message === "the thread did not answer: test");
  assert.equal(calls.resolve(id, "late"), false);
  assert.equal(calls.inFlight, 0);
});

test("a gone thread fails every waiting call; a post that throws fails its own call only", async () => {
  const calls = new PortCalls<string>(10_000, () => new Error("late"), timer);
  const a = calls.call(() => {});
  const bad = calls.call(() => {
    throw new Error("port closed");
  });
  await assert.rejects(bad, /port closed/);
  assert.equal(calls.inFlight, 1);
  calls.rejectAll(new BrineError("THREAD_GONE", "automation"));
  await assert.rejects(a, (e) => isBrineError(e, "THREAD_GONE"));
  assert.equal(calls.inFlight, 0);
});

test("an error crosses a port with its code and exact text; an uncoded or unknown one takes the fallback code", () => {
  const coded = revivePortError(portError(new BrineError("CONFIG_INVALID", "reactor: bad"), "THREAD_CALL"), "THREAD_CALL");
  assert.equal(coded.code, "CONFIG_INVALID");
  assert.equal(coded.message, "configuration is invalid: reactor: bad");
  const plain = revivePortError(portError(new Error("no such reactor"), "THREAD_CALL"), "THREAD_CALL");
  assert.equal(plain.code, "THREAD_CALL");
  assert.equal(plain.message, "no such reactor", "the text is the thrower's, not the catalogue's");
  assert.equal(revivePortError({ code: "NOT_A_CODE", text: "x" }, "THREAD_CALL").code, "THREAD_CALL");
  assert.deepEqual(portError("a string", "THREAD_CALL"), { code: "THREAD_CALL", text: "a string" });
});
