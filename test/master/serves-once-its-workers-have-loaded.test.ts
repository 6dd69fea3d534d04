/**
 * A master says it serves only once its request workers have loaded. Each worker opens the job cache's LMDB
 * databases when it starts, and lmdb-js opens a named database in a write transaction of its own, so a worker
 * that starts while another process holds the environment's write lock waits for it. The master used to
 * resolve `start()` (and print "listening") before its workers had run their first line: its first requests
 * then waited behind that lock, which made the slow-request test fail about one full-suite run in three.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestMaster } from "../helpers/master.js";
import { holdWriteLock } from "../helpers/lmdb-lock.js";

const LOCK_MS = 5000;

test("start() resolves only after the request workers opened the job cache, even behind another process's write lock", { timeout: 120_000 }, async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-t-"));
  const lmdb = path.join(root, "cache", "brine-lmdb");
  mkdirSync(lmdb, { recursive: true });
  const holder = await holdWriteLock(lmdb, LOCK_MS);
  let released = false;
  const exited = new Promise<void>((r) => holder.on("exit", () => ((released = true), r())));
  let tm: Awaited<ReturnType<typeof startTestMaster>> | undefined;
  try {
    tm = await startTestMaster({ worker_threads: 2 }, root);
    // the workers could not open their databases before the lock went: start() waited for them
    assert.equal(released, true, "start() resolved while the workers were still waiting to open LMDB");
    assert.deepEqual((tm.server as unknown as { lanes: { threads: unknown } }).lanes.threads, { clear: 1, req: 1 });
  } finally {
    holder.kill();
    await exited;
    await tm?.stop();
  }
});
