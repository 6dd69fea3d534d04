/** bench/commit-floor-pairs.ts: the ratio measured in turns, computed from adjacent segments, never written in. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { interleavedPairs, median, pairsRow, type BrineSegment } from "../../bench/commit-floor-pairs.js";
import type { FloorRun, OpenFloor } from "../../bench/commit-floor.js";

/**
 * A box whose speed drifts (`drifts`): every segment, brine's or the floor's, costs `scale` times its base, and
 * the scale doubles every second segment; otherwise it is 1. `extraMs` is added to brine's commits only (a
 * slower Raft thread).
 */
function box(brineBaseMs: number, floorBaseMs: number, drifts: boolean, extraMs = 0) {
  let segments = 0;
  const scale = () => (drifts ? 2 ** Math.floor(segments++ / 2) : 1);
  const order: string[] = [];
  const floor: OpenFloor = {
    segment: async (n: number): Promise<FloorRun> => {
      order.push("F");
      const ms = floorBaseMs * scale();
      return { lat: Array.from({ length: n }, () => ms), leaderRunUs: 1, followerRunUs: 1, leaderDiskBytes: 0, followerDiskBytes: 0, leaderTxnP50Ms: ms };
    },
    close: async () => undefined,
  };
  const brine = async (): Promise<BrineSegment> => {
    order.push("B");
    return { p50Ms: brineBaseMs * scale() + extraMs, leaderRaftUs: 1, followerRaftUs: 1, followerAllUs: 1 };
  };
  return { floor, brine, order };
}

test("the pairs alternate which side runs first and each ratio is taken from the two segments beside each other", async () => {
  const b = box(1.4, 1.0, true);
  const ps = await interleavedPairs(b.brine, b.floor, 4, 8);
  assert.deepEqual(b.order.join(""), "BFFBBFFB");
  assert.deepEqual(ps.map((p) => p.order), ["BF", "FB", "BF", "FB"]);
  // the box got 8× slower over the run, yet every pair saw one moment of it: 1.4 each time
  for (const p of ps) assert.ok(Math.abs(p.ratio - 1.4) < 1e-9, `pair ratio ${p.ratio}`);
  const row = pairsRow(ps, 8);
  assert.equal(row.value, 1.4);
  assert.equal(row.target, 1.5);
  assert.match(row.note!, /≤ 1\.5×: met$/);
});

test("0.3 ms more per brine commit on a steady 1 ms floor turns a met row into a not met one", async () => {
  const steady = box(1.4, 1.0, false);
  assert.match(pairsRow(await interleavedPairs(steady.brine, steady.floor, 6, 8), 8).note!, /: met$/);
  const slower = box(1.4, 1.0, false, 0.3);
  const row = pairsRow(await interleavedPairs(slower.brine, slower.floor, 6, 8), 8);
  assert.ok(row.value > 1.5, `value ${row.value}`);
  assert.match(row.note!, /≤ 1\.5×: not met$/);
});

test("the median of an even count of ratios is the mean of the middle two", () => {
  assert.equal(median([3, 1, 2, 10]), 2.5);
  assert.equal(median([5, 1, 3]), 3);
  assert.ok(Number.isNaN(median([])));
});
