import { test } from "node:test";
import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { assignSlots } from "../../src/shared/sab-ring/assign.js";
import { createRingBuffer } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";
import type { GateData } from "./fixtures/ring-worker.js";
import { minionKeys } from "./minion-keys.js";

const workerUrl = new URL("./fixtures/ring-worker.js", import.meta.url);

/** cluster ring {m1,m2,m3}; ring "jobs" {m1,m2}; ring "empty" with no nodes. */
function setup(): { w: RingWriter; r: RingReader } {
  const w = RingWriter.attach(createRingBuffer());
  w.publishRing("cluster", assignSlots(["m1", "m2", "m3"]), 1);
  w.publishRing("jobs", assignSlots(["m1", "m2"]), 1);
  w.publishRing("empty", assignSlots([]), 1);
  return { w, r: new RingReader(w.buffer) };
}

test("owns_for: no route or a route to None broadcasts, and counts nothing", () => {
  const { w, r } = setup();
  assert.equal(r.ownsFor("jobs", "j1", "m9"), true);
  assert.equal(r.gate("jobs", "j1", "m9"), "broadcast");
  w.publishRoutes({ jobs: null });
  assert.equal(r.gate("jobs", "j1", "m9"), "broadcast");
  assert.deepEqual(r.dropStats(), {});
  assert.deepEqual(r.routes(), { jobs: null });
});

test("owns_for: routed to a ring that is absent or empty here -> false, not_a_member", () => {
  const { w, r } = setup();
  w.publishRoutes({ returns: "nowhere", events: "empty" });
  assert.equal(r.ownsFor("returns", "k", "m1"), false);
  assert.equal(r.gate("returns", "k", "m1"), "not_a_member");
  assert.equal(r.gate("events", "k", "m1"), "not_a_member");
  assert.deepEqual(r.dropStats(), {
    returns: { ring_id: "nowhere", not_a_member: 2, other_ring_member: 0 },
    events: { ring_id: "empty", not_a_member: 1, other_ring_member: 0 },
  });
});

test("owns_for: a master outside the routed ring counts not_a_member; inside it, the owner writes", () => {
  const { w, r } = setup();
  w.publishRoutes({ jobs: "jobs" });
  const keys = minionKeys(1000);
  let mine = 0;
  let theirs = 0;
  for (const k of keys) {
    assert.equal(r.gate("jobs", k, "m3"), "not_a_member"); // m3 is in "cluster" but not in "jobs"
    const owner = r.owner(k, "jobs");
    assert.equal(r.ownsFor("jobs", k, "m1"), owner === "m1");
    if (owner === "m1") mine++;
    else theirs++;
  }
  assert.ok(mine > 300 && theirs > 300);
  assert.deepEqual(r.dropStats(), { jobs: { ring_id: "jobs", not_a_member: 1000, other_ring_member: theirs } });
});

test("drop counters keep their data type across route changes, and the ring it was last routed to", () => {
  const { w, r } = setup();
  w.publishRoutes({ jobs: "nowhere" });
  r.gate("jobs", "k", "m1");
  w.publishRoutes({ other: "jobs" }); // jobs no longer routed: broadcast, counters stay
  assert.equal(r.gate("jobs", "k", "m1"), "broadcast");
  assert.deepEqual(r.dropStats(), { jobs: { ring_id: "nowhere", not_a_member: 1, other_ring_member: 0 } });
});

function runGate(data: GateData): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    const w = new Worker(workerUrl, { workerData: data });
    w.once("message", resolve);
    w.once("error", reject);
  });
}

test("drop counters incremented from 4 threads at once add up exactly", { timeout: 120_000 }, async () => {
  const { w, r } = setup();
  w.publishRoutes({ jobs: "jobs", returns: "nowhere", events: null });
  const keys = minionKeys(400, 3);
  const calls = keys.flatMap((key) => [
    { dataType: "jobs", key },
    { dataType: "returns", key },
    { dataType: "events", key },
  ]);
  // Expectation from owner(), single-threaded, before any gate call: keys of "jobs" that m2 owns.
  const otherPerRound = keys.filter((k) => r.owner(k, "jobs") !== "m1").length;
  assert.ok(otherPerRound > 100 && otherPerRound < 300);
  const THREADS = 4;
  const ROUNDS = 250;
  const results = await Promise.all(
    Array.from({ length: THREADS }, () => runGate({ role: "gate", sab: w.buffer, calls, self: "m1", rounds: ROUNDS })),
  );
  const total = THREADS * ROUNDS;
  assert.deepEqual(r.dropStats(), {
    jobs: { ring_id: "jobs", not_a_member: 0, other_ring_member: total * otherPerRound },
    returns: { ring_id: "nowhere", not_a_member: total * keys.length, other_ring_member: 0 },
  });
  // and each thread's own verdicts agree with the shared counters
  const sum = (k: string): number => results.reduce((n, v) => n + (v[k] ?? 0), 0);
  assert.equal(sum("jobs:other_ring_member"), total * otherPerRound);
  assert.equal(sum("jobs:owner"), total * (keys.length - otherPerRound));
  assert.equal(sum("returns:not_a_member"), total * keys.length);
  assert.equal(sum("events:broadcast"), total * keys.length);
});

test("owns_for with replicas: each of a key's first R nodes owns it, the others count other_ring_member", () => {
  const w = RingWriter.attach(createRingBuffer());
  w.publishRing("jobs", assignSlots(["m1", "m2", "m3"]), 1, 2);
  w.publishRoutes({ jobs: "jobs" });
  const r = new RingReader(w.buffer);
  const keys = minionKeys(600);
  let owners = 0;
  for (const k of keys) {
    const want = r.replicas(k, 2, "jobs");
    assert.equal(want.length, 2);
    for (const n of ["m1", "m2", "m3"]) {
      const v = r.gate("jobs", k, n);
      assert.equal(v, want.includes(n) ? "owner" : "other_ring_member", `${k} on ${n}`);
      if (v === "owner") owners++;
    }
  }
  assert.equal(owners, keys.length * 2, "exactly two owners per key");
  assert.deepEqual(r.dropStats(), { jobs: { ring_id: "jobs", not_a_member: 0, other_ring_member: keys.length } });
});
