/**
 * cluster.shed_unowned's core over a real job cache (LMDB in a temp dir): Salt's result shape, a dry run that
 * counts exactly what the real run drops, the returns subbank of each unowned jid, ownership by the ring's
 * policy (nothing shed under "self", none without a slot table, skipped outside the ring), Salt's errors for
 * banks/driver/template brine does not have, and the status file.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { SHED_BANKS, SHED_SUBBANK_TEMPLATE, readShedStatus, shedOwnership, shedUnowned, writeShedStatus, type ShedArgs } from "../../src/lib/store/shed.js";

const JIDS = ["20261125000000000001", "20261125000000000002", "20261125000000000003", "20261125000000000004"];
/** m1 owns jids 1 and 3 (with m2), m2 owns 2 and 4 alone */
const OWNERS: Record<string, string[]> = { [JIDS[0]!]: ["m1", "m2"], [JIDS[1]!]: ["m2"], [JIDS[2]!]: ["m2", "m1"], [JIDS[3]!]: ["m2"] };
const RECORD = { founding_voters: ["m1", "m2"], status: "active" };

test("shed_unowned: dry run counts what the real run drops, returns subbanks included; policy decides ownership", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-shed-"));
  try {
    const store = openStore({ cachedir: dir, brine_lmdb_map_bytes: 64 * 1024 * 1024 });
    const jobs = new JobCache(store);
    for (const jid of JIDS) {
      await jobs.saveLoad(jid, { jid, fun: "test.ping" }, ["a", "b"]);
      await jobs.saveReturn(jid, "a", { return: true }, true);
      await jobs.saveReturn(jid, "b", { return: true }, true);
    }
    await jobs.markNocache(JIDS[1]!);
    const args: ShedArgs = { ring: "jobs", banks: [...SHED_BANKS], subbankTemplate: SHED_SUBBANK_TEMPLATE, driver: null, dryRun: true };
    const own = shedOwnership({ ring: "jobs", self: "m1", record: RECORD, members: "voters", owners: (k) => OWNERS[k]!, tableReady: true });

    const dry = await shedUnowned(store, args, own);
    // loads 4 (2 unowned), minions 4 (2), endtimes 4 (2), nocache 1 (1 unowned)
    assert.deepEqual(dry, { status: "ok", ring: "jobs", dropped: 7, kept: 6, subbanks_dropped: 2, dry_run: true });
    assert.equal(jobs.listJids().length, 4, "a dry run removes nothing");

    const real = await shedUnowned(store, { ...args, dryRun: false }, own);
    assert.deepEqual(real, { ...dry, dry_run: false }, "the real run drops exactly what the dry run counted");
    assert.deepEqual(jobs.listJids(), [JIDS[0], JIDS[2]]);
    assert.equal(jobs.isNocache(JIDS[1]!), false);
    assert.deepEqual(jobs.returnsFor(JIDS[1]!), {}, "the unowned jid's returns are gone");
    assert.deepEqual(Object.keys(jobs.returnsFor(JIDS[0]!)), ["a", "b"], "an owned jid keeps its returns");
    const again = await shedUnowned(store, { ...args, dryRun: false }, own);
    assert.deepEqual([again.dropped, again.kept, again.subbanks_dropped], [0, 6, 0], "a second run has nothing left to shed");

    // policy "self": every voter owns every key; no slot table: nothing decided, nothing shed
    const self = shedOwnership({ ring: "jobs", self: "m2", record: RECORD, members: "self", owners: () => [], tableReady: false });
    assert.equal((await shedUnowned(store, args, self)).dropped, 0);
    const noTable = shedOwnership({ ring: "jobs", self: "m1", record: RECORD, members: "voters", owners: () => [], tableReady: false });
    assert.deepEqual(await shedUnowned(store, args, noTable), { status: "skipped", ring: "jobs", dropped: 0, kept: 0, subbanks_dropped: 0, dry_run: true, reason: "ring jobs has no slot table on m1 yet" });
    const outside = shedOwnership({ ring: "jobs", self: "m3", record: RECORD, members: "voters", owners: () => ["m1"], tableReady: true });
    assert.equal((await shedUnowned(store, args, outside)).reason, "m3 is not a voter of ring jobs");
    const gone = shedOwnership({ ring: "jobs", self: "m1", record: { ...RECORD, status: "destroyed" }, members: "voters", owners: () => ["m1"], tableReady: true });
    assert.equal((await shedUnowned(store, args, gone)).reason, "ring jobs is not active");

    // what brine's job cache does not have is Salt's status "error", not an exception
    assert.match((await shedUnowned(store, { ...args, banks: ["grains"] }, own)).error!, /unknown bank grains/);
    assert.match((await shedUnowned(store, { ...args, driver: "mmap_cache" }, own)).error!, /driver mmap_cache/);
    assert.match((await shedUnowned(store, { ...args, subbankTemplate: "x/{key}" }, own)).error!, /subbank_template x\/\{key\}/);
    store.root.close();

    // the status file: missing, written (result + source + updated_at + node_id), unreadable
    assert.deepEqual(readShedStatus(dir), { status: "missing", path: path.join(dir, "cluster-shed-status.json") });
    writeShedStatus(dir, real, "peer_request", "m1");
    const st = readShedStatus(dir);
    assert.deepEqual({ ...st, updated_at: 0 }, { ...real, source: "peer_request", node_id: "m1", updated_at: 0 });
    assert.ok(Math.abs((st.updated_at as number) - Date.now() / 1000) < 60);
    writeFileSync(path.join(dir, "cluster-shed-status.json"), "{nope");
    assert.equal(readShedStatus(dir).status, "error");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
