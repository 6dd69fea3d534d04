/**
 * The state-sync figures of the metrics (src/shared/metrics/families.ts) from the state-sync thread's status file:
 * bytes, items and transfers per channel and peer as counters, the lag (since when a peer's announced keys are
 * not here) and the age of the last transfer as gauges, the series bounded; brine.stats prints them keyed by labels.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { families, forPerson, stateSyncSeriesMax, type Family } from "../../src/shared/metrics/families.js";
import { MetricsBoard } from "../../src/shared/metrics/board.js";
import type { StateSyncStatus } from "../../src/shared/cluster-health.js";

const now = Date.parse("2026-11-25T21:00:00Z");
const iso = (msAgo: number) => new Date(now - msAgo).toISOString();

function byName(fams: Family[], name: string): Map<string, number> {
  const f = fams.find((x) => x.name === name);
  assert.ok(f && f.type !== "histogram", name);
  return new Map(f.samples.map((s) => [`${s.labels.channel}/${s.labels.peer}`, s.value]));
}

test("state-sync counters and gauges come from the status file, per channel and peer", () => {
  const status: StateSyncStatus = {
    keys: {
      m2: { at: iso(10_000), items: 0, bytes: 0, deleted: 0, errors: 0, items_total: 40, bytes_total: 18_000, transfers: 7, behind_since: iso(30_000) },
      m3: { at: iso(5_000), items: 2, bytes: 900, deleted: 0, errors: 0, items_total: 2, bytes_total: 900, transfers: 1 },
    },
    // an entry from before the sums were kept: its last transfer stands for them
    file_roots: { m2: { at: iso(60_000), items: 3, bytes: 4096, deleted: 1, errors: 0 } },
    // a peer that announced keys before any transfer from it
    denied_keys: { m4: { at: iso(2_000), items: 0, bytes: 0, deleted: 0, errors: 0, items_total: 0, bytes_total: 0, transfers: 0, behind_since: iso(2_000) } },
  };
  const fams = families({ board: new MetricsBoard().read(), stateSync: status, now });
  assert.deepEqual(Object.fromEntries(byName(fams, "brine_state_sync_bytes_total")), { "keys/m2": 18_000, "keys/m3": 900, "file_roots/m2": 4096, "denied_keys/m4": 0 });
  assert.deepEqual(Object.fromEntries(byName(fams, "brine_state_sync_items_total")), { "keys/m2": 40, "keys/m3": 2, "file_roots/m2": 3, "denied_keys/m4": 0 });
  assert.deepEqual(Object.fromEntries(byName(fams, "brine_state_sync_transfers_total")), { "keys/m2": 7, "keys/m3": 1, "file_roots/m2": 1, "denied_keys/m4": 0 });
  assert.deepEqual(Object.fromEntries(byName(fams, "brine_state_sync_lag_seconds")), { "keys/m2": 30, "keys/m3": 0, "file_roots/m2": 0, "denied_keys/m4": 2 });
  assert.deepEqual(Object.fromEntries(byName(fams, "brine_state_sync_last_transfer_age_seconds")), { "keys/m2": 10, "keys/m3": 5, "file_roots/m2": 60 }, "no age for a pair never transferred");
  const person = forPerson(fams) as Record<string, Record<string, number>>;
  assert.equal(person.brine_state_sync_lag_seconds!['{channel="keys",peer="m2"}'], 30);
  // without a status file (not clustered, or nothing transferred yet) there are no state-sync families at all
  assert.ok(!families({ board: new MetricsBoard().read() }).some((f) => f.name.startsWith("brine_state_sync_")));
});

test("a status file naming more channel-peer pairs than the bound shows the bound's worth of series", () => {
  const peers: StateSyncStatus[string] = {};
  for (let i = 0; i < stateSyncSeriesMax + 50; i++) peers[`m${i}`] = { at: iso(1000), items: 1, bytes: 1, deleted: 0, errors: 0 };
  const fams = families({ board: new MetricsBoard().read(), stateSync: { keys: peers }, now });
  assert.equal(byName(fams, "brine_state_sync_bytes_total").size, stateSyncSeriesMax);
});
