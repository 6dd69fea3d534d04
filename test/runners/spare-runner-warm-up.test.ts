/**
 * A spare runner thread runs jobs.lookup_jid's and jobs.list_jobs's reads once before its call (jobs.ts
 * warmJobReads), so the call's reads are not the fresh thread's first: on the newest jobs whose returns are small,
 * passing over a runner's own job with a large return, bounded in records, writing nothing, stopping when the call
 * comes.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { runnerHarness } from "./helpers.js";
import { warmJobReads } from "../../src/runners/jobs.js";
import { formatJid } from "../../src/shared/protocol/jid.js";

const t0 = Date.UTC(2026, 10, 26, 0, 0, 0);
const jidAt = (i: number) => formatJid(t0 + i * 1000, 0);

test("the warm-up reads the newest jobs with small returns, passes over a large return and a job the window cut, and writes nothing", async () => {
  const h = runnerHarness();
  try {
    const jobs = h.ctx.jobs;
    // oldest first: a job of 300 returns (more than the warm-up's window), 10 jobs of 20 small returns, then a
    // runner's job whose one return is 20 kB, then the newest: a job of 5 small returns
    const big = jidAt(0);
    await jobs.saveLoad(big, { fun: "test.ping", tgt: "*" });
    await Promise.all(Array.from({ length: 300 }, (_, m) => jobs.addReturn(big, `m${String(m).padStart(3, "0")}`, { return: true })));
    const small = Array.from({ length: 10 }, (_, i) => jidAt(1 + i));
    for (const jid of small) {
      await jobs.saveLoad(jid, { fun: "test.ping", tgt: "*" });
      await Promise.all(Array.from({ length: 20 }, (_, m) => jobs.addReturn(jid, `m${m}`, { return: true })));
    }
    const runnerJob = jidAt(20);
    await jobs.saveLoad(runnerJob, { fun: "runner.jobs.list_jobs", tgt: "master" });
    await jobs.addReturn(runnerJob, "master", { return: "x".repeat(20_000) });
    const newest = jidAt(30);
    await jobs.saveLoad(newest, { fun: "test.ping", tgt: "*" });
    await Promise.all(Array.from({ length: 5 }, (_, m) => jobs.addReturn(newest, `m${m}`, { return: true })));
    // a load without its list entry: list_jobs would store the entry it makes; the warm-up must not
    await h.store.loads.put(jidAt(25), { fun: "test.echo", tgt: "m" });

    const read: string[] = [];
    const eachReturn = jobs.eachReturn.bind(jobs);
    jobs.eachReturn = (jid, each) => (read.push(jid), eachReturn(jid, each));
    const warmJids = jobs.warmingJids(256, 4096);
    assert.deepEqual(warmJids, [newest, ...[...small].reverse()], "newest first; the large return and the job cut by the window passed over");
    const n = await warmJobReads(h.ctx);
    assert.deepEqual(read, warmJids, "each read once");
    assert.ok(n >= warmJids.length + 1, `jobs looked up and list entries read: ${n}`);
    assert.equal(h.store.listed.get(jidAt(25)), undefined, "the warm-up stored no list entry");

    // stopping at once: nothing read
    read.length = 0;
    assert.equal(await warmJobReads(h.ctx, () => true), 0);
    assert.deepEqual(read, []);
  } finally {
    await h.close();
  }
});

test("the warm-up on an empty job cache reads nothing and does not fail", async () => {
  const h = runnerHarness();
  try {
    assert.deepEqual(h.ctx.jobs.warmingJids(256, 4096), []);
    assert.equal(await warmJobReads(h.ctx), 0);
  } finally {
    await h.close();
  }
});
