/**
 * A group's status reports how long its proposals took inside the worker (proposal taken → committed,
 * applied and answered), over the most recent COMMIT_LATENCY_SAMPLES, on the clock the manager was given.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MemoryBackend } from "../../src/workers/raft/backend.js";
import { GroupManager } from "../../src/workers/raft/manager.js";
import { COMMIT_LATENCY_BUCKETS_MS, COMMIT_LATENCY_SAMPLES, LatencyWindow } from "../../src/shared/metrics/latency-window.js";
import { TEST_LIMITS } from "./harness.js";

test("the latency window keeps the most recent samples and reports their p50 and p99", () => {
  const w = new LatencyWindow();
  assert.equal(w.summary(), undefined, "no samples, no summary");
  for (let i = 1; i <= COMMIT_LATENCY_SAMPLES + 44; i++) w.add(i);
  // samples 45..300 remain (256 of them): p50 is the 129th smallest, p99 the 254th
  assert.deepEqual(w.summary(), { samples: COMMIT_LATENCY_SAMPLES, p50Ms: 45 + 128, p99Ms: 45 + 253 });
});

test("a leader's proposals are timed from the proposal to the result, on the manager's clock", async () => {
  let clock = 1_000;
  const backend = new MemoryBackend();
  // the only time that passes between a proposal and its result is the durable commit's
  backend.onCommit = (writes) => {
    if (writes.some((x) => x.entries.length > 0)) clock += 7;
  };
  const m = new GroupManager({ self: "solo", backend, limits: TEST_LIMITS, now: () => clock });
  assert.equal(await m.bootstrap(["solo"]), true);
  await m.start();
  const before = m.status().groups.find((g) => g.group === "cluster")!;
  const n = 20;
  for (let i = 0; i < n; i++) await m.propose("cluster", { kind: "ROUTE", value: { data_type: `t${i}`, ring_id: null } });
  const after = m.status().groups.find((g) => g.group === "cluster")!;
  const samplesBefore = before.commitLatency?.samples ?? 0;
  assert.equal(after.commitLatency?.samples, samplesBefore + n, "one sample per committed proposal");
  assert.equal(after.commitLatency?.p50Ms, 7);
  assert.equal(after.commitLatency?.p99Ms, 7);
  // every commit also lands in the fixed buckets of the metrics histogram (7 ms: over 5, not over 10)
  const h0 = before.commitHistogram!;
  const h = after.commitHistogram!;
  assert.equal(h.counts.length, COMMIT_LATENCY_BUCKETS_MS.length + 1);
  assert.equal(h.count, h0.count + n);
  assert.equal(h.sumMs, h0.sumMs + 7 * n);
  const le10 = COMMIT_LATENCY_BUCKETS_MS.indexOf(10);
  assert.equal(h.counts[le10]! - h0.counts[le10]!, n);
  // a sole voter campaigned for itself once; proposals start no election
  assert.ok((before.elections ?? 0) >= 1);
  assert.equal(after.elections, before.elections);
  await m.close();
});
