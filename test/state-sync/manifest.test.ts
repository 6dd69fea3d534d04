/** The pure rules of state-sync manifests (src/workers/state-sync/manifest.ts): paths, diffs, scans, order (range summaries: range-tree.test.ts). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { afterScan, byManifest, byPath, manifestKey, shortPathBytesMax, tombstoneKeepMs, checkItemPath, chunkRanges, diffPage, entryFromWire, entryToWire, parseChannel, policyOf, tombstone, validEntry, type Channel, type ManifestEntry } from "../../src/workers/state-sync/manifest.js";
import { cbor } from "../../src/shared/cbor.js";

const H1 = "1".repeat(64);
const H2 = "2".repeat(64);
const live = (p: string, h: string, t: number, m = 0o644): ManifestEntry => ({ p, s: 10, h, m, t });

test("item paths a peer may send are confined: traversal, absolute, NUL, over-long and misshapen paths are refused with a reason", () => {
  const rows: [Channel, unknown, string | null][] = [
    ["file_roots", "base/top.sls", null],
    ["file_roots", "base/a/b/c.txt", null],
    ["file_roots", "base/../../etc/passwd", "'..' segment"],
    ["file_roots", "base/./x", "'.' segment"],
    ["file_roots", "/etc/passwd", "absolute"],
    ["file_roots", "base//x", "empty segment"],
    ["file_roots", "base/x/", "empty segment"],
    ["file_roots", "base/a\0b", "contains NUL"],
    ["file_roots", `base/${"a".repeat(256)}`, "a segment longer than 255 bytes"],
    ["file_roots", `base/${"é".repeat(128)}`, "a segment longer than 255 bytes"],
    ["file_roots", `base/${"a/".repeat(2100)}x`, "longer than 4096 bytes"],
    ["file_roots", "top.sls", "not <saltenv>/<path>"],
    ["file_roots", "base/.git/config", "'.git' is never carried"],
    ["file_roots", "base/.brine-part-abc", "a partial-file name"],
    ["file_roots", "", "empty or not a string"],
    ["file_roots", 42, "empty or not a string"],
    ["keys", "accepted/minion1", null],
    ["keys", "pending/minion1", null],
    ["keys", "rejected/minion1", null],
    ["keys", "denied/minion1", "state 'denied' is not carried by keys"],
    ["denied_keys", "denied/minion1", null],
    ["keys", "accepted/a/b", "not <state>/<id>"],
    ["keys", "accepted/..", "'..' segment"],
    ["keys", "accepted/.hidden", "not a valid minion id"],
    ["keys", "accepted/a\\b", "not a valid minion id"],
    ["keys", "../minions/x", "'..' segment"],
    ["bank:jobs/loads", "20261125181500123456", null],
    ["bank:jobs/returns", "20261125181500123456/minion1", null],
    ["bank:jobs/loads", "a\0b", "contains NUL"],
  ];
  for (const [ch, p, why] of rows) {
    const r = checkItemPath(ch, p);
    if (why === null) assert.ok("parts" in r, `${ch} ${JSON.stringify(p)} should pass: ${JSON.stringify(r)}`);
    else assert.deepEqual(r, { error: why }, `${ch} ${JSON.stringify(p)}`);
  }
});

test("channel names are Salt's, and each channel merges by its own policy", () => {
  assert.equal(parseChannel("keys"), "keys");
  assert.equal(parseChannel("denied_keys"), "denied_keys");
  assert.equal(parseChannel("bank:jobs/loads"), "bank:jobs/loads");
  assert.equal(parseChannel("bank:minions/data"), undefined);
  assert.equal(parseChannel("roots"), undefined);
  assert.equal(policyOf("keys"), "newer");
  assert.equal(policyOf("file_roots"), "mirror");
  assert.equal(policyOf("bank:jobs/nocache"), "add");
});

test("entries from a peer are checked for types and bounds", () => {
  assert.ok(validEntry(live("base/x", H1, 5)));
  assert.ok(validEntry(tombstone("base/x", 5)));
  assert.ok(!validEntry({ p: "base/x", s: -1, h: H1, m: 0o644, t: 1 }));
  assert.ok(!validEntry({ p: "base/x", s: 1, h: "xyz", m: 0o644, t: 1 }));
  assert.ok(!validEntry({ p: "base/x", s: 1, h: H1, m: 0o644, t: Number.NaN }));
  assert.ok(!validEntry({ p: "base/x", s: 1, h: H1, m: 0o17777, t: 1 }));
  assert.ok(!validEntry(null));
});

test("keys merge by last writer: newer items are fetched, newer tombstones delete, older news change nothing, equal stamps break by hash", () => {
  const local = new Map<string, ManifestEntry>([
    ["accepted/a", live("accepted/a", H1, 100)],
    ["accepted/b", live("accepted/b", H1, 100)],
    ["pending/c", live("pending/c", H1, 100)],
    ["accepted/d", tombstone("accepted/d", 200)],
    ["accepted/e", live("accepted/e", H1, 100)],
    ["accepted/f", live("accepted/f", H1, 100)],
  ]);
  const remote = [
    live("accepted/a", H2, 150), // newer content: fetch
    live("accepted/b", H2, 50), // older: nothing
    tombstone("pending/c", 150), // deleted after ours: delete
    live("accepted/d", H1, 150), // re-created before our delete: nothing
    live("accepted/e", H2, 100), // same stamp, larger hash: fetch (both sides pick H2)
    live("accepted/f", H1, 300), // same content, newer stamp: adopt the stamp only
    live("accepted/g", H1, 10), // new here: fetch
    tombstone("accepted/h", 10), // never seen here: adopt the tombstone
  ];
  const d = diffPage("newer", remote, (p) => local.get(p));
  assert.deepEqual(d.fetch.map((e) => e.p), ["accepted/a", "accepted/e", "accepted/g"]);
  assert.deepEqual(d.delete.map((e) => e.p), ["pending/c"]);
  assert.deepEqual(d.adopt.map((e) => e.p), ["accepted/f", "accepted/h"]);
  // and the other way round, the side with H2 at the same stamp keeps it
  const back = diffPage("newer", [live("accepted/e", H1, 100)], () => live("accepted/e", H2, 100));
  assert.deepEqual(back, { fetch: [], delete: [], adopt: [] });
});

test("roots pushed by sync_roots mirror the source for every path it names, whatever the stamps; paths it does not name stay", () => {
  const local = new Map<string, ManifestEntry>([
    ["base/a", live("base/a", H1, 999)],
    ["base/b", live("base/b", H1, 999)],
    ["base/c", live("base/c", H1, 999, 0o644)],
    ["base/only-here", live("base/only-here", H1, 1)],
  ]);
  const d = diffPage("mirror", [live("base/a", H2, 1), tombstone("base/b", 1), live("base/c", H1, 1, 0o755), live("base/new", H1, 1), tombstone("base/gone", 1)], (p) => local.get(p));
  assert.deepEqual(d.fetch.map((e) => e.p), ["base/a", "base/c", "base/new"]);
  assert.deepEqual(d.delete.map((e) => e.p), ["base/b"]);
  assert.deepEqual(d.adopt.map((e) => e.p), ["base/gone"]);
});

test("banks only add what is missing: nothing is overwritten or deleted", () => {
  const local = new Map<string, ManifestEntry>([["j1", live("j1", H1, 0)]]);
  const d = diffPage("add", [live("j1", H2, 0), live("j2", H1, 0), tombstone("j3", 5)], (p) => local.get(p));
  assert.deepEqual(d, { fetch: [live("j2", H1, 0)], delete: [], adopt: [] });
});

test("a rescan turns a vanished item into a tombstone stamped now (kept as it was when its root cannot be read), keeps recent tombstones and forgets old ones", () => {
  const now = 10 * tombstoneKeepMs;
  const rows: [string, ManifestEntry | undefined, ManifestEntry | undefined, boolean, ManifestEntry | undefined][] = [
    ["still there", live("accepted/a", H1, 100), live("accepted/a", H1, 100), false, live("accepted/a", H1, 100)],
    ["new", undefined, live("accepted/e", H2, now), false, live("accepted/e", H2, now)],
    ["vanished", live("accepted/b", H1, 100), undefined, false, tombstone("accepted/b", now)],
    ["vanished, stamped after its last change", live("accepted/b", H1, now + 5), undefined, false, tombstone("accepted/b", now + 6)],
    ["its root unreadable", live("accepted/b", H1, 100), undefined, true, live("accepted/b", H1, 100)],
    ["recent tombstone", tombstone("accepted/c", now - 1000), undefined, false, tombstone("accepted/c", now - 1000)],
    ["old tombstone", tombstone("accepted/d", now - tombstoneKeepMs - 1), undefined, false, undefined],
    ["back after a tombstone", tombstone("accepted/c", now - 1000), live("accepted/c", H2, now), false, live("accepted/c", H2, now)],
  ];
  for (const [what, prev, found, keep, want] of rows) assert.deepEqual(afterScan(prev, found, now, keep), want, what);
});

test("the manifest's order is code-point order (LMDB's UTF-8 byte order), not JavaScript's code units; chunk ranges cover a file from where a transfer resumes", () => {
  const sorted = ["a", "a.b", "a/b", "b", "\uffff", "\u{10000}"];
  assert.deepEqual([...sorted].reverse().sort(byPath), sorted);
  assert.ok(byPath("\u{10000}", "\uffff") > 0 && "\u{10000}" < "\uffff", "where code units and code points disagree");
  assert.deepEqual(sorted.map((s) => Buffer.from(s)).sort(Buffer.compare).map((b) => b.toString()), sorted, "the same as UTF-8 byte order");
  assert.deepEqual(chunkRanges(10, 4), [{ off: 0, len: 4 }, { off: 4, len: 4 }, { off: 8, len: 2 }]);
  assert.deepEqual(chunkRanges(10, 4, 8), [{ off: 8, len: 2 }]);
  assert.deepEqual(chunkRanges(0, 4), []);
});

test("a manifest entry crosses the wire with its hash as 32 bytes and a tombstone as path, stamp and mark; the hex form of an older peer is still taken", () => {
  const live = { p: "base/top.sls", s: 12, h: "ab".repeat(32), m: 0o644, t: 1000 };
  const dead = { p: "base/old.sls", s: 0, h: "", m: 0, t: 2000, d: 1 as const };
  const w = entryToWire(live);
  assert.ok(w.h instanceof Uint8Array && w.h.byteLength === 32);
  assert.deepEqual(entryFromWire(w), live);
  assert.deepEqual(entryToWire(dead), { p: "base/old.sls", t: 2000, d: 1 });
  assert.deepEqual(entryFromWire(entryToWire(dead)), dead);
  assert.deepEqual(entryFromWire(live), live, "hex from an older peer, unchanged");
  assert.ok(validEntry(entryFromWire(cbor.decode(cbor.encode(w)))), "valid after CBOR both ways");
  assert.equal(validEntry(entryFromWire({ ...w, h: new Uint8Array(31) })), false, "a hash of another length is refused");
  assert.ok(cbor.encode(w).byteLength < cbor.encode(live).byteLength - 30);
});

test("a path longer than an LMDB key is kept under a key of at most 1,978 bytes that sorts against every short path as the path does", () => {
  const seg = (c: string) => c.repeat(200);
  const dirs = ["a", "b", "c", "d", "e", "f", "g", "h"].map(seg).join("/"); // 1,607 bytes: base/<dirs>/<j> is 1,813
  const longs = [
    `base/${dirs}/${seg("j")}/${seg("k")}/${seg("k")}/x.sls`,
    `base/${dirs}/${seg("j")}/${seg("k")}/${seg("k")}/y.sls`, // shares more than shortPathBytesMax bytes with the one above
    `base/${dirs}/${seg("j")}/${"é".repeat(120)}/z.sls`, // the cut falls inside a two-byte character
    `base/${dirs}/${seg("j")}/${"\u{1F600}".repeat(60)}/z.sls`, // inside a four-byte one
  ];
  const shorts = [
    "base/a.sls",
    `base/${dirs}`,
    `base/${dirs}/${seg("j")}`,
    `base/${dirs}/${seg("j")}/${"k".repeat(100)}`,
    `base/${dirs}/${seg("j")}/${"k".repeat(126)}`, // as long as a short path can be (1,940 bytes)
    `base/${dirs}/${seg("j")}/${"é".repeat(61)}`,
    `base/${dirs}/${seg("j")}/${"\u{1F600}".repeat(30)}`,
    `base/${dirs}/${seg("j")}/l`,
    `base/${dirs}/${seg("j")}/${"\uE000"}`,
    "base/zzz.sls",
  ];
  assert.equal(Buffer.byteLength(shorts[4]!), shortPathBytesMax);
  for (const s of shorts) {
    assert.ok(Buffer.byteLength(s) <= shortPathBytesMax, `${Buffer.byteLength(s)}`);
    assert.equal(manifestKey(s), s);
  }
  for (const p of longs) {
    const k = manifestKey(p);
    assert.notEqual(k, p);
    assert.ok(Buffer.byteLength(k) <= 1978, `key of ${Buffer.byteLength(p)} bytes is ${Buffer.byteLength(k)} bytes`);
    assert.equal(manifestKey(p), k, "the same path, the same key");
    for (const s of shorts) assert.equal(Math.sign(byPath(s, k)), Math.sign(byPath(s, p)), `${s.slice(-20)} against ${p.slice(-30)}`);
  }
  assert.notEqual(manifestKey(longs[0]!), manifestKey(longs[1]!), "two long paths sharing their key prefix have keys of their own");
  const all = [...shorts, ...longs];
  const byKey = [...all].sort(byManifest);
  const byP = [...all].sort(byPath);
  // the two orders differ at most between the long paths that share a key prefix (x.sls and y.sls)
  assert.deepEqual(byKey.filter((p) => p !== longs[0] && p !== longs[1]), byP.filter((p) => p !== longs[0] && p !== longs[1]));
});
