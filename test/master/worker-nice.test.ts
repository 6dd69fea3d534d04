/**
 * `brine_worker_nice`: the request threads run that much nicer than the main thread (Linux keeps a nice value per
 * thread), so the main thread, which accepts, reads and replies, waits less behind their RSA and job-cache work.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { startTestMaster } from "../helpers/master.js";

/** nice of each thread of this process (field 19 of /proc/self/task/TID/stat) */
function niceByThread(): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
      out.set(tid, Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]));
    } catch {
      // a thread that ended meanwhile
    }
  }
  return out;
}

test("with brine_worker_nice the request threads, and only they, run that much nicer than the main thread", async () => {
  const before = niceByThread();
  const mainNice = before.get(String(process.pid))!;
  const tm = await startTestMaster({ worker_threads: 2, brine_worker_nice: 5 });
  try {
    const after = niceByThread();
    const lowered = [...after].filter(([tid, n]) => !before.has(tid) && n === Math.min(19, mainNice + 5));
    assert.equal(lowered.length, 2, `the two request threads (one per lane) at nice ${mainNice + 5}: ${JSON.stringify([...after])}`);
    assert.equal(after.get(String(process.pid)), mainNice, "the main thread keeps its priority");
    assert.ok([...after].filter(([tid]) => !before.has(tid)).some(([, n]) => n === mainNice), "other new threads (the publisher's, libuv's) keep it too");
  } finally {
    await tm.stop();
  }
});
