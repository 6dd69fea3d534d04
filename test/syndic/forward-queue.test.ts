/**
 * The syndic's forward queue: entries come back oldest first, survive closing and reopening (a syndic
 * restart), leave only when removed (acknowledged), and past the bound the oldest are dropped.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ForwardQueue, type QueuedReturn } from "../../src/syndic/forward-queue.js";

const ret = (n: number): QueuedReturn => ({ master: null, jid: `2026112512000000000${n % 10}`, id: `m${n}`, fun: "test.ping", ret: { return: true, retcode: 0 } });

test("the forward queue keeps arrival order across a reopen, forgets only what is removed, and drops the oldest past its bound", async () => {
  const dir = path.join(mkdtempSync(path.join(os.tmpdir(), "brine-fq-")), "q");
  let q = new ForwardQueue(dir, 5);
  await Promise.all([1, 2, 3].map((n) => q.push(ret(n))));
  assert.deepEqual(q.peek(10).map((e) => e.value.id), ["m1", "m2", "m3"]);
  await q.close();

  q = new ForwardQueue(dir, 5);
  assert.equal(q.size, 3, "still there after a restart");
  const first = q.peek(2);
  await q.remove(first.map((e) => e.key));
  assert.deepEqual(q.peek(10).map((e) => e.value.id), ["m3"]);
  for (const n of [4, 5, 6, 7, 8, 9]) await q.push(ret(n));
  assert.equal(q.size, 5);
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(q.peek(10).map((e) => e.value.id), ["m5", "m6", "m7", "m8", "m9"], "the oldest were dropped");
  await q.push(ret(10));
  await q.close();
  q = new ForwardQueue(dir, 5);
  assert.equal(q.peek(10).at(-1)!.value.id, "m10", "new keys follow the old ones after a reopen");
  await q.close();
});
