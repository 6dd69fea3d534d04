/**
 * A stored return is on disk before its reply: the job cache's write resolves only after the LMDB
 * transaction holding it has been flushed (fsync), not merely committed. lmdb-js commits and flushes in
 * separate steps (overlappingSync), so this checks the order of the two events for the same write.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { formatJid } from "../../src/shared/protocol/jid.js";

test("saveReturn resolves after the write's transaction is flushed to disk", async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-durable-"));
  const store = openStore({ cachedir: root, brine_lmdb_map_bytes: masterDefaults().brine_lmdb_map_bytes });
  const jobs = new JobCache(store);
  for (let round = 0; round < 20; round++) {
    const jid = formatJid(Date.now(), round);
    const order: string[] = [];
    const saved = jobs.saveReturn(jid, "m1", { return: round }, round % 2 === 0).then((ok) => {
      order.push("saved");
      return ok;
    });
    // the flush of the transaction that now holds this write (lmdb-js: resolves once it is on disk)
    const flushed = Promise.resolve(store.root.flushed).then(() => order.push("flushed"));
    assert.equal(await saved, true);
    await flushed;
    assert.deepEqual(order, ["flushed", "saved"], `round ${round}: the reply-side promise came before the fsync`);
  }
  await store.close();
  rmSync(root, { recursive: true, force: true });
});
