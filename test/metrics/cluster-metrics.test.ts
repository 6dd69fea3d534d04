/**
 * The Raft and ring figures of the metrics: a master with cluster_id serves its groups' term, indices,
 * elections and commit latency histogram (test/raft-worker/commit-latency-status.test.ts checks the status they
 * come from), the ring's owned slots per node and Salt's drop_stats on its endpoint.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { startTestMaster } from "../helpers/master.js";
import { scrapeMetrics } from "../helpers/metrics.js";

test("a master with cluster_id serves the Raft and ring figures", { timeout: 120_000 }, async () => {
  const node = "metrics-node";
  const m = await startTestMaster({ cluster_id: "c1", id: node, brine_metrics: { port: 0 } });
  try {
    const raft = m.server.clusterNode!.raft;
    await raft.propose("cluster", { kind: "ROUTE", value: { data_type: "events", ring_id: "elsewhere" } });
    const ring = new RingReader(m.server.clusterNode!.ringBuffer);
    for (let i = 0; i < 100 && ring.gate("events", "k1", node) === "broadcast"; i++) await new Promise((r) => setTimeout(r, 50));
    const { text, values } = await scrapeMetrics(m);
    const value = (series: string) => values.get(series);
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
