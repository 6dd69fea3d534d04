/**
 * A stopping master's state-sync thread (src/main-thread/state-sync-host.ts MirrorThread.stop): the thread is asked to
 * close, stops its scans at their next manifest write, closes its LMDB manifests and exits by itself; it is never
 * terminated from outside while it works. A terminate that lands inside an LMDB transaction's callback (a roots
 * scan writes its manifest in transactionSync) aborts the whole process with "FATAL ERROR: napi_throw", so these
 * stops happen in the middle of scans of a few thousand new files: an abort would end this test's process.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { MessageChannel } from "node:worker_threads";
import { setTimeout as sleep } from "node:timers/promises";
import { cbor } from "../../src/shared/cbor.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { MirrorThread } from "../../src/main-thread/state-sync-host.js";
import type { FromEngine, ToEngine } from "../../src/workers/state-sync/messages.js";
import { stateSyncCfg } from "../helpers/state-sync-pair.js";

/** A fresh cachedir per run (an empty manifest: the scan hashes and writes every file), the roots shared. */
function cfgOf(root: string, run: number): MasterConfig {
  return { ...stateSyncCfg("m1", root), cachedir: path.join(root, `cache-${run}`) } as MasterConfig;
}

test("a state-sync thread stopped in the middle of roots scans closes its manifests and exits by itself, never terminated", { timeout: 120_000 }, async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-statesync-stop-"));
  try {
    const files = 3000;
    for (let d = 0; d < files / 500; d++) {
      const dir = path.join(root, "srv", "salt", `d${d}`);
      mkdirSync(dir, { recursive: true });
      for (let i = 0; i < 500; i++) writeFileSync(path.join(dir, `f${i}.sls`), `item ${d}/${i}\n`);
    }
    const outcomes: string[] = [];
    let answeredBeforeStop = 0;
    for (let run = 0; run < 6; run++) {
      // a fresh cachedir each run: its manifest is empty, so the scan hashes and writes every file
      const { port1, port2 } = new MessageChannel();
      const thread = new MirrorThread(cfgOf(root, run), undefined, () => port2);
      await thread.newestJobMs(); // the thread is up
      let answered = false;
      port1.on("message", (m: FromEngine) => {
        if (m.k === "res" || m.k === "err") answered = true;
      });
      // a peer asks for the first manifest page: the engine scans the roots first
      port1.postMessage({ k: "in", id: 1, from: "p1", p: cbor.encode({ op: "manifest", ch: "file_roots", n: 1000 }) as Uint8Array, req: true } satisfies ToEngine);
      await sleep(50 + run * 80);
      if (answered) answeredBeforeStop++;
      outcomes.push(await thread.stop());
      port1.close();
    }
    assert.deepEqual(outcomes, Array(6).fill("closed"), "every thread closed and exited by itself");
    assert.ok(answeredBeforeStop < 6, "at least one stop landed in the middle of a scan");

    // the manifests were closed cleanly: a thread started on a stopped one's directory scans and serves them
    const { port1, port2 } = new MessageChannel();
    const thread = new MirrorThread(cfgOf(root, 0), undefined, () => port2);
    const page = await new Promise<{ entries: unknown[]; more: boolean }>((resolve, reject) => {
      port1.on("message", (m: FromEngine) => {
        if (m.k === "res") resolve(cbor.decode(m.v as Uint8Array) as { entries: unknown[]; more: boolean });
        else if (m.k === "err") reject(new Error(m.text));
      });
      port1.postMessage({ k: "in", id: 1, from: "p1", p: cbor.encode({ op: "manifest", ch: "file_roots", n: 1000 }) as Uint8Array, req: true } satisfies ToEngine);
    });
    assert.equal(page.entries.length, 1000);
    assert.equal(page.more, true);
    assert.equal(await thread.stop(), "closed");
    port1.close();
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
