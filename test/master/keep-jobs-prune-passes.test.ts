/**
 * keep_jobs pruning (job-cache.ts): the cutoff is stored first and hides every older job from every reader; the
 * records are then deleted alongside return writes (in their transactions: no commit of the prune's own while
 * returns are stored) or, when none come, in short passes of its own, each bounded by records and by the time it
 * spends choosing them; a prune cut short (the master stopped mid-way) leaves its jobs hidden, and is finished by
 * the next one with nothing of an old job left behind in any bank.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { JobCache, prunePassRecordsMax, prunePauseMs, prunePauseMsMin, pruneStep, reclaimAlongMax, reclaimCheckMs, type PruneClock } from "../../src/lib/store/job-cache.js";
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
    [prunePauseMsMin + 7.5, prunePauseMsMin + 7.5],
    [250, 250],
    [Number.NaN, prunePauseMsMin],
    [-3, prunePauseMsMin],
  ];
  for (const [passMs, want] of table) assert.equal(prunePauseMs(passMs), want, `after a pass of ${passMs} ms`);
});

test("pruneStep: a pass of its own only when no return came to its thread and nothing moved during the pause (or the cutoff is not stored), done once nothing is left", () => {
  const table: [string, string, boolean, boolean, ReturnType<typeof pruneStep>][] = [
    ["0:a ", "0:a ", false, false, "pass"], // the cutoff not stored yet (no return came to carry it)
    ["0:a ", "0:a ", false, true, "wait"], // a return of this thread carries it (its commit may be slower than the pause)
    ["0:a ", "", false, false, "pass"],
    ["0:a ", "0:b ", true, false, "wait"], // another thread's returns deleted records during the pause
    ["0:a ", "6:z ", true, false, "wait"],
    ["0:a ", "0:a ", true, true, "wait"], // this thread's returns, held up by the disk: no pass to queue behind
    ["0:a ", "0:a ", true, false, "pass"], // nothing moved, no return: no returns flowing
    ["0:a ", "", true, true, "done"],
    ["0:a ", "", true, false, "done"],
    ["", "", true, false, "done"],
  ];
  for (const [before, after, stored, returns, want] of table) assert.equal(pruneStep(before, after, stored, returns), want, `${JSON.stringify(before)} -> ${JSON.stringify(after)}, stored ${stored}, returns here ${returns}`);
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

test("with no returns stored, the prune makes passes of its own, pausing after each as long as it took", async () => {
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
    // each pass "takes" longer than the shortest pause: the clock moves when the pass's commit is awaited
    const passMs = prunePauseMsMin + 20;
    const realCleanup = jobs.cleanup.bind(jobs);
    jobs.cleanup = async (keep, nowMs, clockNow) => {
      const n = await realCleanup(keep, nowMs, clockNow);
      ms += passMs;
      return n;
    };
    const r = await jobs.prune(DAY_S, now, clock);
    assert.deepEqual(r, { removed: 650, passes: Math.ceil(650 / prunePassRecordsMax), alongside: 0 });
    assert.deepEqual(pauses, [prunePauseMsMin, ...Array(r.passes).fill(passMs)], "a pause before the first look, then one as long as each pass");
  } finally {
    await store.close();
    rmSync(t.root, { recursive: true, force: true });
  }
});

test("while returns are stored the prune commits nothing of its own: the cutoff and every old record go in the returns' transactions", async () => {
  const t = tempStore();
  const store = t.open();
  const jobs = new JobCache(store);
  try {
    const { old, fresh } = await fill(jobs, 10, 60);
    let n = 0;
    // a return stored durably in every pause, as a request worker stores them while its cleanup task runs
    const clock: PruneClock = {
      now: () => 0,
      pause: async () => {
        assert.equal(await jobs.saveReturn(fresh, `late-${n++}`, { return: true }, false), true);
      },
    };
    let ownCommits = 0;
    const realCleanup = jobs.cleanup.bind(jobs);
    jobs.cleanup = async (...a) => (ownCommits++, realCleanup(...a));
    const r = await jobs.prune(DAY_S, now, clock);
    assert.equal(ownCommits, 0, "no pass of its own");
    assert.deepEqual(r, { removed: 0, passes: 0, alongside: 650 });
    assert.ok(n >= Math.ceil(650 / reclaimAlongMax), `${n} returns carried ${reclaimAlongMax} deletes at most each`);
    for (const jid of old) assert.deepEqual(keysOf(store, jid), [], `nothing of ${jid} left`);
    assert.equal(Object.keys(jobs.returnsFor(fresh)).length, 60 + n, "every return stored, the fresh job's own kept");
  } finally {
    await store.close();
    rmSync(t.root, { recursive: true, force: true });
  }
});

test("once the cutoff is stored, an old job is hidden from every reader though its records are not all deleted yet", async () => {
  const t = tempStore();
  const store = t.open();
  const jobs = new JobCache(store);
  try {
    const { old, fresh } = await fill(jobs, 3, 40);
    // one pass on a clock that jumps: the cutoff and a single record
    let jumps = 0;
    assert.equal(await jobs.cleanup(DAY_S, now, () => (jumps += 100)), 1);
    const [jid] = old as [string];
    assert.ok(store.loads.doesExist(jid) && store.returns.doesExist(`${jid}/m5`), "its load and returns are on disk");
    assert.equal(jobs.getLoad(jid), undefined);
    assert.equal(jobs.hasLoad(jid), false);
    assert.deepEqual(jobs.returnsFor(jid), {});
    assert.equal(jobs.hasReturn(jid, "m5"), false);
    assert.equal(jobs.endtime(jid), undefined);
    assert.deepEqual(jobs.expectedMinions(jid), []);
    assert.equal(jobs.isNocache(jid), false);
    assert.deepEqual(jobs.listJids(), [fresh]);
    assert.deepEqual([...jobs.loads()].map(([j]) => j), [fresh]);
    const listed: string[] = [];
    jobs.listing((j) => listed.push(j));
    assert.deepEqual(listed, [fresh]);
    assert.equal(jobs.nthNewestJid(10), fresh);
    assert.deepEqual(jobs.warmingJids(1000, 4096), [fresh]);
    // the newer job is whole
    assert.equal(Object.keys(jobs.returnsFor(fresh)).length, 40);
    assert.deepEqual(jobs.expectedMinions(fresh), ["m0", "m1"]);
    assert.equal(jobs.hasLoad(fresh), true);
  } finally {
    await store.close();
    rmSync(t.root, { recursive: true, force: true });
  }
});

test("another thread's return writes delete records below the stored cutoff, at most reclaimAlongMax each, and look again only after reclaimCheckMs once none is left", async () => {
  const t = tempStore();
  const store = t.open();
  const pruning = new JobCache(store);
  let ms = 0;
  const other = new JobCache(store, undefined, () => ms); // another request worker's job cache
  try {
    const { fresh } = await fill(pruning, 2, 40); // 2 × 45 = 90 old records
    const count = () => store.returns.getCount() + store.loads.getCount() + store.listed.getCount();
    // the other thread has looked once before any cutoff: nothing to do, its next look is reclaimCheckMs away
    await other.saveReturn(fresh, "x0", { return: 1 }, false);
    let jumps = 0;
    assert.equal(await pruning.cleanup(DAY_S, now, () => (jumps += 100)), 1, "the cutoff stored with one record");
    const start = count();
    await other.saveReturn(fresh, "x1", { return: 1 }, false);
    assert.equal(count(), start + 1, "before reclaimCheckMs the other thread does not look");
    ms += reclaimCheckMs;
    await other.saveReturn(fresh, "x2", { return: 1 }, false);
    await store.root.committed;
    const deleted = start + 2 - count();
    assert.ok(deleted > 0 && deleted <= reclaimAlongMax, `deleted ${deleted} alongside one return`);
    for (let i = 3; i < 20; i++) await other.saveReturn(fresh, `x${i}`, { return: 1 }, false);
    await store.root.committed;
    assert.deepEqual(pruning.listJids(), [fresh]);
    assert.equal(store.loads.getCount(), 1, "every old load deleted");
    assert.equal(Object.keys(pruning.returnsFor(fresh)).length, 40 + 20);
  } finally {
    await store.close();
    rmSync(t.root, { recursive: true, force: true });
  }
});

test("a prune makes no pass of its own while a return its thread stored still waits for the disk (a slow fsync is not an idle thread)", async () => {
  const t = tempStore();
  const store = t.open();
  const jobs = new JobCache(store);
  try {
    const { fresh } = await fill(jobs, 2, 40);
    let waiting = true;
    const held = jobs.saveReturn(fresh, "slow", { return: 1 }, false).then(() => (waiting = false));
    const passesWhileWaiting: number[] = [];
    const cleanup = jobs.cleanup.bind(jobs);
    jobs.cleanup = (...a) => {
      if (waiting) passesWhileWaiting.push(1);
      return cleanup(...a);
    };
    // pauses of one event-loop turn: far shorter than the return's commit and fsync
    const r = await jobs.prune(DAY_S, now, { now: () => 0, pause: () => new Promise((res) => setImmediate(res)) });
    await held;
    assert.equal(passesWhileWaiting.length, 0, "passes made while the return waited for the disk");
    assert.ok(r.passes > 0, "the prune's own passes ran once no return was waiting");
    assert.deepEqual(jobs.listJids(), [fresh]);
  } finally {
    await store.close();
    rmSync(t.root, { recursive: true, force: true });
  }
});

test("a job cache given fewer deletes per return than reclaimAlongMax carries exactly that many while more are left", async () => {
  const t = tempStore();
  const store = t.open();
  const pruning = new JobCache(store);
  const few = 4;
  const other = new JobCache(store, undefined, () => 0, few);
  try {
    const { fresh } = await fill(pruning, 2, 40); // 90 old records
    let jumps = 0;
    assert.equal(await pruning.cleanup(DAY_S, now, () => (jumps += 100)), 1, "the cutoff stored with one record");
    const count = () => store.returns.getCount() + store.loads.getCount() + store.listed.getCount() + store.minions.getCount() + store.endtimes.getCount() + store.nocache.getCount();
    for (let i = 0; i < 3; i++) {
      const before = count();
      await other.saveReturn(fresh, `x${i}`, { return: 1 }, false);
      await store.root.committed;
      assert.equal(before + 1 - count(), few, `return ${i} deleted ${before + 1 - count()} old records`);
    }
  } finally {
    await store.close();
    rmSync(t.root, { recursive: true, force: true });
  }
});

test("keep_jobs_seconds 0 after a prune forgets the cutoff: an old job written again is listed and no return deletes it", async () => {
  const t = tempStore();
  const store = t.open();
  const jobs = new JobCache(store);
  try {
    const { old, fresh } = await fill(jobs, 2, 5);
    await jobs.prune(DAY_S, now, { now: () => 0, pause: async () => undefined });
    assert.deepEqual(jobs.listJids(), [fresh]);
    await jobs.prune(0, now);
    // an old job imported again (migrate_jobs_to_cache) while jobs are kept forever
    const [jid] = old as [string];
    await jobs.saveLoad(jid, { fun: "test.ping", tgt: "*" }, ["m0"]);
    await jobs.addReturn(jid, "m0", { return: true });
    for (let i = 0; i < 5; i++) await jobs.saveReturn(fresh, `late-${i}`, { return: true }, false);
    assert.deepEqual(jobs.listJids(), [jid, fresh]);
    assert.deepEqual(jobs.returnsFor(jid), { m0: { return: true } });
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
    assert.ok(old.every((jid) => store.loads.doesExist(jid)), "loads go last: every old job still has its load on disk");
    assert.ok(old.every((jid) => !jobs.hasLoad(jid) && Object.keys(jobs.returnsFor(jid)).length === 0), "and is hidden: none lists with returns missing");
    await store.close();
    store = t.open();
    jobs = new JobCache(store, () => true);
    assert.ok(old.every((jid) => !jobs.hasLoad(jid)), "hidden after the restart too: the cutoff is stored with the first pass");
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
