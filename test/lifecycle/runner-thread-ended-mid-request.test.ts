/**
 * A runner thread ended while its request to the master waits for the reply (its caller left, its call failed,
 * the master stops) does not take the master down: the control server ends runner threads with endThread
 * (src/shared/thread-kit.ts): `stop`, the thread closes its zeromq sockets (closeClientSockets), `stopped`,
 * then terminate. A bare terminate() there aborts the whole process ("terminate called after throwing an
 * instance of 'Napi::Error'", zeromq.js#411): the second test shows the hazard is real on this build, so the
 * first one can fail. Both run the real runner thread in a child process (runner-exit-stress.ts).
 * The third: requests still queued in libzmq when the thread closes their sockets (the master unreachable) are
 * handed back to the thread after the close, so the thread waits for libzmq to destroy them
 * (clientSocketsSettled) before it answers `stopped`; without that wait 30 rounds aborted the process with
 * glibc's "corrupted double-linked list" (or a sibling message) in 5 of 5 runs (100 rounds: 3 of 3).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { runChild } from "../helpers/child-run.js";

const stress = (mode: "end" | "terminate" | "queued", rounds: number) => runChild(new URL("./runner-exit-stress.js", import.meta.url), [mode, String(rounds)]);

test("runner threads ended mid-request by endThread, 10 times over, never abort the process", { timeout: 180_000 }, async () => {
  const r = await stress("end", 10);
  assert.ok(!r.err.includes("Napi::Error"), r.err);
  assert.equal(r.signal, null, `the stress process ended by ${r.signal}: ${r.err}`);
  assert.equal(r.code, 0, r.err);
  assert.equal(r.out.trim(), "rounds 10");
});

test("the same thread ended by a bare terminate() mid-request aborts the process (why endThread exists)", { timeout: 180_000 }, async () => {
  const r = await stress("terminate", 5);
  assert.equal(r.signal, "SIGABRT", `code ${r.code}: ${r.out}${r.err}`);
  assert.ok(r.err.includes("Napi::Error"), r.err);
});

test("runner threads ended while their requests are still queued in libzmq (the master unreachable), 40 times over, never abort the process", { timeout: 300_000 }, async () => {
  const r = await stress("queued", 40);
  assert.equal(r.signal, null, `the stress process ended by ${r.signal}: ${r.err}`);
  assert.equal(r.code, 0, r.err);
  assert.equal(r.out.trim(), "rounds 40");
});
