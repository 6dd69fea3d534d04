/**
 * One LMDB commit per fetched batch (engine.ts installFetched, sources.ts DirSource.installBatch): the items of a batch
 * are renamed into place one by one, then recorded in the manifest in one transaction. The puller's thread is made to
 * die between the two (the test hook testOomAfterItems fires after an item is in place and before its batch's commit,
 * with the old generation scaled down so the bound is reached at once); the restarted thread's pull must find the
 * renamed items by its scan and fetch only the rest. Two masters' threads linked directly (test/helpers/state-sync-pair.ts).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { open as openLmdb } from "lmdb";
import { configureLogging } from "../../src/shared/log.js";
import { restartDelayMs } from "../../src/main-thread/state-sync-host.js";
import { LMDB_CBOR } from "../../src/lib/store/lmdb-env.js";
import { fetchBatchItems } from "../../src/workers/state-sync/messages.js";
import type { PeerReport } from "../../src/workers/state-sync/messages.js";
import type { Stored } from "../../src/workers/state-sync/manifest-store.js";
import { stateSyncPair } from "../helpers/state-sync-pair.js";

/** The file_roots manifest of the master under `side` (its thread not running): path -> entry. */
function manifestOf(side: string): Map<string, Stored> {
  const env = openLmdb({ path: path.join(side, "cache", "brine-lmdb", "state-sync"), encoding: LMDB_CBOR, readOnly: true, maxDbs: 8 });
  try {
    const db = env.openDB<Stored, string>({ name: "file_roots", encoding: LMDB_CBOR });
    const out = new Map<string, Stored>();
    for (const { key, value } of db.getRange({})) out.set(key as string, value);
    return out;
  } finally {
    void env.close();
  }
}

test("a thread that dies between a batch's renames and its one manifest commit: the next pull's scan finds the renamed items, fetches only the rest, and both manifests end with the same content", { timeout: 120_000 }, async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-statesync-midbatch-"));
  configureLogging({ level: "critical", file: path.join(root, "master.log"), fileLevel: "warning" });
  const files = 1000;
  const perItem = 96;
  // in the second batch processed (a puller's batches are of fetchBatchItems items but the last), before its commit
  const dieAt = fetchBatchItems + 44;
  for (let d = 0; d < files / 100; d++) {
    const dir = path.join(root, "a", "srv", "salt", `d${d}`);
    mkdirSync(dir, { recursive: true });
    for (let i = 0; i < 100; i++) writeFileSync(path.join(dir, `f${i}.sls`), `${d}/${i}`.padEnd(perItem, "."));
  }
  const { a, b, stop } = await stateSyncPair(root, { b: { resourceLimits: { maxYoungGenerationSizeMb: 3, maxOldGenerationSizeMb: 32 }, testOomAfterItems: dieAt } });
  const onDisk = () => readdirSync(b.roots).reduce((n, d) => n + readdirSync(path.join(b.roots, d)).filter((f) => f.endsWith(".sls")).length, 0);
  try {
    await b.link.syncFrom("a", ["file_roots"]).then(
      () => assert.fail("the first thread was to die mid-pull"),
      () => undefined,
    );
    // the thread is down (restarted after restartDelayMs): what it left on disk and in its manifest
    assert.equal(onDisk(), dieAt, "every item placed before the death is at its name");
    // the batches are processed in the order their replies come back, each whole: the ones before the death are
    // recorded (whatever their sizes), the one in progress is in place and not recorded (a commit an item: all of them)
    const committed = manifestOf(b.root);
    assert.ok(committed.size < dieAt && dieAt - committed.size <= fetchBatchItems, `the batch in progress is in place and not recorded: ${committed.size} recorded of ${dieAt} in place`);
    const parts = readdirSync(b.roots).flatMap((d) => readdirSync(path.join(b.roots, d)).filter((f) => f.startsWith(".brine-part-")));
    assert.deepEqual(parts, [], "no partial file is left: each item was renamed before the next was written");

    let report: PeerReport | undefined;
    const t0 = Date.now();
    while (!report && Date.now() - t0 < 30_000) {
      await sleep(restartDelayMs / 4);
      report = await b.link.syncFrom("a", ["file_roots"]).catch(() => undefined);
    }
    assert.ok(report, "the restarted thread answered");
    assert.equal(b.thread.restarts, 1);
    assert.deepEqual(report.errors, []);
    assert.equal(report.items, files - dieAt, "the renamed items not yet recorded are found by the scan, not fetched again");
    assert.equal(report.bytes, (files - dieAt) * perItem);
    assert.equal(onDisk(), files);
    for (const f of ["d0/f0.sls", "d2/f99.sls", "d9/f99.sls"]) assert.equal(readFileSync(path.join(b.roots, f), "utf8"), readFileSync(path.join(a.roots, f), "utf8"));
  } finally {
    await stop();
  }
  try {
    // both threads stopped: the manifests hold the same items with the same content and modes (the stamps of the items
    // the scan found are their install time here, not the peer's: content is what the digest compares)
    const ma = manifestOf(a.root);
    const mb = manifestOf(b.root);
    assert.equal(ma.size, files);
    assert.deepEqual([...mb.keys()], [...ma.keys()]);
    for (const [p, v] of ma) {
      const w = mb.get(p)!;
      assert.deepEqual([w.s, w.h, w.m, w.d], [v.s, v.h, v.m, v.d], p);
    }
  } finally {
    configureLogging({ level: "warning" });
    rmSync(root, { recursive: true, force: true });
  }
});
