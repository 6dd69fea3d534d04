/**
 * No forwarded job return can make the state-sync thread's heap bound abort the master (docs/ARCHITECTURE.md "Heap
 * bounds and the largest input"). A thread that reaches its V8 heap bound is meant to end alone and be restarted, but
 * V8 aborts the whole process (FATAL ERROR: Reached heap limit, SIGABRT) when it goes on allocating past the bound
 * plus node's 16 MiB of leeway before the thread stops. The mirror kept each call's decoded events while their writes
 * committed, so four returns of 4,000,000 empty maps in flight (each one a minion may send) aborted the master; and it
 * decoded a forwarded event under the bus's limits (50,000,000 elements), so one 8 MiB frame of empty maps ended the
 * thread. The scenario runs in a child process (forwarded-returns-heap-bound-child.ts) so that an abort is seen as
 * one, not as this test's death.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { msgpackElementsMax } from "../../src/shared/protocol/limits.js";
import { stateSyncHeapLimits } from "../../src/main-thread/state-sync-host.js";

/** the largest returns in flight at once: four aborted the master before the fix */
const BIG = 4;

test(`${BIG} forwarded returns of ${msgpackElementsMax.toLocaleString("en-US")} empty maps at once, then one of twice that, reach the state-sync thread under its ${stateSyncHeapLimits.maxOldGenerationSizeMb} MiB bound: the master is not aborted, the thread does not restart, the largest returns are stored, the oversized one is refused with a log line, and a small one after it is stored`, { timeout: 300_000 }, () => {
  const child = fileURLToPath(new URL("./forwarded-returns-heap-bound-child.js", import.meta.url));
  const r = spawnSync(process.execPath, [child, String(BIG)], { encoding: "utf8", timeout: 280_000, maxBuffer: 16 << 20 });
  const out = `${r.stdout}\n${r.stderr}`;
  assert.equal(r.signal, null, `the child was ended by ${r.signal} (V8 aborts on "Reached heap limit"):\n${out.slice(-3000)}`);
  assert.equal(r.status, 0, `the child exited ${r.status}:\n${out.slice(-3000)}`);
  const line = r.stdout.trim().split("\n").filter((l) => l.startsWith("{")).pop();
  assert.ok(line, `no result line:\n${out.slice(-3000)}`);
  const seen = JSON.parse(line) as { restarts: number; dropped: number; stored: Record<string, number> };
  assert.equal(seen.restarts, 0, "the state-sync thread did not reach its bound");
  assert.equal(seen.dropped, 0, "the mirror took every call");
  const expected: Record<string, number> = { small: 3 };
  for (let i = 0; i < BIG; i++) expected[`max${i}`] = msgpackElementsMax - 16;
  assert.deepEqual(seen.stored, expected);
  assert.match(out, /a forwarded event frame of \d+ bytes was not stored: .*4001024 elements/);
});
