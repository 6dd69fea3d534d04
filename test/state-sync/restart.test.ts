/**
 * The state-sync thread restarted after it reached its heap bound (src/main-thread/state-sync-host.ts MirrorThread,
 * src/main-thread/cluster/state-sync-link.ts): two masters' threads linked directly (test/helpers/state-sync-pair.ts).
 * The puller's first thread fills its heap after installing some items (the test hook testOomAfterItems, with its old
 * generation scaled down to 32 MiB so the bound is reached at once) and ends with ERR_WORKER_OUT_OF_MEMORY in the
 * middle of a pull.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { configureLogging } from "../../src/shared/log.js";
import { isBrineError } from "../../src/shared/errors.js";
import { restartDelayMs } from "../../src/main-thread/state-sync-host.js";
import { askStateSync } from "../../src/runners/cluster-sync.js";
import type { PeerReport } from "../../src/workers/state-sync/messages.js";
import { stateSyncPair } from "../helpers/state-sync-pair.js";

test("a state-sync thread that reaches its heap bound mid-pull is restarted; the runner that waited gets a clear error; the pull asked again installs only the rest", { timeout: 120_000 }, async () => {
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
  try {
    // a runner's collect_from_peers of file_roots: its thread dies under it
    const err = await askStateSync(b.link.runnerPort(), { op: "collect", channels: ["file_roots"] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(isBrineError(err, "STATE_SYNC_RESTARTING"), `the runner gets a clear error, got ${String(err)}`);
    const before = installed();
    assert.ok(before >= oomAfter && before < files, `the first thread installed ${before} items before it died (the hook: ${oomAfter})`);
    // calls while it is down fail at once, with the same clear error
    const down = await b.link.syncFrom("a", ["file_roots"]).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(isBrineError(down, "STATE_SYNC_RESTARTING"), `a call while the thread is down: ${String(down)}`);
    // so does a runner's call on a port it got while the thread is down
    const downRunner = await askStateSync(b.link.runnerPort(), { op: "collect", channels: ["file_roots"] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(isBrineError(downRunner, "STATE_SYNC_RESTARTING"), `a runner's call while the thread is down: ${String(downRunner)}`);

    // restarted after restartDelayMs; the join asks again (as cluster-service's promotion loop does) until it answers
    const t0 = Date.now();
    let report: PeerReport | undefined;
    while (!report && Date.now() - t0 < 30_000) {
      await sleep(restartDelayMs / 4);
      report = await b.link.syncFrom("a", ["file_roots"]).catch(() => undefined);
    }
    assert.ok(report, "the restarted thread answered");
    assert.equal(b.thread.restarts, 1);
    assert.equal(a.thread.restarts, 0);
    assert.deepEqual(report.errors, []);
    assert.equal(report.items, files - before, "only what the first thread had not installed is fetched");
    assert.equal(installed(), files);
    for (const f of ["d0/f0.sls", "d14/f99.sls"]) assert.equal(readFileSync(path.join(b.roots, f), "utf8"), readFileSync(path.join(a.roots, f), "utf8"));

    await sleep(300); // the log file's writes
    const ended = readFileSync(logFile, "utf8").split("\n").filter((l) => l.includes("state-sync thread"));
    assert.equal(ended.length, 1, `one log line for the death: ${ended.join(" | ")}`);
    assert.match(ended[0]!, /reached its V8 heap bound \(old generation 32 MiB.*restarting it in 1000 ms/);
  } finally {
    await stop();
    configureLogging({ level: "warning" });
    rmSync(root, { recursive: true, force: true });
  }
});
