/** The state-sync thread's restart policy (src/main-thread/state-sync-host.ts restartWaitMs), as a table. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { restartDelayMaxMs, restartDelayMs, restartStableMs, restartWaitMs } from "../../src/main-thread/state-sync-host.js";

test("a thread that keeps dying waits twice as long each time up to the cap, and a thread that lived long starts over", () => {
  const rows: [string, number, number, number][] = [
    ["first death, at once", 0, 10, restartDelayMs],
    ["first death, after a long life", 0, restartStableMs * 2, restartDelayMs],
    ["second death soon after", restartDelayMs, 1500, 2 * restartDelayMs],
    ["third", 2 * restartDelayMs, 100, 4 * restartDelayMs],
    ["near the cap", 40_000, 100, restartDelayMaxMs],
    ["at the cap", restartDelayMaxMs, 100, restartDelayMaxMs],
    ["just short of a stable life", 8_000, restartStableMs - 1, 16_000],
    ["after a stable life", restartDelayMaxMs, restartStableMs, restartDelayMs],
  ];
  for (const [what, last, lived, want] of rows) assert.equal(restartWaitMs(last, lived), want, what);
});
