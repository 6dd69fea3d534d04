/** The pure rules of cache sync: session key merging (session-merge.ts) and record checks (records.ts). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyString } from "../../src/shared/protocol/crypticle.js";
import { formatSessionFile, liveAlts, mergeSessionKeys, parseSessionFile, type SessionKeySet } from "../../src/lib/store/session-merge.js";
import { checkRecord, decodeRecords, encodeRecords, newerStamp } from "../../src/shared/sync-records.js";

const DAY = 86_400_000;

test("two masters that heard of the same two session keys in either order name the same one current and keep the other", () => {
  const now = 10 * DAY;
  const a = { key: generateKeyString(), t: now - 5000 };
  const b = { key: generateKeyString(), t: now - 4000 };
  const onA = mergeSessionKeys({ current: a, alts: [] }, b, now, DAY)!;
  const onB = mergeSessionKeys({ current: b, alts: [] }, a, now, DAY)!;
  assert.deepEqual(onA, onB);
  assert.equal(onA.current.key, b.key, "the newest is current");
  assert.deepEqual(liveAlts(onA, now, DAY).map((k) => k.key), [a.key], "the older stays usable");
  assert.equal(mergeSessionKeys(onA, a, now, DAY), undefined, "a key already known changes nothing");
});

test("an expired session key is neither taken nor kept", () => {
  const now = 10 * DAY;
  const old = { key: generateKeyString(), t: now - DAY - 1 };
  const cur = { key: generateKeyString(), t: now - 1000 };
  assert.equal(mergeSessionKeys({ current: cur, alts: [] }, old, now, DAY), undefined);
  const fresh = { key: generateKeyString(), t: now };
  const merged = mergeSessionKeys({ current: cur, alts: [old] }, fresh, now, DAY)!;
  assert.deepEqual([merged.current.key, ...merged.alts.map((k) => k.key)], [fresh.key, cur.key]);
});

test("a session file round-trips: the current key first (its time is the mtime), the others with their times", () => {
  const set: SessionKeySet = { current: { key: generateKeyString(), t: 1_700_000_000_123 }, alts: [{ key: generateKeyString(), t: 1_700_000_000_000 }] };
  const text = formatSessionFile(set);
  assert.equal(text.split("\n")[0], set.current.key, "a single master's reader sees the current key on the first line");
  assert.deepEqual(parseSessionFile(text, 1_700_000_000_123.7), set);
});

test("a peer's malformed cache-sync records are refused, good ones in the same batch kept", () => {
  const now = Date.now();
  const good = { k: "data", id: "web1", t: now, o: "m2", v: { grains: { os: "Debian" }, pillar: {} } };
  assert.equal(typeof checkRecord(good, now), "object");
  for (const bad of [
    { ...good, id: "../etc" },
    { ...good, t: now + 2 * DAY },
    { ...good, v: [1, 2] },
    { ...good, v: { grains: "x" } },
    { ...good, o: "" },
    { k: "sess", id: "web1", t: now, key: "short" },
    { k: "what", id: "web1", t: now },
  ]) {
    assert.equal(typeof checkRecord(bad, now), "string", JSON.stringify(bad));
  }
  const d = decodeRecords(encodeRecords([good as never, { ...good, id: "" } as never]), now);
  assert.equal(d.records.length, 1);
  assert.equal(d.refused, 1);
  assert.equal(decodeRecords(new Uint8Array([0xff, 0x00]), now).records.length, 0, "garbage decodes to nothing");
});

test("the last writer wins by time, then by origin, the same way on every master", () => {
  assert.ok(newerStamp({ t: 2, o: "m1" }, { t: 1, o: "m9" }));
  assert.ok(newerStamp({ t: 1, o: "m2" }, { t: 1, o: "m1" }));
  assert.ok(!newerStamp({ t: 1, o: "m1" }, { t: 1, o: "m2" }));
  assert.ok(newerStamp({ t: 0, o: "m1" }, undefined));
});
