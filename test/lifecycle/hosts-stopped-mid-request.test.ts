/**
 * The automation and API hosts end their threads the one way (endThread, src/shared/thread-kit.ts): the thread
 * closes its request sockets and answers, then it is terminated. Each test stops a host again and again with
 * work in flight, in a child process (host-exit-stress.ts) so that an abort is that process's exit:
 * - automation: a scheduled runner call waits for a master that never answers. Before, the host waited 10 s
 *   for the thread to finish it and then ended it with a bare terminate() while its zeromq.js socket waited:
 *   the process aborted ("terminate called after throwing an instance of 'Napi::Error'", zeromq.js#411): the
 *   same driver on e7f19c2's build ended by SIGABRT in its first round.
 * - api: an HTTP `local_async` call waits for the request lanes, which never answer. The API thread sends its
 *   requests through its link to the main thread and opens no zeromq socket on these paths, so the old bare
 *   terminate() did not abort here (e7f19c2 passes this one): it holds the stop to its answer and its speed.
 * The Raft worker's end (ClusterNode) is endThread's call form, tested below with a thread of its own.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { endThread } from "../../src/shared/thread-kit.js";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { configureLogging } from "../../src/shared/log.js";
import { runChild, type ChildEnd } from "../helpers/child-run.js";

const stress = (mode: "automation" | "api", rounds: number) => runChild(new URL("./host-exit-stress.js", import.meta.url), [mode, String(rounds)]);

function assertClean(r: ChildEnd, rounds: number, stopMsMax: number): void {
  assert.ok(!r.err.includes("Napi::Error"), r.err);
  assert.equal(r.signal, null, `the stress process ended by ${r.signal}: ${r.err}`);
  assert.equal(r.code, 0, r.err);
  const m = /^rounds (\d+) stops ([\d ]+)$/m.exec(r.out);
  assert.equal(Number(m?.[1]), rounds, r.out);
  // each stop ended its thread once the thread closed its sockets, not at the host's bound
  for (const ms of m![2]!.trim().split(" ").map(Number)) assert.ok(ms < stopMsMax, `a stop took ${ms} ms: ${r.out}`);
}

test("the automation host stopped 5 times over while a scheduled call waits for the master never aborts the process", { timeout: 180_000 }, async () => {
  // the drain is 200 ms in the stress: the thread then cuts the call short, closes its socket and answers
  assertClean(await stress("automation", 5), 5, 2_000 + 200);
});

test("the API host stopped 5 times over with an HTTP call in flight ends its thread at once, never aborting", { timeout: 180_000 }, async () => {
  assertClean(await stress("api", 5), 5, 5_000);
});

/** A thread that waits for `go` and answers nothing else. */
const idleThread = () => new Worker("require('node:worker_threads').parentPort.on('message', () => {})", { eval: true });

test("endThread's call form ends the thread once the close resolved, and after a failed close or the bound, logged", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-end-thread-"));
  const file = path.join(dir, "log");
  configureLogging({ level: "quiet", file, fileLevel: "warning" });
  try {
    let closed = false;
    const a = idleThread();
    await endThread(a, "a", { close: async () => void (closed = true) }, 5_000);
    assert.ok(closed);
    assert.equal(a.threadId, -1, "ended");

    const b = idleThread();
    await endThread(b, "b", { close: () => Promise.reject(new Error("sockets stuck")) }, 5_000);
    assert.equal(b.threadId, -1);

    const c = idleThread();
    const t0 = Date.now();
    await endThread(c, "c", { close: () => new Promise(() => {}) }, 300);
    assert.equal(c.threadId, -1);
    assert.ok(Date.now() - t0 >= 290);
    const text = readFileSync(file, "utf8");
    assert.ok(!text.includes("a thread"), text);
    assert.match(text, /b thread failed to close its sockets \(sockets stuck\): ending it anyway/);
    assert.match(text, /c thread did not close its sockets within 300 ms: ending it anyway/);
  } finally {
    configureLogging({ level: "quiet" });
    rmSync(dir, { recursive: true, force: true });
  }
});
