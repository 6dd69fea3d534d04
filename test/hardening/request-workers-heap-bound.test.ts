/**
 * No request a signed-in minion may send can hold a request worker at its V8 heap bound (docs/ARCHITECTURE.md "Heap
 * bounds and the largest input"). A worker runs up to batchFramesMax × concurrentTasksPerWorker requests at once, and
 * a minion-initiated return (`jid: req`) keeps its decoded load while its job's load commits: twelve such returns of
 * 4,000,000 one-byte non-UTF-8 strings (416 MiB of heap each once decoded, 8 MB on the wire), sent at once on one
 * connection, took the worker past 4 GiB. It then spent minutes collecting garbage at its bound (none of the twelve
 * answered within 120 s: the child exits 3) until node ended it (ERR_WORKER_OUT_OF_MEMORY, after 219 s in one run)
 * and every request it held was answered "Some exception handling minion payload", none stored. Now each decode is charged to the
 * worker's decode budget (decode-budget.ts): what would pass it is answered "bad load" (the minion signs in again
 * and resends it), logged and counted, and the rest are stored. The scenario runs in a child process
 * (request-workers-heap-bound-child.ts), so that an abort would be seen as one.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { msgpackElementsMax } from "../../src/shared/protocol/limits.js";
import { decodedHeldBytesMax, requestWorkerHeapMb } from "../../src/workers/req-handler/limits.js";

/** the largest returns sent at once: twelve held the worker at its bound before the budget */
const BIG = 12;
/** each return's strings: all the elements a request may hold but its load map's own */
const ELEMENTS = msgpackElementsMax - 64;

test(`${BIG} minion-initiated returns of ${ELEMENTS.toLocaleString("en-US")} one-byte non-UTF-8 strings each at once, then another minion's return: the worker (bound ${requestWorkerHeapMb} MiB, budget ${decodedHeldBytesMax / 2 ** 20} MiB) answers every one, the heavy ones stored or refused "bad load" for its decode budget with a log line and a count each, and the other minion's return is stored`, { timeout: 300_000 }, () => {
  const child = fileURLToPath(new URL("./request-workers-heap-bound-child.js", import.meta.url));
  const r = spawnSync(process.execPath, [child, String(BIG), String(ELEMENTS)], { encoding: "utf8", timeout: 280_000, maxBuffer: 16 << 20 });
  const out = `${r.stdout}\n${r.stderr}`;
  assert.equal(r.signal, null, `the child was ended by ${r.signal}:\n${out.slice(-3000)}`);
  assert.equal(r.status, 0, `the child exited ${r.status} (3: a reply did not come within 120 s):\n${out.slice(-3000)}`);
  const line = r.stdout.trim().split("\n").filter((l) => l.startsWith("{")).pop();
  assert.ok(line, `no result line:\n${out.slice(-3000)}`);
  const seen = JSON.parse(line) as { answered: number; kinds: Record<string, number>; bystander: string; bystanderStored: boolean; heavyStored: number; refusedCounted: number; log: string[] };
  assert.equal(seen.answered, BIG);
  const stored = seen.kinds.sealed ?? 0;
  const refused = seen.kinds['"bad load"'] ?? 0;
  assert.equal(stored + refused, BIG, `every heavy return was stored or refused: ${JSON.stringify(seen.kinds)}`);
  assert.ok(stored >= 1, "the first one, with nothing else held, is stored");
  assert.equal(seen.heavyStored, stored, "each return answered as stored is in the job cache");
  const lines = seen.log.filter((l) => l.includes("refused: decoding it would pass this request thread's decode budget"));
  assert.equal(lines.length, refused, "each refusal has its log line");
  assert.equal(seen.refusedCounted, refused, "each refusal is counted (brine_request_lane_refused_total, reason decode_budget)");
  assert.equal(seen.bystander, "sealed");
  assert.equal(seen.bystanderStored, true);
  assert.ok(!seen.log.some((l) => l.includes("batch failed")), `no batch failed:\n${seen.log.join("\n")}`);
});
