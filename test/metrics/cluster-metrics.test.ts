/**
 * The Raft and ring figures of the metrics: a master with cluster_id serves its groups' term, indices,
 * elections and commit latency histogram (test/raft-worker/commit-latency-status.test.ts checks the status they
 * come from), the ring's owned slots per node and Salt's drop_stats on its endpoint; and the state-sync figures
 * from the state-sync thread's status file (test/state-sync/engine.test.ts checks the thread writes it), on the
 * endpoint and in `salt-run brine.stats`, moving when the file does; and the nonce owner check's counters
 * (test/cluster/nonce-owner-decisions.test.ts checks the service counts), there too, moving when they do.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { stateSyncStatusFile } from "../../src/shared/state-sync-status.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { startTestMaster } from "../helpers/master.js";
import { scrapeMetrics } from "../helpers/metrics.js";

test("a master with cluster_id serves the Raft, ring, state-sync and nonce owner figures", { timeout: 120_000 }, async () => {
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

    // state-sync: the status file as the state-sync thread writes it (replaced whole), after two transfers from m2
    const file = stateSyncStatusFile(m.cachedir);
    const write = (status: unknown) => {
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(`${file}.tmp`, JSON.stringify(status));
      renameSync(`${file}.tmp`, file);
    };
    const entry = (bytesTotal: number, transfers: number, behindMsAgo?: number) => ({
      at: new Date().toISOString(), items: 1, bytes: 450, deleted: 0, errors: 0, items_total: transfers, bytes_total: bytesTotal, transfers,
      ...(behindMsAgo !== undefined ? { behind_since: new Date(Date.now() - behindMsAgo).toISOString() } : {}),
    });
    write({ keys: { m2: entry(900, 2, 20_000) } });
    let page = (await scrapeMetrics(m)).values;
    assert.equal(page.get('brine_state_sync_bytes_total{channel="keys",peer="m2"}'), 900);
    assert.equal(page.get('brine_state_sync_transfers_total{channel="keys",peer="m2"}'), 2);
    assert.ok((page.get('brine_state_sync_lag_seconds{channel="keys",peer="m2"}') ?? 0) >= 20);
    write({ keys: { m2: entry(1350, 3) } });
    page = (await scrapeMetrics(m)).values;
    assert.equal(page.get('brine_state_sync_bytes_total{channel="keys",peer="m2"}'), 1350, "the counter moved with a transfer");
    assert.equal(page.get('brine_state_sync_lag_seconds{channel="keys",peer="m2"}'), 0, "caught up");
    // the nonce owner check's counters: sampled onto the board every second, as the service counts them
    const nonceOwner = m.server.clusterService!.nonceOwnerCounters!;
    assert.equal(page.get('brine_nonce_owner_total{what="stand_in"}'), nonceOwner.standIn);
    nonceOwner.asks += 7;
    nonceOwner.standIn += 2;
    for (let i = 0; i < 50 && page.get('brine_nonce_owner_total{what="asks"}') !== nonceOwner.asks; i++) {
      await new Promise((r) => setTimeout(r, 100));
      page = (await scrapeMetrics(m)).values;
    }
    assert.equal(page.get('brine_nonce_owner_total{what="asks"}'), nonceOwner.asks, "the counter moved with the service's");
    assert.equal(page.get('brine_nonce_owner_total{what="stand_in"}'), nonceOwner.standIn);
    assert.equal(page.get('brine_nonce_owner_total{what="undecided"}'), nonceOwner.undecided);
    const r = await runCli("salt-run", ["-c", writeConfigDir(m), "brine.stats", "--out", "json"]);
    assert.equal(r.code, 0, r.stderr);
    const stats = JSON.parse(r.stdout) as Record<string, Record<string, number>>;
    assert.equal(stats.brine_state_sync_bytes_total!['{channel="keys",peer="m2"}'], 1350);
    assert.equal(stats.brine_state_sync_transfers_total!['{channel="keys",peer="m2"}'], 3);
    assert.equal(stats.brine_nonce_owner_total!['{what="asks"}'], nonceOwner.asks);
  } finally {
    await m.stop();
  }
});
