/**
 * terminateThread (src/shared/thread-kit.ts), the bounded end of a thread that holds no zeromq.js socket (the
 * publisher, the state-sync thread; endThread ends the others with it once their sockets are closed): a thread
 * blocked outside JavaScript, which `terminate()` cannot end, is left after threadExitWaitMs, logged and recorded
 * in threadsLeftRunning, and taken off that list once it exits after all; an ordinary thread is simply ended.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { terminateThread, threadExitWaitMs, threadsLeftRunning } from "../../src/shared/thread-kit.js";
import { neverWritten } from "../helpers/fifo.js";

const blockedReader = (fifo: string) =>
  new Worker(`require("node:fs").writeFileSync(${JSON.stringify(`${fifo}.in`)}, "in"); require("node:fs").readFileSync(${JSON.stringify(fifo)});`, { eval: true });

test("a thread blocked in a read of a FIFO is left after threadExitWaitMs, named in threadsLeftRunning, and taken off once it exits", { timeout: threadExitWaitMs + 30_000 }, async () => {
  const f = neverWritten();
  const w = blockedReader(f.fifo);
  const exited = new Promise<void>((r) => w.once("exit", () => r()));
  try {
    // the thread is in its read once it said so
    for (let i = 0; i < 200 && !existsSync(`${f.fifo}.in`); i++) await new Promise((r) => setTimeout(r, 50));
    const label = `state-sync (thread ${w.threadId})`;
    const t0 = performance.now();
    await terminateThread(w, "state-sync");
    const waited = performance.now() - t0;
    assert.ok(waited >= threadExitWaitMs - 50, `resolved after ${waited.toFixed(0)} ms, before the thread could have exited`);
    assert.ok(threadsLeftRunning.has(label), `threadsLeftRunning: ${[...threadsLeftRunning].join(", ")}`);
    f.release();
    await exited;
    assert.ok(!threadsLeftRunning.has(label), "taken off once it exited");
  } finally {
    f.release();
    await w.terminate();
  }
});

test("an ordinary thread is ended at once and nothing is left running", { timeout: 30_000 }, async () => {
  const w = new Worker("setInterval(() => {}, 1000);", { eval: true });
  await new Promise((r) => w.once("online", r));
  const label = `publisher (thread ${w.threadId})`;
  const t0 = performance.now();
  await terminateThread(w, "publisher");
  assert.ok(performance.now() - t0 < threadExitWaitMs, "it waited out the bound");
  assert.equal(w.threadId, -1, "the thread has exited");
  assert.ok(!threadsLeftRunning.has(label));
  await terminateThread(w, "publisher"); // an exited thread: resolves at once
});
