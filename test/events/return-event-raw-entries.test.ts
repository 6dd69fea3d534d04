/**
 * A return's event re-sends the minion's own encoding of its load (minus nonce and tok, plus the
 * master's _stamp): decoded, it equals the event built by encoding the decoded load again, for small
 * and large maps (fixmap / map16), small and large bodies (bin 8 / 16 / 32), a minion-sent _stamp, and
 * keys msgpack allows but JS orders differently (integer keys).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { packEvent, packEventFromSpans, eventOfFrame } from "../../src/shared/event-frame.js";
import { decodeWire, newMapEntrySpans, wireLimits } from "../../src/shared/protocol/msgpack.js";
import { packSalt } from "../../src/lib/minion/wire.js";

const DROP = new Set(["nonce", "tok"]);
const now = new Date(Date.UTC(2026, 10, 21, 15, 54, 4, 342));

function bothWays(load: Record<string | number, unknown>): void {
  const wire = packSalt(load); // the minion side's encoder (Salt's old-spec msgpack)
  const spans = newMapEntrySpans();
  const decoded = decodeWire(wire, wireLimits, true, spans) as Record<string, unknown>;
  const fromSpans = eventOfFrame(decodeWire(packEventFromSpans("salt/job/1/ret/m", spans, DROP, now)));
  const { nonce: _n, tok: _t, ...rest } = decoded;
  const reencoded = eventOfFrame(decodeWire(packEvent("salt/job/1/ret/m", rest, now)));
  assert.ok(fromSpans && reencoded);
  assert.equal(fromSpans.tag, "salt/job/1/ret/m");
  assert.deepEqual(fromSpans.data, reencoded.data);
  assert.equal(fromSpans.data._stamp, "2026-11-21T15:54:04.342000");
  assert.equal("nonce" in fromSpans.data || "tok" in fromSpans.data, false);
}

test("a ping return", () => {
  bothWays({ cmd: "_return", id: "m", success: true, return: true, retcode: 0, jid: "20261121155404239755", fun: "test.ping", fun_args: [], nonce: "0".repeat(32), tok: Buffer.alloc(256, 7), _stamp: "from the minion" });
});

test("more than 15 entries, integer keys, nested and binary values", () => {
  const load: Record<string | number, unknown> = { cmd: "_return", id: "m", return: { a: [1, 2, { b: null }], c: Buffer.from([0xff, 0x00]) }, nonce: "1".repeat(32), 7: "seven" };
  for (let i = 0; i < 20; i++) load[`k${i}`] = i * 1.5;
  bothWays(load);
});

test("bodies past 255 and 65,535 bytes", () => {
  bothWays({ cmd: "_return", id: "m", return: "x".repeat(300), tok: "t" });
  bothWays({ cmd: "_return", id: "m", return: { out: "y".repeat(70_000) }, nonce: "2".repeat(32) });
});
