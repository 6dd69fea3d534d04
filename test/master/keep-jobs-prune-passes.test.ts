/**
 * keep_jobs pruning in short passes (job-cache.ts): a pass is bounded by records and by the time it spends choosing
 * them, the prune pauses between passes as long as the last one took, and a prune cut short (the master stopped
 * mid-way) is finished by the next one with nothing of an old job left behind in any bank.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { JobCache, prunePassRecordsMax, prunePauseMs, prunePauseMsMin, type PruneClock } from "../../src/lib/store/job-cache.js";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { formatJid } from "../../src/shared/protocol/jid.js";

const now = Date.UTC(2026, 10, 25, 12, 0, 0);
const DAY_S = 86_400;

function tempStore(): { root: string; open(): Store } {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-prune-passes-"));
  return { root, open: () => openStore({ cachedir: root, brine_lmdb_map_bytes: masterDefaults().brine_lmdb_map_bytes }) };
}

/** `old` jobs three days old and one of a minute ago, each with a load, minions, an end time, a nocache mark and `returns` returns. */
async function fill(jobs: JobCache, old: number, returns: number): Promise<{ old: string[]; fresh: string }> {
  const oldJids = Array.from({ length: old }, (_, i) => formatJid(now - 3 * DAY_S * 1000, i));
  const fresh = formatJid(now - 60_000, 0);
  for (const jid of [...oldJids, fresh]) {
    await jobs.saveLoad(jid, { fun: "test.ping", tgt: "*" }, ["m0", "m1"]);
    await jobs.setEndtime(jid, "end");
    await jobs.markNocache(jid);
    await Promise.all(Array.from({ length: returns }, (_, m) => jobs.addReturn(jid, `m${m}`, { return: true })));
  }
  return { old: oldJids, fresh };
}

/** Every key of every job bank whose jid is `jid`'s. */
function keysOf(store: Store, jid: string): string[] {
  const banks = { returns: store.returns, handoff: store.handoff, minions: store.minions, endtimes: store.endtimes, nocache: store.nocache, listed: store.listed, loads: store.loads };
  const out: string[] = [];
  for (const [name, db] of Object.entries(banks)) {
    for (const key of (db as Store["returns"]).getKeys()) if (key === jid || key.startsWith(`${jid}/`)) out.push(`${name}:${key}`);
  }
  return out;
}

test("prunePauseMs waits as long as the last pass took, never less than prunePauseMsMin", () => {
  const table: [number, number][] = [
    [0, prunePauseMsMin],
    [prunePauseMsMin / 2, prunePauseMsMin],
    [7.5, 7.5],
    [250, 250],
    [Number.NaN, prunePauseMsMin],
    [-3, prunePauseMsMin],
  ];
  for (const [passMs, want] of table) assert.equal(prunePauseMs(passMs), want, `after a pass of ${passMs} ms`);
});

test("a prune pass stops choosing records once its time is spent, yet never ends empty while old records are left", async () => {
  const t = tempStore();
  const store = t.open();
  const jobs = new JobCache(store);
  try {
    const { old, fresh } = await fill(jobs, 3, 40);
    // a clock that moves 1 ms at each read: a pass's 2 ms are spent after a couple of records
    let ms = 0;
    const slow = () => ms++;
    const first = await jobs.cleanup(DAY_S, now, slow);
    assert.ok(first >= 1 && first < 10, `a pass on a slow clock removed ${first}`);
    // a clock that jumps 100 ms at each read: one record per pass, and the passes still get through
    let jumps = 0;
    const jumping = () => (jumps += 100);
    const passes: number[] = [];
    for (let n = -1; n !== 0 && passes.length < 1000; ) passes.push((n = await jobs.cleanup(DAY_S, now, jumping)));
    assert.equal(passes.at(-1), 0, "the prune ended");
    assert.ok(passes.slice(0, -1).every((n) => n === 1), `one record a pass: ${passes.join(",")}`);
    for (const jid of old) assert.deepEqual(keysOf(store, jid), [], `nothing of ${jid} left`);
    assert.equal(Object.keys(jobs.returnsFor(fresh)).length, 40);
  } finally {
    await store.close();
    rmSync(t.root, { recursive: true, force: true });
  }
});

test("prune pauses after each pass as long as that pass took and reports its passes and records", async () => {
  const t = tempStore();
  const store = t.open();
  const jobs = new JobCache(store);
  try {
    await fill(jobs, 10, 60); // 10 × (60 returns + minions + end time + nocache + list entry + load) = 650 records
    let ms = 0;
    const pauses: number[] = [];
    const clock: PruneClock = {
      now: () => ms, // stands still inside a pass: passes are bounded by count
      pause: async (p) => {
        pauses.push(p);
        ms += p;
      },
    };
    // each pass "takes" 5 ms: the clock moves when the pass's commit is awaited
    const realCleanup = jobs.cleanup.bind(jobs);
    jobs.cleanup = async (keep, nowMs, clockNow) => {
      const n = await realCleanup(keep, nowMs, clockNow);
      ms += 5;
      return n;
    };
    const r = await jobs.prune(DAY_S, now, clock);
    assert.equal(r.removed, 650);
    assert.equal(r.passes, Math.ceil(650 / prunePassRecordsMax) + 1, "full passes, then one that finds nothing");
    assert.deepEqual(pauses, Array(r.passes - 1).fill(5), "a pause after every pass that removed something, none after the last");
  } finally {
    await store.close();
    rmSync(t.root, { recursive: true, force: true });
  }
});

test("a prune cut short by a stop is finished by the next: no return, list entry, end time, minions, nocache or hand-off entry of an old job is left", async () => {
  const t = tempStore();
  let store = t.open();
  // jobs placed on a ring: every record also has a hand-off outbox entry, which the prune removes too
  let jobs = new JobCache(store, () => true);
  let fresh = "";
  let old: string[] = [];
  try {
    ({ old, fresh } = await fill(jobs, 12, 50));
    // three passes, then the master stops
    for (let i = 0; i < 3; i++) assert.ok((await jobs.cleanup(DAY_S, now, () => 0)) > 0);
    assert.ok(old.some((jid) => keysOf(store, jid).length > 0), "the prune was cut short");
    assert.ok(old.every((jid) => jobs.hasLoad(jid)), "loads go last: every old job still has its load");
    await store.close();
    store = t.open();
    jobs = new JobCache(store, () => true);
    const r = await jobs.prune(DAY_S, now, { now: () => 0, pause: async () => undefined });
    assert.ok(r.removed > 0);
    for (const jid of old) assert.deepEqual(keysOf(store, jid), [], `nothing of ${jid} left`);
    // no orphans: every list entry and every return belongs to a job that has its load
    const loads = new Set(store.loads.getKeys());
    for (const jid of store.listed.getKeys()) assert.ok(loads.has(jid), `list entry ${jid} has its load`);
    for (const key of store.returns.getKeys()) assert.ok(loads.has(key.slice(0, key.indexOf("/"))), `return ${key} has its load`);
    assert.equal(Object.keys(jobs.returnsFor(fresh)).length, 50);
    assert.deepEqual(jobs.expectedMinions(fresh), ["m0", "m1"]);
    assert.equal(jobs.endtime(fresh), "end");
    assert.equal(jobs.isNocache(fresh), true);
  } finally {
    await store.close();
    rmSync(t.root, { recursive: true, force: true });
  }
});
