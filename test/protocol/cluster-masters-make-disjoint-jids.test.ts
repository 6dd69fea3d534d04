/**
 * Masters of one cluster never make the same jid. Each master's jid clock starts every millisecond at microsecond
 * 0, so two masters publishing in the same millisecond made the same jid: a minion drops a publish whose jid it has
 * already seen (one job lost), and with ring placement the two jobs' returns merged (seen by the placement helper:
 * 977 unique jids of 1,000 published on five masters).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { JID_SLOTS, JidGenerator, jidToMs, setJidSlot, sharedJidClock } from "../../src/shared/protocol/jid.js";

test("five masters on one clock, publishing in the same milliseconds, make no jid twice once their slots are set", () => {
  let now = Date.UTC(2026, 10, 25, 18, 0, 0, 0);
  const members = ["m1", "m2", "m3", "m4", "m5"];
  const gens = members.map((id) => {
    const clock = sharedJidClock();
    assert.equal(setJidSlot(clock, id, members), members.indexOf(id));
    return new JidGenerator(() => now, clock);
  });
  const seen = new Set<string>();
  for (let ms = 0; ms < 200; ms++, now++) {
    // a burst in some milliseconds, more jids than a slot has in one (the clock runs ahead, still unique)
    const per = ms % 50 === 0 ? 40 : 3;
    for (const g of gens) for (let k = 0; k < per; k++) seen.add(g.next());
  }
  assert.equal(seen.size, 5 * (196 * 3 + 4 * 40));
});

test("without a slot two masters collide in the same millisecond (the bug), and each one's jids still increase", () => {
  const now = () => Date.UTC(2026, 10, 25, 18, 0, 0, 0);
  const a = new JidGenerator(now, sharedJidClock());
  const b = new JidGenerator(now, sharedJidClock());
  assert.equal(a.next(), b.next());
  const slotted = sharedJidClock();
  setJidSlot(slotted, "m2", ["m1", "m2"]);
  const c = new JidGenerator(now, slotted);
  let last = "";
  for (let i = 0; i < 100; i++) {
    const j = c.next();
    assert.ok(j > last, `${j} after ${last}`);
    // the jid's microsecond timestamp lies in slot 1 (m2 is second of the sorted members)
    assert.equal((BigInt(jidToMs(j)) * 1000n + BigInt(j.slice(17, 20))) % BigInt(JID_SLOTS), 1n);
    last = j;
  }
});

test("a master outside the membership has no slot; members past JID_SLOTS wrap", () => {
  const clock = sharedJidClock();
  assert.equal(setJidSlot(clock, "x", ["m1", "m2"]), undefined);
  const many = Array.from({ length: JID_SLOTS + 3 }, (_, i) => `n${String(i).padStart(3, "0")}`);
  assert.equal(setJidSlot(clock, many[JID_SLOTS + 1]!, many), 1);
});
