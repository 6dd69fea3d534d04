/**
 * The mirror thread's port (src/main-thread/state-sync-host.ts ↔ src/workers/state-sync/worker.ts) in the one
 * port-call style: answers come back to the call that asked, a peer's chunk that cannot be stored is a coded
 * error (MIRROR_BAD_CHUNK) instead of a bare Error, and the thread keeps answering after it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { MirrorThread } from "../../src/main-thread/state-sync-host.js";
import { configureLogging } from "../../src/shared/log.js";

test("the mirror thread answers each call, refuses an undecodable chunk with its code, and keeps serving", { timeout: 60_000 }, async () => {
  configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-mirror-"));
  const mirror = new MirrorThread({ ...masterDefaults(), id: "m1", cluster_id: "c", cachedir: path.join(dir, "cache") });
  try {
    assert.equal(await mirror.newestJobMs(), undefined, "an empty job cache has no newest job");
    await assert.rejects(mirror.applyChunk("m2", new Uint8Array([0xff, 0x00, 0x13])), (e: Error & { code?: string }) => e.code === "MIRROR_BAD_CHUNK" && /undecodable|not a map/.test(e.message));
    const [a, b] = await Promise.all([mirror.newestJobMs(), mirror.applyChunk("m2", new Uint8Array([0x01])).catch((e: { code?: string }) => e.code)]);
    assert.equal(a, undefined);
    assert.equal(b, "MIRROR_BAD_CHUNK");
    await mirror.flushed();
  } finally {
    await mirror.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
