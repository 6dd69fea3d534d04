/**
 * The main thread's side of the return watches (src/shared/job-return-watch.ts): which bus frames are a watched
 * job's returns (read from the frame without decoding it), who gets them, when a watch ends (unwatch, its
 * deadline, checked without a timer), and the bound on jids watched at once.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { jobReturnOfFrame, packEvent, packEventEncoded } from "../../src/shared/event-frame.js";
import { decodeWire, encodeWire } from "../../src/shared/protocol/msgpack.js";
import { ReturnWatches, returnWatchesMax, type ReturnWatchMsg } from "../../src/shared/job-return-watch.js";

const JID = "20261126010000000001";

test("a job return's frame gives its jid, minion id and data; other frames give nothing", () => {
  const r = jobReturnOfFrame(packEvent(`salt/job/${JID}/ret/web-1.example`, { return: "hi", retcode: 0, id: "web-1.example" }));
  assert.ok(r);
  assert.equal(r.jid, JID);
  assert.equal(r.id, "web-1.example");
  assert.deepEqual({ ...(decodeWire(Buffer.from(r.data)) as object), _stamp: undefined }, { return: "hi", retcode: 0, id: "web-1.example", _stamp: undefined });
  // a big return: the body's length in 4 bytes
  const big = jobReturnOfFrame(packEvent(`salt/job/${JID}/ret/m`, { return: "x".repeat(70_000) }));
  assert.equal((decodeWire(Buffer.from(big!.data)) as { return: string }).return.length, 70_000);
  const medium = jobReturnOfFrame(packEventEncoded(`salt/job/${JID}/ret/m`, encodeWire({ return: "y".repeat(300) })));
  assert.equal((decodeWire(Buffer.from(medium!.data)) as { return: string }).return.length, 300);
  for (const tag of [`salt/job/${JID}/new`, JID, `salt/job/${JID}/publish`, `salt/run/${JID}/ret`, `salt/job/${JID}/sub/m/error/state.sls`, "minion/refresh/m"]) {
    assert.equal(jobReturnOfFrame(packEvent(tag, { x: 1 })), undefined, tag);
  }
  assert.equal(jobReturnOfFrame(Buffer.from("not a frame at all")), undefined);
  const cut = packEvent(`salt/job/${JID}/ret/m`, { return: 1 });
  assert.equal(jobReturnOfFrame(cut.subarray(0, 20)), undefined, "a truncated frame");
});

test("the returns of a watched jid go to each worker watching it, until it unwatches or its deadline passes", () => {
  const posted: ReturnWatchMsg[] = [];
  let now = 1_000;
  const w = new ReturnWatches((m) => posted.push(m), () => now);
  const frame = (jid: string, id: string) => packEvent(`salt/job/${jid}/ret/${id}`, { return: id });
  // nothing watched: nothing read, nothing posted
  w.offer(frame(JID, "a"));
  assert.equal(posted.length, 0);

  w.onMessage({ k: "watch", from: "w1", id: 1, jid: JID, untilMs: 5_000 });
  w.onMessage({ k: "watch", from: "w2", id: 7, jid: JID, untilMs: 2_000 });
  assert.deepEqual(posted.splice(0), [{ k: "ok", to: "w1", id: 1 }, { k: "ok", to: "w2", id: 7 }]);
  w.offer(frame(JID, "a"));
  w.offer(frame("20261126010000000002", "a"));
  w.offer(packEvent(`salt/job/${JID}/new`, { minions: ["a"] }));
  assert.deepEqual(posted.map((m) => [m.k, "to" in m ? m.to : "", m.k === "ret" ? m.minion : ""]), [["ret", "w1", "a"], ["ret", "w2", "a"]]);
  posted.length = 0;

  // w2's deadline passed: only w1 gets the next one; then w1 unwatches and nothing is watched
  now = 3_000;
  w.offer(frame(JID, "b"));
  assert.deepEqual(posted.map((m) => (m.k === "ret" ? [m.to, m.minion] : m.k)), [["w1", "b"]]);
  w.onMessage({ k: "unwatch", from: "w1", jid: JID });
  assert.equal(w.size, 0);
  posted.length = 0;
  w.offer(frame(JID, "c"));
  assert.equal(posted.length, 0);

  // a watch without a jid is refused
  w.onMessage({ k: "watch", from: "w1", id: 2, jid: "../x", untilMs: 9_000 });
  assert.equal(posted[0]!.k, "err");
});

test("at most returnWatchesMax jids are watched at once: past it a watch is refused, once expired ones are swept", () => {
  const posted: ReturnWatchMsg[] = [];
  let now = 0;
  const w = new ReturnWatches((m) => posted.push(m), () => now);
  for (let i = 0; i < returnWatchesMax; i++) w.onMessage({ k: "watch", from: "w", id: i, jid: `2026112601${String(i).padStart(10, "0")}`, untilMs: i < 10 ? 100 : 10_000 });
  assert.equal(w.size, returnWatchesMax);
  posted.length = 0;
  w.onMessage({ k: "watch", from: "w", id: -1, jid: "20261126020000000000", untilMs: 10_000 });
  assert.equal(posted[0]!.k, "err");
  assert.match((posted[0] as { text: string }).text, /too many jobs' returns are watched/);
  // ten of them expire: room again
  now = 200;
  posted.length = 0;
  w.onMessage({ k: "watch", from: "w", id: -2, jid: "20261126020000000000", untilMs: 10_000 });
  assert.deepEqual(posted, [{ k: "ok", to: "w", id: -2 }]);
  assert.equal(w.size, returnWatchesMax - 9);
});
