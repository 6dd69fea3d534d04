import { test } from "node:test";
import assert from "node:assert/strict";
import { assignSlots, emptyAssignment } from "../../src/shared/sab-ring/assign.js";
import { createRingBuffer, computeLayout, resolveRingLimits } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";

test("only one writer at a time; release hands the buffer over, and the new writer sees what is published", () => {
  const sab = createRingBuffer();
  const w1 = RingWriter.attach(sab);
  assert.throws(() => RingWriter.attach(sab), { code: "RING_WRITER_CLAIMED" });
  w1.publishRing("cluster", assignSlots(["a", "b"]), 4);
  w1.publishRoutes({ jobs: "cluster" });
  w1.release();
  assert.throws(() => w1.publishRing("cluster", assignSlots(["a"]), 5), { code: "RING_WRITER_CLAIMED" });
  const w2 = RingWriter.attach(sab);
  // it knows epoch 4 is out there, and the routes' rows
  assert.throws(() => w2.publishRing("cluster", assignSlots(["a"]), 3), { code: "RING_EPOCH_REGRESSED" });
  w2.publishRoutes({ jobs: "cluster", events: null });
  assert.deepEqual(new RingReader(sab).routes(), { jobs: "cluster", events: null });
});

test("an epoch names one table: lower epochs and reused epochs with other content are refused", () => {
  const w = RingWriter.attach(createRingBuffer());
  const t = assignSlots(["a", "b", "c"]);
  w.publishRing("cluster", t, 10);
  w.publishRing("cluster", t, 10); // identical republish: no-op
  assert.throws(() => w.publishRing("cluster", assignSlots(["a", "b"]), 10), { code: "RING_EPOCH_REGRESSED" });
  assert.throws(() => w.publishRing("cluster", t, 10, 2), { code: "RING_EPOCH_REGRESSED" });
  assert.throws(() => w.publishRing("cluster", t, 9), { code: "RING_EPOCH_REGRESSED" });
  w.publishRing("cluster", assignSlots(["a", "b"], t), 11);
  assert.equal(new RingReader(w.buffer).epoch(), 11);
});

test("inputs that do not fit the buffer are refused with coded errors", () => {
  const w = RingWriter.attach(createRingBuffer({ ringsMax: 2, ringNodesMax: 3, nodeIdBytesMax: 8, dataTypesMax: 2 }));
  assert.throws(() => w.publishRing("cluster", assignSlots(["a", "b", "c", "d"]), 1), { code: "RING_TOO_MANY_NODES" });
  assert.throws(() => w.publishRing("cluster", assignSlots(["a-very-long-id"]), 1), { code: "RING_BAD_NODE_ID" });
  assert.throws(() => w.publishRing("", assignSlots(["a"]), 1), { code: "RING_BAD_NAME" });
  const bad = { nodes: ["a", "b"], owners: new Uint8Array(4096).fill(2) };
  assert.throws(() => w.publishRing("cluster", bad, 1), { code: "RING_BAD_ASSIGNMENT" });
  w.publishRing("r1", assignSlots(["a"]), 1);
  w.publishRing("r2", assignSlots(["a"]), 1);
  assert.throws(() => w.publishRing("r3", assignSlots(["a"]), 1), { code: "RING_TOO_MANY_RINGS" });
  assert.equal(w.dropRing("r1"), true);
  w.publishRing("r3", assignSlots(["a"]), 1); // the freed record is reused
  assert.deepEqual(new RingReader(w.buffer).rings(), ["r2", "r3"]);
  w.publishRoutes({ t1: null, t2: null });
  assert.throws(() => w.publishRoutes({ t3: null }), { code: "RING_TOO_MANY_DATA_TYPES" });
});

test("a reader refuses a buffer it did not create", () => {
  assert.throws(() => new RingReader(new SharedArrayBuffer(1024)), { code: "RING_LAYOUT_MISMATCH" });
  const sab = createRingBuffer();
  new Int32Array(sab)[9] = 12; // total bytes word
  assert.throws(() => new RingReader(sab), { code: "RING_LAYOUT_MISMATCH" });
});

test("a reader keeps answering for a ring moved to another record (dropped and re-created)", () => {
  const w = RingWriter.attach(createRingBuffer({ ringsMax: 3 }));
  const r = new RingReader(w.buffer);
  w.publishRing("a", assignSlots(["x"]), 1);
  w.publishRing("b", assignSlots(["y"]), 1);
  assert.equal(r.owner("k", "b"), "y");
  w.dropRing("b");
  assert.equal(r.owner("k", "b"), null);
  w.dropRing("a");
  w.publishRing("b", assignSlots(["z"]), 2); // lands in record 0 now
  assert.equal(r.owner("k", "b"), "z");
  assert.equal(r.epoch("a"), -1);
});

test("default limits give a buffer of about 400 KiB for 16 rings of 64 nodes", () => {
  const layout = computeLayout(resolveRingLimits());
  assert.ok(layout.totalBytes < 512 * 1024, `${layout.totalBytes}`);
  assert.throws(() => resolveRingLimits({ ringNodesMax: 255 }), { code: "CONFIG_INVALID" });
  const w = RingWriter.attach(createRingBuffer());
  w.publishRing("cluster", emptyAssignment(), 0);
  assert.deepEqual(new RingReader(w.buffer).view()?.nodes, []);
});
