/**
 * A minion's two connections to the native transport each have a ZMTP session; what a session keeps for
 * subscriptions is made only when a topic comes (issue 17, memory per connected minion): a ROUTER's peers never
 * subscribe, and Salt's minions without zmq_filtering subscribe to "" only (a counter).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import { Subscriptions } from "../../src/shared/protocol/zmtp.js";

v8.setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

function heapAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

test("subscriptions to everything, or to nothing, keep no map per connection", () => {
  const n = 20_000;
  const before = heapAfterGc();
  const kept: Subscriptions[] = [];
  for (let i = 0; i < n; i++) {
    const s = new Subscriptions();
    if (i % 2) s.add(Buffer.alloc(0));
    kept.push(s);
  }
  const per = (heapAfterGc() - before) / n;
  // the object and its slot in `kept`: ~50 B; with an empty Map each it was ~230 B
  assert.ok(per < 120, `${per.toFixed(0)} B of V8 heap per connection's subscriptions`);
  assert.equal(kept[1]!.size, 1);
  assert.equal(kept[0]!.size, 0);
});

test("a topic's map goes with its last cancel, and the counts and matches stay libzmq's", () => {
  const s = new Subscriptions();
  const t = Buffer.from("broadcast");
  s.add(t);
  s.add(t);
  s.add(Buffer.from([0xc3, 0xff, 0x00]));
  assert.equal(s.size, 2);
  assert.equal(s.wants(Buffer.from("broadcast-and-more")), true);
  assert.equal(s.wants(Buffer.from([0xc3, 0xff, 0x00, 0x01])), true, "bytes above 0x7f and NUL compare as bytes");
  assert.equal(s.wants(Buffer.from([0xc3, 0xfe])), false);
  assert.deepEqual([...s.distinct()].map((b) => b.toString("hex")).sort(), [Buffer.from("broadcast").toString("hex"), "c3ff00"].sort());
  s.remove(t);
  assert.equal(s.has(t), true, "subscribed twice: one cancel leaves one");
  s.remove(t);
  s.remove(Buffer.from([0xc3, 0xff, 0x00]));
  assert.equal(s.has(t), false);
  assert.equal(s.size, 0);
  assert.equal(s.wants(Buffer.from("broadcast")), false);
  assert.deepEqual([...s.distinct()], []);
});
