import { test } from "node:test";
import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { assignSlots, type RingAssignment } from "../../src/shared/sab-ring/assign.js";
import { createRingBuffer, readLayout, ringSeqByte } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";
import type { HammerData, ReaderData, ReaderResult, WriterData } from "./fixtures/ring-worker.js";
import { CONTROL_PROGRESS } from "./fixtures/ring-control.js";
import { masterIds, minionKeys } from "./minion-keys.js";

const workerUrl = new URL("./fixtures/ring-worker.js", import.meta.url);

function run<T>(data: WriterData | ReaderData | HammerData): Promise<T> {
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
  const READERS = 3;
  const control = new SharedArrayBuffer(4 * (CONTROL_PROGRESS + READERS));
  // epoch 0 up front, so the ring exists from the readers' first read; then hand the writer slot over
  const setup = RingWriter.attach(sab);
  setup.publishRing("cluster", tables[0]!, 0);
  setup.release();

  const EPOCHS = 3000;
  const LAG = 50;
  const keys = minionKeys(500, 7);
  const readers = Array.from({ length: READERS }, (_, index) => run<ReaderResult>({ role: "reader", sab, control, tables, keys, index }));
  const published = await run<number>({ role: "writer", sab, control, tables, epochs: EPOCHS, readers: READERS, lag: LAG });
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

test("a reader that never gets an undisturbed read fails loudly with RING_TORN_READ instead of spinning", { timeout: 60_000 }, async () => {
  const w = RingWriter.attach(createRingBuffer());
  w.publishRing("cluster", assignSlots(masterIds(3)), 1);
  const control = new SharedArrayBuffer(8);
  const flags = new Int32Array(control);
  const hammer = run<number>({ role: "hammer", sab: w.buffer, control, seqIndex: ringSeqByte(readLayout(w.buffer), 0) / 4 });
  while (Atomics.load(flags, 0) === 0) Atomics.wait(flags, 0, 0, 10);
  const r = new RingReader(w.buffer, 20);
  let torn = 0;
  const deadline = Date.now() + 10_000;
  while (torn === 0 && Date.now() < deadline) {
    try {
      r.owner("minion-1");
    } catch (e) {
      assert.equal((e as { code?: string }).code, "RING_TORN_READ");
      torn++;
    }
  }
  Atomics.store(flags, 1, 1);
  assert.ok((await hammer) > 0);
  assert.equal(torn, 1, "no read ever gave up");
  // once the writer pauses, the same reader answers again
  assert.equal(r.owner("minion-1"), new RingReader(w.buffer).owner("minion-1"));
  assert.ok(r.retries >= 20);
});
