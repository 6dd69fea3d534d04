/**
 * The state-sync thread restarted after it reached its heap bound (src/main-thread/state-sync-host.ts MirrorThread,
 * src/main-thread/cluster/state-sync-link.ts): two masters' threads linked directly (test/helpers/state-sync-pair.ts).
 * The puller's first thread fills its heap after installing some items (the test hook testOomAfterItems, with its old
 * generation scaled down to 32 MiB so the bound is reached at once) and ends with ERR_WORKER_OUT_OF_MEMORY in the
 * middle of a runner's pull, which the link asks again of the restarted thread.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { configureLogging } from "../../src/shared/log.js";
import { isBrineError } from "../../src/shared/errors.js";
import { askStateSync } from "../../src/runners/cluster-sync.js";
import type { PeerReport } from "../../src/workers/state-sync/messages.js";
import { stateSyncPair } from "../helpers/state-sync-pair.js";

test("a state-sync thread that reaches its heap bound mid-pull is restarted; the runner's call in flight is asked again of the new thread, which installs only the rest, and its answer says so", { timeout: 120_000 }, async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-statesync-restart-"));
  const logFile = path.join(root, "master.log");
  configureLogging({ level: "critical", file: logFile, fileLevel: "warning" });
  const files = 1500;
  const oomAfter = 400;
  for (let d = 0; d < files / 100; d++) {
    const dir = path.join(root, "a", "srv", "salt", `d${d}`);
    mkdirSync(dir, { recursive: true });
    for (let i = 0; i < 100; i++) writeFileSync(path.join(dir, `f${i}.sls`), `item ${d}/${i}\n`.repeat(8));
  }
  const { a, b, stop } = await stateSyncPair(root, { b: { resourceLimits: { maxYoungGenerationSizeMb: 3, maxOldGenerationSizeMb: 32 }, testOomAfterItems: oomAfter } });
  const installed = () => readdirSync(b.roots).reduce((n, d) => n + readdirSync(path.join(b.roots, d)).filter((f) => f.endsWith(".sls")).length, 0);
  // the moment the host starts the next thread (its port asked of the link; the pair asked for the first before this
  // hook): the first thread is gone, the next not
  // started; what is on disk then is what the first installed, and calls made then meet no thread
  let atRestart: number | undefined;
  let down: Promise<unknown> | undefined;
  let downRunner: Promise<unknown> | undefined;
  const newPort = b.link.newPort.bind(b.link);
  b.link.newPort = () => {
    if (atRestart === undefined) {
      atRestart = installed();
      down = b.link.syncFrom("a", ["file_roots"]).then(() => undefined, (e: unknown) => e);
      downRunner = askStateSync(b.link.runnerPort(), { op: "collect", channels: ["file_roots"] });
    }
    return newPort();
  };
  try {
    // a runner's collect_from_peers of file_roots: its thread dies under it; the link asks it again of the next thread
    const answer = (await askStateSync(b.link.runnerPort(), { op: "collect", channels: ["file_roots"] })) as Record<string, PeerReport & { restarted?: boolean }>;
    assert.equal(b.thread.restarts, 1);
    assert.equal(a.thread.restarts, 0);
    assert.ok(atRestart !== undefined && atRestart >= oomAfter && atRestart < files, `the first thread installed ${atRestart} items before it died (the hook: ${oomAfter})`);
    assert.deepEqual(Object.keys(answer), ["a"]);
    assert.equal(answer.a!.restarted, true, "the answer says the call was asked again of a restarted thread");
    assert.deepEqual(answer.a!.errors, []);
    // the join's call while the thread is down fails at once (it asks again by itself), with the clear error
    assert.ok(isBrineError(await down, "STATE_SYNC_RESTARTING"), `a join's call while the thread is down: ${String(await down)}`);
    // a runner's call made while the thread was down is answered by the next thread, not marked (it never ran on the first)
    const late = (await downRunner) as Record<string, PeerReport & { restarted?: boolean }>;
    assert.deepEqual(late.a!.errors, []);
    assert.equal(late.a!.restarted, undefined);
    // the two calls ran one after the other on the new thread: together they installed exactly what the first had not
    assert.equal(answer.a!.items + late.a!.items, files - atRestart, "only what the first thread had not installed is fetched");
    assert.equal(installed(), files);
    for (const f of ["d0/f0.sls", "d14/f99.sls"]) assert.equal(readFileSync(path.join(b.roots, f), "utf8"), readFileSync(path.join(a.roots, f), "utf8"));

    await sleep(300); // the log file's writes
    const lines = readFileSync(logFile, "utf8").split("\n");
    // the death's own line (other lines name the thread too, e.g. peer data not stored while it was down)
    const ended = lines.filter((l) => l.includes("the state-sync thread ended after"));
    assert.equal(ended.length, 1, `one log line for the death: ${lines.filter((l) => l.includes("state-sync thread")).join(" | ")}`);
    assert.match(ended[0]!, /reached its V8 heap bound \(old generation 32 MiB.*restarting it in 1000 ms/);
    assert.equal(lines.filter((l) => l.includes("asked again of the restarted thread")).length, 1, "one log line for the call asked again");
  } finally {
    await stop();
    configureLogging({ level: "warning" });
    rmSync(root, { recursive: true, force: true });
  }
});

test("a runner's call waiting for a thread that does not come back fails with a clear error when the master stops", { timeout: 60_000 }, async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-statesync-restart-stop-"));
  const { b, stop } = await stateSyncPair(root);
  try {
    await b.thread.stop(); // the thread ends and no host restarts it: the link has no port
    const pending = askStateSync(b.link.runnerPort(), { op: "collect", channels: ["file_roots"] }).then(() => undefined, (e: unknown) => e);
    await sleep(200);
    b.link.close();
    const err = await pending;
    assert.ok(isBrineError(err, "THREAD_GONE"), `the runner's error: ${String(err)}`);
  } finally {
    await stop();
    rmSync(root, { recursive: true, force: true });
  }
});
