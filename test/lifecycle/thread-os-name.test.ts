/**
 * A brine thread names its OS thread `brine-<name>` (thread-kit's nameThisThread, run by threadInit), cut to
 * Linux's 15 bytes, so that /proc, `top -H` and `perf` tell the Raft worker and the other workers from libuv's
 * pool and V8's helper threads, which are all `node`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { isMainThread, parentPort, Worker } from "node:worker_threads";
import { nameThisThread } from "../../src/shared/thread-kit.js";

const comm = (tid: string | number) => readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim();
const names = () => readdirSync("/proc/self/task").map(comm);

if (!isMainThread) {
  nameThisThread("probe-of-a-long-name");
  // listening keeps the thread alive until the test has looked at the process's threads and ends it (once its
  // script was done, it could exit before that look: the test then failed on a loaded box)
  parentPort!.on("message", () => undefined);
  parentPort!.postMessage(readFileSync("/proc/thread-self/comm", "utf8").trim());
} else {
  test("a thread that names itself shows as brine-<name> in /proc, cut to 15 bytes, and other threads keep theirs", { skip: process.platform !== "linux" }, async () => {
    const mainName = comm(process.pid);
    const w = new Worker(new URL(import.meta.url));
    const seen = await new Promise<string>((resolve, reject) => {
      w.once("message", resolve);
      w.once("error", reject);
    });
    assert.equal(seen, "brine-probe-of-");
    assert.ok(names().includes("brine-probe-of-"), "listed among the process's threads");
    assert.equal(comm(process.pid), mainName, "the main thread's name is left alone");
    await w.terminate();
  });
}
