/**
 * A runner job's record as the job cache keeps it (job-record.ts): Salt's `{fun, jid, user, fun_args, _stamp, return,
 * success[, retcode]}`, the return put in as the msgpack bytes the runner thread made for its caller, never decoded.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { recordWithEncodedReturn } from "../../src/runners/job-record.js";
import { decodeWire, encodeWire } from "../../src/shared/protocol/msgpack.js";

test("a record made around a return's encoded bytes reads back as the record with the return, in Salt's key order", () => {
  const head = { fun: "runner.jobs.list_jobs", jid: "20261126120000000001", user: "root", fun_args: [], _stamp: "2026-11-26T12:00:00.000000" };
  const big = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`2026112612${String(i).padStart(10, "0")}`, { Function: "test.ping", Arguments: [i] }]));
  for (const [what, ret, tail] of [
    ["a small return", true, { success: true }],
    ["a large map (map32 bytes)", big, { success: true }],
    ["a failed runner", "boom", { success: false, retcode: 1 }],
  ] as const) {
    const rec = decodeWire(recordWithEncodedReturn(head, encodeWire(ret), tail)) as Record<string, unknown>;
    assert.deepEqual(Object.keys(rec), [...Object.keys(head), "return", ...Object.keys(tail)], what);
    assert.deepEqual(rec, { ...head, return: ret, ...tail }, what);
  }
});
