/** The minion data cache keeps a peer's record only when it is newer; a removal is not undone by an older copy. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { MinionCache } from "../../src/lib/store/minion-cache.js";
import type { DataRecord, MineRecord } from "../../src/shared/sync-records.js";

test("peer records arriving out of order leave the newest data, and a tombstone keeps old data from coming back", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-lww-"));
  const store = openStore({ ...masterDefaults(), cachedir: dir });
  try {
    let now = 1000;
    const sent: (DataRecord | MineRecord)[] = [];
    const cache = new MinionCache(store, () => now);
    cache.track("m1", (r) => sent.push(r));
    await cache.put("web1", { grains: { os: "Debian" } });
    assert.deepEqual(sent.map((r) => [r.k, r.id, r.t, r.o]), [["data", "web1", 1000, "m1"]], "a local write is reported with its stamp");

    assert.equal(await cache.applyPeer({ k: "data", id: "web1", t: 2000, o: "m2", v: { grains: { os: "Ubuntu" } } }), true);
    assert.equal(await cache.applyPeer({ k: "data", id: "web1", t: 1500, o: "m3", v: { grains: { os: "Arch" } } }), false, "older than what is held");
    assert.deepEqual(cache.get("web1")?.grains, { os: "Ubuntu" });

    now = 3000;
    await cache.remove("web1");
    assert.equal(cache.get("web1"), undefined);
    assert.equal(await cache.applyPeer({ k: "data", id: "web1", t: 2500, o: "m2", v: { grains: { os: "Ubuntu" } } }), false, "the tombstone is newer");
    assert.equal(cache.get("web1"), undefined);

    const { records } = cache.dump("data", undefined, 10, 0, "m1");
    assert.deepEqual(records, [{ k: "data", id: "web1", t: 3000, o: "m1", v: null }], "the bulk sync carries the tombstone");
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
