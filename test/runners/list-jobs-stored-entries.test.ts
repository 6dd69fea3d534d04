/**
 * jobs.list_jobs answers from the list entries the job cache stores beside each load (job-listing.ts): the answer
 * is those bytes joined, and decodes to what formatting every load gives (Salt's format_jid_instance, Metadata
 * included); a load stored without an entry is listed from the load and its entry stored then; an entry whose load
 * is gone is not listed. And keep_jobs pruning goes in bounded passes.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { runnerHarness } from "./helpers.js";
import { formatJob, JobMapWriter, withEndtime, encodeListEntry } from "../../src/lib/store/job-listing.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import { prunePassRecordsMax, JobCache } from "../../src/lib/store/job-cache.js";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { formatJid } from "../../src/shared/protocol/jid.js";

const jidOf = (i: number) => `2026112512${String(i).padStart(10, "0")}`;

test("list_jobs is the stored entries: the same map as formatting every load, Metadata as Salt shows it, EndTime when kept", async () => {
  const h = runnerHarness({ cfg: { job_cache_store_endtime: true } });
  try {
    const loads: Record<string, Record<string, unknown>> = {
      [jidOf(1)]: { fun: "test.ping", arg: [], tgt: "*", tgt_type: "glob", user: "root" },
      [jidOf(2)]: { fun: "state.apply", arg: ["web", { __kwarg__: true, test: true }], tgt: ["a", "b"], tgt_type: "list", user: "sudo_ops", metadata: { ticket: 7 } },
      [jidOf(3)]: { fun: "cmd.run", arg: ["ls"], tgt: "web*", kwargs: { metadata: { by: "ci" } } },
      [jidOf(4)]: { jid: jidOf(4) }, // nothing but a jid: Salt's defaults
    };
    for (const [jid, load] of Object.entries(loads)) await h.ctx.jobs.saveLoad(jid, load, ["a"]);
    await h.ctx.jobs.setEndtime(jidOf(2), "2026, Nov 25 12:00:09.000000");
    const listed = (await h.run("jobs.list_jobs")) as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(listed), Object.keys(loads), "every job, oldest first");
    assert.deepEqual(listed[jidOf(2)], { ...formatJob(jidOf(2), loads[jidOf(2)]!), EndTime: "2026, Nov 25 12:00:09.000000" });
    assert.deepEqual(listed[jidOf(2)]!.Metadata, { ticket: 7 });
    assert.deepEqual(listed[jidOf(3)]!.Metadata, { by: "ci" }, "kwargs.metadata when the load has no metadata (format_job_instance)");
    assert.equal("Metadata" in listed[jidOf(1)]!, false);
    assert.deepEqual(listed[jidOf(4)], { Function: "unknown-function", Arguments: [], Target: "unknown-target", "Target-type": "list", User: "root", StartTime: "2026, Nov 25 12:00:00.000004" });
    assert.deepEqual(Object.keys(listed[jidOf(2)]!), ["Function", "Arguments", "Target", "Target-type", "User", "Metadata", "StartTime", "EndTime"], "Salt's key order");
  } finally {
    await h.close();
  }
});

test("a load stored without its entry is listed from the load and its entry stored; an entry without a load is not listed", async () => {
  const h = runnerHarness();
  try {
    await h.ctx.jobs.saveLoad(jidOf(1), { fun: "test.ping", tgt: "*" });
    await h.store.loads.put(jidOf(2), { fun: "test.echo", arg: ["raw"], tgt: "m" }); // as a raw bank copy writes it
    await h.ctx.jobs.saveLoad(jidOf(3), { fun: "test.ping", tgt: "*" });
    await h.store.loads.remove(jidOf(3)); // as a shed removes it
    assert.equal(h.store.listed.get(jidOf(2)), undefined);
    const listed = (await h.run("jobs.list_jobs")) as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(listed), [jidOf(1), jidOf(2)]);
    assert.deepEqual(listed[jidOf(2)]!.Arguments, ["raw"]);
    assert.deepEqual(decodeWire(h.store.listed.get(jidOf(2))!), formatJob(jidOf(2), { fun: "test.echo", arg: ["raw"], tgt: "m" }), "the made entry is stored");
    // an entry that is not a byte string (damaged) is made again from its load
    await h.store.listed.put(jidOf(1), "not bytes" as unknown as Uint8Array);
    assert.equal(((await h.run("jobs.list_jobs")) as Record<string, Record<string, unknown>>)[jidOf(1)]!.Function, "test.ping");
  } finally {
    await h.close();
  }
});

test("the job map writer grows past its first buffer and its bytes decode to the map of the entries", () => {
  const w = new JobMapWriter(64);
  const want: Record<string, unknown> = {};
  for (let i = 0; i < 500; i++) {
    const jid = i === 7 ? "jid-ünïcode" : jidOf(i);
    const load = { fun: "test.arg", arg: ["x".repeat(i % 40)], tgt: `m${i}` };
    const entry = encodeListEntry(jid, load);
    const padded = Buffer.concat([Buffer.from([1, 2, 3]), entry]);
    w.add(jid, padded, 3);
    want[jid] = formatJob(jid, load);
  }
  assert.deepEqual(decodeWire(w.finish()), want);
  assert.deepEqual(decodeWire(withEndtime(encodeListEntry(jidOf(1), {}), "then")), { ...formatJob(jidOf(1), {}), EndTime: "then" });
});

test("keep_jobs pruning removes at most prunePassRecordsMax records per pass, every record of an old job in the end, nothing of a new one", async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-prune-"));
  const store = openStore({ cachedir: root, brine_lmdb_map_bytes: masterDefaults().brine_lmdb_map_bytes });
  const jobs = new JobCache(store);
  const now = Date.UTC(2026, 10, 25, 12, 0, 0);
  try {
    const old = Array.from({ length: 30 }, (_, i) => formatJid(now - 3 * 86400_000, i));
    const fresh = formatJid(now - 60_000, 0);
    for (const jid of [...old, fresh]) {
      await jobs.saveLoad(jid, { fun: "test.ping", tgt: "*" }, ["m0"]);
      await jobs.setEndtime(jid, "end");
      await Promise.all(Array.from({ length: 60 }, (_, m) => jobs.addReturn(jid, `m${m}`, { return: true })));
    }
    const oldRecords = old.length * (60 + 4); // returns, minions, end time, listed entry, load
    const passes: number[] = [];
    for (let n = -1; n !== 0; ) passes.push((n = await jobs.cleanup(86400, now, () => 0))); // a clock that stands still: bounded by count only
    assert.ok(passes.every((n) => n <= prunePassRecordsMax), `passes ${passes.join(",")}`);
    assert.equal(passes.reduce((a, b) => a + b, 0), oldRecords);
    assert.ok(passes.length > Math.floor(oldRecords / prunePassRecordsMax), "more than one pass");
    for (const jid of old) {
      assert.equal(jobs.hasLoad(jid), false);
      assert.deepEqual(jobs.returnsFor(jid), {});
      assert.equal(store.listed.get(jid), undefined);
      assert.equal(jobs.endtime(jid), undefined);
    }
    assert.equal(Object.keys(jobs.returnsFor(fresh)).length, 60);
    assert.equal(jobs.endtime(fresh), "end");
    assert.ok(store.listed.get(fresh));
  } finally {
    await store.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("with job_cache_store_endtime, list_jobs reads the end times in one walk beside the entries, none per job", async () => {
  const h = runnerHarness({ cfg: { job_cache_store_endtime: true } });
  try {
    for (let i = 1; i <= 40; i++) {
      await h.ctx.jobs.saveLoad(jidOf(i), { fun: "test.ping", tgt: "*" });
      if (i % 3 === 0) await h.ctx.jobs.setEndtime(jidOf(i), `end ${i}`);
    }
    await h.ctx.jobs.setEndtime(jidOf(99), "an end time without a job"); // skipped by the walk, not listed
    let pointReads = 0;
    const get = h.store.endtimes.get.bind(h.store.endtimes);
    h.store.endtimes.get = (k: string) => (pointReads++, get(k));
    const listed = (await h.run("jobs.list_jobs")) as Record<string, Record<string, unknown>>;
    assert.equal(pointReads, 0, "no end time read per job");
    assert.equal(Object.keys(listed).length, 40);
    for (let i = 1; i <= 40; i++) assert.equal(listed[jidOf(i)]!.EndTime, i % 3 === 0 ? `end ${i}` : undefined, `job ${i}`);
  } finally {
    await h.close();
  }
});
