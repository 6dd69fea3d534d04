/** bench/state-sync.ts's verdict rows: computed from the measured peaks, never written in. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { verdictRows } from "../../bench/state-sync.js";

const MiB = 1024; // the peaks are in KiB
const rowOf = (rows: ReturnType<typeof verdictRows>, start: string) => rows.find((r) => r.figure.startsWith(start));

test("a 1M pull that peaks within 10 % of the 100k pull is bounded, and flat only if the 1k pull is as high", () => {
  const rows = verdictRows([
    { items: 1000, puller: 12.7 * MiB, server: 13.5 * MiB },
    { items: 100_000, puller: 17.5 * MiB, server: 19.5 * MiB },
    { items: 1_000_000, puller: 17.7 * MiB, server: 22.0 * MiB },
  ]);
  const bounded = rowOf(rows, "bounded: puller's")!;
  assert.ok(Math.abs(bounded.value - (17.7 / 17.5 - 1) * 100) < 1e-9);
  assert.equal(bounded.target, 10);
  assert.match(bounded.note!, /: met$/);
  assert.match(rowOf(rows, "bounded: server's")!.note!, /19\.5 → 22\.0 MiB: not met$/);
  assert.match(rowOf(rows, "flat: puller's")!.note!, /12\.7 → 17\.7 MiB: not met$/);
  assert.equal(rows.length, 4);
});

test("without a pull of 1M items there is no bounded verdict, only the flat one", () => {
  const rows = verdictRows([
    { items: 1000, puller: 13 * MiB, server: 13 * MiB },
    { items: 10_000, puller: 14 * MiB, server: 14 * MiB },
  ]);
  assert.deepEqual(rows.map((r) => r.figure.split(":")[0]), ["flat", "flat"]);
  assert.match(rows[0]!.note!, /: met$/);
  assert.deepEqual(verdictRows([{ items: 1000, puller: 1, server: 1 }]), []);
});
