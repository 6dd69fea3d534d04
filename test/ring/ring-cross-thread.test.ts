import { test } from "node:test";
import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { assignSlots, type RingAssignment } from "../../src/shared/sab-ring/assign.js";
import { createRingBuffer } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";
import type { ReaderData, ReaderResult, WriterData } from "./fixtures/ring-worker.js";
import { masterIds, minionKeys } from "./minion-keys.js";

const workerUrl = new URL("./fixtures/ring-worker.js", import.meta.url);

function run<T>(data: WriterData | ReaderData): Promise<T> {
  return new Promise((resolve, reject) => {
    const w = new Worker(workerUrl, { workerData: data });
    w.once("message", resolve);
    w.once("error", reject);
    w.once("exit", (code) => code !== 0 && reject(new Error(`worker exited ${code}`)));
  });
}

/** Four tables over different node sets (3, 4, 2 and 5 nodes), derived through a real history. */
function alternatingTables(): RingAssignment[] {
  const ids = masterIds(5);
  const t0 = assignSlots(ids.slice(0, 3));
  const t1 = assignSlots(ids.slice(0, 4), t0);
  const t2 = assignSlots(ids.slice(2, 4), t1);
  const t3 = assignSlots(ids, t2);
  return [t0, t1, t2, t3];
}

test("readers in 3 threads never see a torn ring while a writer thread publishes 3000 epochs", { timeout: 120_000 }, async (t) => {
  const tables = alternatingTables();
  const sab = createRingBuffer();
  const control = new SharedArrayBuffer(8);
  // epoch 0 up front, so the ring exists from the readers' first read; then hand the writer slot over
  const setup = RingWriter.attach(sab);
  setup.publishRing("cluster", tables[0]!, 0);
  setup.release();

  const READERS = 3;
  const EPOCHS = 3000;
  const keys = minionKeys(500, 7);
  const readers = Array.from({ length: READERS }, () =>
    run<ReaderResult>({ role: "reader", sab, control, tables, keys }),
  );
  const published = await run<number>({ role: "writer", sab, control, tables, epochs: EPOCHS, readers: READERS });
  const results = await Promise.all(readers);

  assert.equal(published, EPOCHS);
  assert.equal(new RingReader(sab).epoch(), EPOCHS);
  for (const [i, r] of results.entries()) {
    assert.deepEqual(r.violations, [], `reader ${i}`);
    // The reads really happened while epochs were being published, not before or after them all.
    assert.ok(r.reads > 0 && r.views > 0, `reader ${i} read nothing`);
    assert.ok(r.epochsSeen >= 20, `reader ${i} saw only ${r.epochsSeen} epochs`);
    assert.ok(r.lastEpoch - r.firstEpoch >= 100, `reader ${i} spanned epochs ${r.firstEpoch}..${r.lastEpoch}`);
  }
  for (const [i, r] of results.entries()) {
    t.diagnostic(`reader ${i}: ${r.views} views, ${r.reads} lookups, ${r.epochsSeen} epochs seen (${r.firstEpoch}..${r.lastEpoch}), ${r.overlapped} lookups spanning an epoch change, ${r.retries} retried reads`);
  }
  // Some reads raced a write and were retried or bracketed an epoch change: the protocol was exercised.
  const raced = results.reduce((n, r) => n + r.retries + r.overlapped, 0);
  assert.ok(raced > 0, "no read ever overlapped a write");
});
