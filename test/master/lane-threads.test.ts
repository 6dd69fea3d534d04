/** worker_threads is Salt's number of request workers in all, split between brine's two lanes. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { laneThreads } from "../../src/main-thread/req-pool.js";

test("worker_threads is split between the lanes: sign-ins half (rounded down), requests the rest, one each at least", () => {
  assert.deepEqual(laneThreads(5), { clear: 2, req: 3 }, "Salt's default: five threads in all, not five per lane");
  assert.deepEqual(laneThreads(2), { clear: 1, req: 1 });
  assert.deepEqual(laneThreads(1), { clear: 1, req: 1 }, "each lane needs a thread");
  assert.deepEqual(laneThreads(10), { clear: 5, req: 5 });
  assert.deepEqual(laneThreads(7.9), { clear: 3, req: 4 });
});
