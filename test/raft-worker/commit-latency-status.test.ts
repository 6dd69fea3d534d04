/**
 * A group's status reports how long its proposals took inside the worker (proposal taken → committed,
 * applied and answered), over the most recent COMMIT_LATENCY_SAMPLES, on the clock the manager was given.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MemoryBackend } from "../../src/workers/raft/backend.js";
import { GroupManager } from "../../src/workers/raft/manager.js";
import { COMMIT_LATENCY_BUCKETS_MS, COMMIT_LATENCY_SAMPLES, LatencyWindow } from "../../src/shared/metrics/latency-window.js";
import { StageClock, stageDelta } from "../../src/shared/metrics/stage-clock.js";
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

test("a stage clock sums each stage's time and runs; a delta per commit divides both", () => {
  let clock = 0;
  const s = new StageClock(() => clock);
  const t = s.now();
  clock += 2; // ms
  s.add("a", t);
  s.add("a", s.now()); // no time passed: a run, no µs
  s.count("frames", 3);
  s.addMs("gc", 0.25);
  const one = s.snapshot();
  assert.deepEqual(one, { a: { us: 2000, n: 2 }, frames: { us: 0, n: 3 }, gc: { us: 250, n: 1 } });
  clock += 1;
  s.add("a", clock - 1);
  s.count("b");
  assert.deepEqual(stageDelta(one, s.snapshot(), 2), { a: { us: 500, n: 0.5 }, frames: { us: 0, n: 0 }, gc: { us: 0, n: 0 }, b: { us: 0, n: 0.5 } });
});

test("the pump times its stages on the sink it was given: the durable commit apart from stepping and applying, and status shows the commits' p50", async () => {
  let clock = 0;
  const backend = new MemoryBackend();
  // only the durable commit takes time on this clock: 3 ms per commit that carries entries, 1 ms otherwise
  backend.onCommit = (writes) => {
    clock += writes.some((x) => x.entries.length > 0) ? 3 : 1;
  };
  const stages = new StageClock(() => clock);
  const m = new GroupManager({ self: "solo", backend, limits: TEST_LIMITS, now: () => clock, stages });
  assert.equal(await m.bootstrap(["solo"]), true);
  await m.start();
  const before = stages.snapshot();
  const commits0 = m.status().commits;
  const n = 10;
  for (let i = 0; i < n; i++) await m.propose("cluster", { kind: "ROUTE", value: { data_type: `s${i}`, ring_id: null } });
  await m.idle();
  const d = stageDelta(before, stages.snapshot());
  const commits = m.status().commits - commits0;
  assert.ok(commits >= n, "a sole voter writes every proposal durably");
  assert.equal(d["lmdb.commit"]!.n, commits, "one lmdb.commit per durable commit");
  assert.ok(d["lmdb.commit"]!.us >= n * 3000, "the commits' time lands in lmdb.commit");
  for (const k of ["pump.step", "pump.ready", "pump.apply", "pump.deliver"]) {
    assert.ok(d[k]!.n >= n, `${k} ran for each proposal`);
    assert.equal(d[k]!.us, 0, `${k} took none of the commit's time`);
  }
  // the durable commits' own window: every commit here carried entries and took 3 ms on this clock
  assert.deepEqual(m.status().durableCommit && { p50: m.status().durableCommit!.p50Ms, p99: m.status().durableCommit!.p99Ms }, { p50: 3, p99: 3 });
  await m.close();
});
