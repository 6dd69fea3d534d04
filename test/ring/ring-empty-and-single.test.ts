import { test } from "node:test";
import assert from "node:assert/strict";
import { assignSlots, emptyAssignment } from "../../src/shared/sab-ring/assign.js";
import { createRingBuffer } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";
import { clusterRingInfo } from "../../src/runners/cluster-shapes.js";
import { minionKeys } from "./minion-keys.js";

const keys = minionKeys(2000);

test("a ring that was never published: no owner, owns() is true (unclustered master owns all), no replicas", () => {
  const r = new RingReader(createRingBuffer());
  for (const k of keys.slice(0, 50)) {
    assert.equal(r.owner(k), null);
    assert.equal(r.owns(k, "anyone"), true);
    assert.deepEqual(r.replicas(k, 3), []);
  }
  assert.deepEqual(r.nodes(), []);
  assert.equal(r.epoch(), -1);
  assert.equal(r.view(), null);
  assert.deepEqual(clusterRingInfo({ reader: r }), {
    is_clustered: false, node_count: 0, nodes: [], vnodes: 0, slots: 4096, ring: "cluster", epoch: -1, checksum: null, replicas: 1,
  });
});

test("a published empty ring behaves like Salt's empty HashRing", () => {
  const w = RingWriter.attach(createRingBuffer());
  w.publishRing("cluster", emptyAssignment(), 0);
  const r = new RingReader(w.buffer);
  assert.equal(r.owner("minion-1"), null);
  assert.equal(r.owns("minion-1", "m1"), true);
  assert.deepEqual(r.replicas("minion-1"), []);
  assert.equal(r.epoch(), 0);
  assert.equal(clusterRingInfo({ reader: r }).is_clustered, false);
});

test("a one-node ring: that node owns every key, and only that node", () => {
  const w = RingWriter.attach(createRingBuffer());
  w.publishRing("cluster", assignSlots(["solo"]), 3);
  const r = new RingReader(w.buffer);
  for (const k of keys) {
    assert.equal(r.owner(k), "solo");
    assert.equal(r.owns(k, "solo"), true);
    assert.equal(r.owns(k, "other"), false);
    assert.deepEqual(r.replicas(k, 3), ["solo"]);
  }
  const info = clusterRingInfo({ reader: r });
  assert.equal(info.is_clustered, true);
  assert.equal(info.node_count, 1);
  assert.equal(info.vnodes, 4096);
  assert.equal(info.epoch, 3);
});

test("replicas: distinct nodes, owner first, capped at the ring size, default from the ring's replicas", () => {
  const w = RingWriter.attach(createRingBuffer());
  w.publishRing("cluster", assignSlots(["a", "b", "c", "d"]), 1, 2);
  const r = new RingReader(w.buffer);
  for (const k of keys.slice(0, 200)) {
    const all = r.replicas(k, 10);
    assert.equal(all.length, 4);
    assert.equal(new Set(all).size, 4);
    assert.equal(all[0], r.owner(k));
    assert.deepEqual(r.replicas(k), all.slice(0, 2));
    assert.deepEqual(r.replicas(k, 0), []);
  }
  assert.throws(() => r.replicas("k", -1), { code: "RING_BAD_QUERY" });
});
