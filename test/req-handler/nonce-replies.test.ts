/**
 * The reply memory's decisions (src/shared/nonce-replies.ts), as a table: what a frame whose nonce the master had
 * seen gets, by what the memory holds for that nonce, and how long and how much it holds.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { NonceReplies, entryOverheadBytes, resendRememberMs, type Recall } from "../../src/shared/nonce-replies.js";

const nonce = (n: number) => n.toString(16).padStart(32, "0");
const tag = (t: string) => t.repeat(32).slice(0, 32);
const key = (n: number, t = "a") => nonce(n) + tag(t);
const reply = (s: string) => new Uint8Array(Buffer.from(s));
const shown = (r: Recall) => (r.k === "reply" ? `reply ${Buffer.from(r.reply).toString()}` : r.k);

test("a copy's answer, by what is remembered for its nonce: its reply, a replay, or nothing", () => {
  const rows: { name: string; remembered?: { key: string; at: number }; copy: string; at: number; expect: string }[] = [
    { name: "nothing seen here (another master, a restart)", copy: key(1), at: 0, expect: "unknown" },
    { name: "a resend of the same bytes", remembered: { key: key(1), at: 0 }, copy: key(1), at: 1000, expect: "reply first" },
    { name: "the same nonce in other bytes", remembered: { key: key(1), at: 0 }, copy: key(1, "b"), at: 1000, expect: "other" },
    { name: "another nonce", remembered: { key: key(1), at: 0 }, copy: key(2), at: 1000, expect: "unknown" },
    { name: "the same bytes just before the memory forgets", remembered: { key: key(1), at: 0 }, copy: key(1), at: resendRememberMs - 1, expect: "reply first" },
    { name: "the same bytes once it has forgotten", remembered: { key: key(1), at: 0 }, copy: key(1), at: resendRememberMs, expect: "unknown" },
  ];
  for (const r of rows) {
    const m = new NonceReplies<string>();
    if (r.remembered) m.remember(r.remembered.key, reply("first"), r.remembered.at);
    assert.equal(shown(m.recall(r.copy, r.at)), r.expect, r.name);
  }
});

test("a copy that came while its first was in flight gets the first's reply; one in other bytes is refused", () => {
  const m = new NonceReplies<string>();
  m.wait(key(1), "same", 7);
  m.wait(key(1, "b"), "other", 7);
  assert.equal(m.waitingCopies, 2);
  // a batch up to 7 still open: nobody is refused yet
  assert.deepEqual(m.settleUnknown(5), []);
  const answered = m.remember(key(1), reply("first"), 0);
  assert.deepEqual(
    answered.map((a) => [a.who, a.why, a.reply && Buffer.from(a.reply).toString()]),
    [
      ["same", "same", "first"],
      ["other", "other", undefined],
    ],
  );
  assert.equal(m.waitingCopies, 0);
});

test("a copy whose first is in no batch that was in flight when it came is refused once those batches are done", () => {
  const m = new NonceReplies<string>();
  m.wait(key(1), "late", 7);
  assert.deepEqual(m.settleUnknown(7), [], "batch 7 still open");
  assert.deepEqual(m.settleUnknown(8), [{ who: "late", reply: undefined, why: "unknown", key: key(1) }], "every batch up to 7 done");
  m.wait(key(2), "idle", 9);
  assert.deepEqual(m.settleUnknown(undefined), [{ who: "idle", reply: undefined, why: "unknown", key: key(2) }], "no batch open");
  m.wait(key(3), "stopping", 9);
  assert.deepEqual(m.abandon(), [{ who: "stopping", reply: undefined, why: "unknown", key: key(3) }]);
  assert.equal(m.waitingCopies, 0);
});

test("bounded: the oldest replies go first past the byte bound, and a reply over its own bound is not kept", () => {
  const per = 100 + entryOverheadBytes;
  const m = new NonceReplies<string>(resendRememberMs, 3 * per, 150);
  for (let n = 1; n <= 5; n++) m.remember(key(n), new Uint8Array(100), n);
  assert.equal(m.size, 3);
  assert.equal(m.heldBytes, 3 * per);
  assert.deepEqual([1, 2, 3, 4, 5].map((n) => m.recall(key(n), 10).k), ["unknown", "unknown", "reply", "reply", "reply"]);
  m.remember(key(6), new Uint8Array(151), 11);
  assert.equal(m.recall(key(6), 12).k, "unknown", "over resendReplyBytesMax");
  // time forgets what the bound kept
  assert.equal(m.recall(key(5), 5 + resendRememberMs).k, "unknown");
  assert.equal(m.size, 0);
  assert.equal(m.heldBytes, 0);
});

test("a long run of remembered replies keeps its queue compact", () => {
  const m = new NonceReplies<string>(1000, 1 << 30, 1 << 20);
  for (let n = 1; n <= 50_000; n++) m.remember(key(n), new Uint8Array(1), n);
  assert.ok(m.size <= 1000, `${m.size} entries within 1000 ms`);
  assert.equal(m.recall(key(50_000), 50_000).k, "reply");
  assert.equal(m.recall(key(48_000), 50_000).k, "unknown");
});
