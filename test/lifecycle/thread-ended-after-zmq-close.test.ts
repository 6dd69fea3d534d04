/**
 * A thread that closes zeromq sockets and is then ended does not take the process down: libzmq drops a closed
 * socket's queued frames later, on its own threads, and hands each zero-copy frame (over 128 bytes) back to the
 * sending thread's zeromq.js module, freed if that thread has ended by then ("corrupted double-linked list":
 * a refused joiner master died so at load 30, its Raft worker ended right after a join attempt's DEALER closed
 * with its REFUSE frame queued). ZmqSettle (src/shared/zmq-settle.ts) waits until libzmq has destroyed the
 * sockets; the join host and the peer transport close through it. The second test shows the hazard is real on
 * this build, so the first one can fail. Both run in a child process (zmq-settle-stress.ts).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { runChild } from "../helpers/child-run.js";

const stress = (mode: "settle" | "bare", rounds: number) => runChild(new URL("./zmq-settle-stress.js", import.meta.url), [mode, String(rounds)]);

test("threads ended right after closing DEALERs with queued zero-copy frames, once libzmq destroyed them, 100 times over, never abort the process", { timeout: 300_000 }, async () => {
  const r = await stress("settle", 100);
  assert.equal(r.signal, null, `the stress process ended by ${r.signal}: ${r.err}`);
  assert.equal(r.code, 0, r.err);
  assert.equal(r.out.trim(), "rounds 100");
});

test("the same threads ended without waiting for libzmq corrupt the heap and abort the process (why ZmqSettle exists)", { timeout: 300_000 }, async () => {
  const r = await stress("bare", 300);
  // the corrupted heap ends the process by glibc's abort, or by a segmentation fault when a freed block is used first
  assert.ok(r.signal === "SIGABRT" || r.signal === "SIGSEGV", `signal ${r.signal}, code ${r.code}: ${r.out}${r.err}`);
});
