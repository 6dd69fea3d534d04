/**
 * Protocol v3 marks across masters (issue #13): a mark one master makes is a cache-sync record (`v3`), checked
 * strictly, written by a peer's mirror thread, and carried by the bulk sync of a master that was away (only the
 * marks made since it last pulled, and only when it asks for them: an older master is never sent the bank).
 * The cluster as a whole: test/cluster-e2e/v3-marks.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, utimesSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { V3Marks } from "../../src/lib/store/v3-marks.js";
import { checkRecord, decodeRecords, encodeRecords, stampFutureMsMax } from "../../src/shared/sync-records.js";
import { SyncStore, decodePull, encodePull, type SyncCursor } from "../../src/workers/state-sync/sync-store.js";

const NOW = 1_800_000_000_000;

function tmpStore(): { dir: string; store: Store; cfg: ReturnType<typeof masterDefaults> } {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-v3rec-"));
  const cfg = { ...masterDefaults(), cachedir: dir };
  return { dir, store: openStore(cfg), cfg };
}

test("a peer's v3 mark record is taken only with a valid minion id and time", () => {
  assert.deepEqual(checkRecord({ k: "v3", id: "web1", t: NOW, extra: 1 }, NOW), { k: "v3", id: "web1", t: NOW });
  const bad: [string, Record<string, unknown>][] = [
    ["path as id", { k: "v3", id: "../sessions/x", t: NOW }],
    ["empty id", { k: "v3", id: "", t: NOW }],
    ["dot-dot", { k: "v3", id: "..", t: NOW }],
    ["no time", { k: "v3", id: "web1" }],
    ["float time", { k: "v3", id: "web1", t: NOW + 0.5 }],
    ["time far in the future", { k: "v3", id: "web1", t: NOW + stampFutureMsMax + 1 }],
  ];
  for (const [what, rec] of bad) assert.equal(typeof checkRecord(rec, NOW), "string", what);
  const d = decodeRecords(encodeRecords([{ k: "v3", id: "a", t: NOW }]), NOW);
  assert.deepEqual(d, { records: [{ k: "v3", id: "a", t: NOW }], refused: 0 });
  assert.equal(decodePull(encodePull({ cursor: { bank: "v3", after: "a" }, since: 0, v3: true })) instanceof Object, true);
  assert.equal(typeof decodePull(encodePull({ cursor: { bank: "data" }, since: 0, v3: "yes" as unknown as boolean })), "string");
});

test("a mark is reported once, when this master makes it; a peer's mark is written without being reported again", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-v3track-"));
  try {
    const seen: string[] = [];
    const marks = new V3Marks(dir, () => NOW);
    marks.track((id, t) => seen.push(`${id}@${t}`));
    marks.mark("m1");
    marks.mark("m1");
    assert.equal(new V3Marks(dir).applyPeer("m2"), true);
    assert.equal(new V3Marks(dir).applyPeer("m2"), false, "already there");
    assert.equal(new V3Marks(dir).applyPeer("../x"), false, "an invalid id is never a file name");
    const again = new V3Marks(dir, () => NOW);
    again.track((id) => seen.push(`again ${id}`));
    again.mark("m1"); // another thread, or after a restart: the file is there already
    again.mark("m2");
    assert.deepEqual(seen, [`m1@${NOW}`]);
    assert.equal(new V3Marks(dir).has("m2"), true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("records from a peer mark the minion here; a bulk sync carries the marks made since, in chunks, only when asked", async () => {
  const src = tmpStore();
  const dst = tmpStore();
  try {
    // the real clock: a bulk sync's marks carry their files' mtimes, which a fixed "now" falls behind one day (at
    // 1,800,000,000,000, mid-January 2027, they would be refused as made in the future)
    const from = new SyncStore(src.cfg, src.store, "m1", () => Date.now());
    const to = new SyncStore(dst.cfg, dst.store, "m2", () => Date.now());
    const t = Date.now();
    const live = await to.apply("m1", [encodeRecords([{ k: "v3", id: "live-1", t }, { k: "v3", id: "live-1", t }])]);
    assert.deepEqual(live, { stored: 1, refused: 0 });
    assert.ok(existsSync(path.join(dst.dir, "minion-v3", "live-1")));
    assert.equal(new V3Marks(dst.dir).has("live-1"), true, "a request worker of the receiver sees the mark");

    const ids = Array.from({ length: 300 }, (_, i) => `bulk-${String(i).padStart(3, "0")}`);
    for (const id of ids) from.v3Marks.applyPeer(id);
    // one mark made long ago: not sent to a master that pulled since
    const old = path.join(src.dir, "minion-v3", "bulk-000");
    utimesSync(old, new Date(Date.now() - 3_600_000), new Date(Date.now() - 3_600_000));

    const pull = async (since: number, v3: boolean) => {
      let cursor: SyncCursor | null = { bank: "data" };
      let chunks = 0;
      while (cursor) {
        const r = await to.applyChunk("m1", from.serve(encodePull({ cursor, since, ...(v3 ? { v3: true as const } : {}) })));
        assert.ok(!("error" in r), JSON.stringify(r));
        cursor = r.next;
        chunks++;
      }
      return chunks;
    };
    assert.equal(await pull(0, false), 1);
    assert.equal(new V3Marks(dst.dir).has("bulk-001"), false, "no mark travelled without `v3` (an older master)");
    assert.ok((await pull(Date.now() - 60_000, true)) >= 2, "300 marks take more than one chunk");
    for (const id of ids.slice(1)) assert.equal(new V3Marks(dst.dir).has(id), true, id);
    assert.equal(new V3Marks(dst.dir).has("bulk-000"), false, "a mark made before `since` is not sent");
    await pull(0, true);
    assert.equal(new V3Marks(dst.dir).has("bulk-000"), true, "a first pull (since 0) sends every mark");
  } finally {
    await src.store.close();
    await dst.store.close();
    rmSync(src.dir, { recursive: true, force: true });
    rmSync(dst.dir, { recursive: true, force: true });
  }
});
