/**
 * The Raft and ring figures of the metrics: a group's status counts its elections and every committed
 * proposal in the commit latency histogram's fixed buckets; a master with cluster_id serves them, the ring's
 * owned slots per node and Salt's drop_stats on its endpoint.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MemoryBackend } from "../../src/workers/raft/backend.js";
import { GroupManager } from "../../src/workers/raft/manager.js";
import { COMMIT_LATENCY_BUCKETS_MS } from "../../src/workers/raft/latency-window.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { TEST_LIMITS } from "../raft-worker/harness.js";
import { startTestMaster } from "../helpers/master.js";

test("a group's status counts its elections and its commits in fixed latency buckets", async () => {
  let clock = 1_000;
  const backend = new MemoryBackend();
  backend.onCommit = (writes) => {
    if (writes.some((x) => x.entries.length > 0)) clock += 7;
  };
  const m = new GroupManager({ self: "solo", backend, limits: TEST_LIMITS, now: () => clock });
  assert.equal(await m.bootstrap(["solo"]), true);
  await m.start();
  const before = m.status().groups.find((g) => g.group === "cluster")!;
  assert.ok((before.elections ?? 0) >= 1, "a sole voter campaigns for itself");
  const n = 20;
  for (let i = 0; i < n; i++) await m.propose("cluster", { kind: "ROUTE", value: { data_type: `t${i}`, ring_id: null } });
  const after = m.status().groups.find((g) => g.group === "cluster")!;
  const h0 = before.commitHistogram!;
  const h = after.commitHistogram!;
  assert.equal(h.counts.length, COMMIT_LATENCY_BUCKETS_MS.length + 1);
  assert.equal(h.count, h0.count + n);
  assert.equal(h.sumMs, h0.sumMs + 7 * n);
  const le10 = COMMIT_LATENCY_BUCKETS_MS.indexOf(10); // 7 ms: over 5, not over 10
  assert.equal(h.counts[le10]! - h0.counts[le10]!, n);
  assert.equal(after.elections, before.elections, "no election without a timeout");
  await m.close();
});

test("a master with cluster_id serves the Raft and ring figures", { timeout: 120_000 }, async () => {
  const node = "metrics-node";
  const m = await startTestMaster({ cluster_id: "c1", id: node, brine_metrics: { port: 0 } });
  try {
    const raft = m.server.clusterNode!.raft;
    await raft.propose("cluster", { kind: "ROUTE", value: { data_type: "events", ring_id: "elsewhere" } });
    const ring = new RingReader(m.server.clusterNode!.ringBuffer);
    for (let i = 0; i < 100 && ring.gate("events", "k1", node) === "broadcast"; i++) await new Promise((r) => setTimeout(r, 50));
    const text = await (await fetch(`http://127.0.0.1:${m.server.metricsPort}/metrics`)).text();
    const value = (series: string) => {
      const line = text.split("\n").find((l) => l.startsWith(`${series} `));
      return line === undefined ? undefined : Number(line.slice(series.length + 1));
    };
    assert.ok((value('brine_raft_term{group="cluster"}') ?? 0) >= 1);
    assert.ok((value('brine_raft_commit_index{group="cluster"}') ?? 0) >= 1);
    assert.equal(value('brine_raft_is_leader{group="cluster"}'), 1);
    assert.ok((value('brine_raft_elections_total{group="cluster"}') ?? 0) >= 1);
    assert.ok((value('brine_raft_commit_latency_seconds_count{group="cluster"}') ?? 0) >= 1, "the proposal above");
    assert.equal(value(`brine_ring_owned_slots{ring="cluster",node="${node}"}`), 4096);
    assert.ok((value('brine_ring_drops_total{data_type="events",reason="not_a_member"}') ?? 0) >= 1);
    assert.ok(text.includes("# TYPE brine_raft_learner_lag_entries gauge"));
  } finally {
    await m.stop();
  }
});
