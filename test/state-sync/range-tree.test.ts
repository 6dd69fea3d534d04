/**
 * Range summaries and the walk down a tree of them (src/workers/state-sync/range-tree.ts), pure: where a puller goes
 * next for a given summary and manifest, and the bytes a whole resync costs, counted over the messages as the engine
 * encodes them (CBOR), with the server's answers made by the same functions the engine serves them with.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { cbor } from "../../src/shared/cbor.js";
import { byManifest, diffPage, entryToWire, tombstone, type ManifestEntry } from "../../src/workers/state-sync/manifest.js";
import { SummaryWalk, differingRanges, flatRangeItems, leafItemsMax, rangeItemsMin, rangesMax, subRequest, summarize, summaryFromWire, summaryToWire, treeDepthMax, treeFanout, treeRangeItems, type Stretch, type SummaryRange, type WalkStep } from "../../src/workers/state-sync/range-tree.js";
import { pageItemsMax, wireForm } from "../../src/workers/state-sync/messages.js";

const H1 = "1".repeat(64);
const H2 = "2".repeat(64);
const live = (p: string, h: string, t: number): ManifestEntry => ({ p, s: 10, h, m: 0o644, t });
const many = (n: number, h = H1) => Array.from({ length: n }, (_, i) => live(`base/f${String(i).padStart(6, "0")}`, h, 1));

/** The entries of a manifest (in order) within a stretch. */
function within(entries: readonly ManifestEntry[], s: Stretch): ManifestEntry[] {
  return entries.filter((e) => (s.from === undefined || byManifest(e.p, s.from) >= 0) && (s.to === undefined || byManifest(e.p, s.to) < 0));
}

/** Every step a walk takes against a server holding `server`, each sub-summary answered as the engine answers it. */
function walkAll(server: readonly ManifestEntry[], local: readonly ManifestEntry[], first: SummaryRange[]): WalkStep[] {
  const walk = new SummaryWalk((s) => within(local, s));
  walk.add(first, 0);
  const steps: WalkStep[] = [];
  for (let s = walk.next(); s; s = walk.next()) {
    steps.push(s);
    if (s.k === "sub") walk.add(summarize(within(server, s), treeRangeItems(s.c)), s.depth, s);
  }
  return steps;
}

test("a flat summary (the previous version's, for its pullers) cuts a manifest into about the square root of its size, and only the ranges whose live content differs here are asked", () => {
  assert.equal(flatRangeItems(10), rangeItemsMin);
  assert.equal(flatRangeItems(10_000), 100);
  assert.equal(flatRangeItems(100_000_000), Math.ceil(100_000_000 / rangesMax));
  const server = many(5000);
  const k = flatRangeItems(5000);
  const sum = summarize(server, k);
  assert.equal(sum.length, Math.ceil(5000 / k));
  assert.deepEqual([sum[0]!.a, sum[0]!.c, sum.at(-1)!.c], [server[0]!.p, k, 5000 - k * (sum.length - 1)]);
  // identical here: nothing to ask
  assert.deepEqual(differingRanges(sum, server), []);
  // stamps and tombstones alone do not differ (the digest is the live content's)
  assert.deepEqual(differingRanges(sum, [...server.map((e) => ({ ...e, t: 99 })), tombstone("base/zzz", 5)]), []);
  // one item changed here: its range alone, with the server's count
  const changed = server.map((e, i) => (i === 2 * k + 3 ? { ...e, h: H2 } : e));
  assert.deepEqual(differingRanges(sum, changed), [{ from: server[2 * k]!.p, to: server[3 * k]!.p, c: k, here: k }]);
  // one missing here in the last range (to the end), one extra here in the first
  const edited = [...server.slice(0, 5), live("base/f000005x", H1, 1), ...server.slice(5, 4999)];
  assert.deepEqual(differingRanges(sum, edited).map((d) => [d.from, d.to]), [[server[0]!.p, server[k]!.p], [sum.at(-1)!.a, undefined]]);
  // items here before the first range are not the server's: no range for them
  assert.deepEqual(differingRanges(sum, [live("base/a", H2, 1), ...server]), []);
  // a tombstone at the server for an item live here differs
  const dead = server.map((e, i) => (i === 10 ? tombstone(e.p, 5) : e));
  assert.deepEqual(differingRanges(summarize(dead, k), server).map((d) => d.from), [server[0]!.p]);
  assert.deepEqual(differingRanges([], server), []);
});

test("a tree summary has at most 16 ranges with their counts; a differing range of more than 32 entries is summarised again, a smaller one paged, neighbours to page joined", () => {
  assert.equal(treeFanout, 16);
  assert.equal(treeRangeItems(100_000), 6250);
  assert.equal(treeRangeItems(20), 2);
  const server = many(100_000);
  const top = summarize(server, treeRangeItems(server.length));
  assert.equal(top.length, 16);
  assert.ok(top.every((r) => r.c === 6250));
  // nothing differs: no step
  assert.deepEqual(walkAll(server, server, top), []);
  // one item deleted at the server (a tombstone there): three summaries down, then one page of at most 32 entries
  const dead = server.map((e, i) => (i === 54_321 ? tombstone(e.p, 5) : e));
  const steps = walkAll(dead, server, summarize(dead, treeRangeItems(dead.length)));
  assert.deepEqual(steps.map((s) => [s.k, s.k === "sub" ? s.c : within(dead, s).length]), [["sub", 6250], ["sub", 391], ["page", 25]]);
  const page = steps.at(-1)!;
  assert.ok(within(dead, page).some((e) => e.p === server[54_321]!.p));
  // the page's diff is the one delete
  assert.deepEqual(diffPage("newer", within(dead, page), (p) => server.find((e) => e.p === p)), { fetch: [], delete: [tombstone(server[54_321]!.p, 5)], adopt: [] });
  // two changes in neighbouring leaves: both paged, as one stretch; and a change in another branch walked after
  const two = server.map((e, i) => (i === 100 || i === 130 || i === 90_000 ? { ...e, h: H2 } : e));
  const s2 = walkAll(two, server, summarize(two, treeRangeItems(two.length)));
  const pages = s2.filter((s) => s.k === "page");
  assert.equal(pages.length, 2);
  assert.ok(within(two, pages[0]!).some((e) => e.p === server[100]!.p) && within(two, pages[0]!).some((e) => e.p === server[130]!.p));
  assert.ok(within(two, pages[1]!).some((e) => e.p === server[90_000]!.p));
  assert.ok(s2.indexOf(pages[0]!) < s2.indexOf(pages[1]!), "depth first, in the manifest's order");
});

test("a puller that holds nothing (a join) pages the first summary's ranges, joined, and asks no summary of them; one that holds part of a range descends it", () => {
  const server = many(10_000);
  const top = summarize(server, treeRangeItems(server.length));
  assert.deepEqual(walkAll(server, [], top), [{ k: "page", from: server[0]!.p }]);
  // items 5100 on here: the first 8 ranges of 625 hold nothing here (paged, joined); the 9th (5000-5624) holds 525
  // and is summarised (ranges of 40): 5000-5079 hold nothing (paged), 5080-5119 holds 20 and is summarised again
  // (ranges of 3): 5080-5100 differ (paged, joined); everything after matches
  const steps = walkAll(server, server.slice(5100), top);
  const at = (i: number) => server[i]!.p;
  assert.deepEqual(steps, [
    { k: "page", from: at(0), to: at(5000) },
    { k: "sub", from: at(5000), to: at(5625), c: 625, depth: 1 },
    { k: "page", from: at(5000), to: at(5080) },
    { k: "sub", from: at(5080), to: at(5120), c: 40, depth: 2 },
    { k: "page", from: at(5080), to: at(5101) },
  ]);
});

test("a summary from a server of the previous version (no counts) has its differing ranges paged, neighbours joined; a summary naming a range outside the stretch asked is refused", () => {
  const server = many(1000);
  const flat = summarize(server, flatRangeItems(1000)).map(({ a, h }) => ({ a, h }));
  const k = flatRangeItems(1000);
  const changed = server.map((e, i) => (i === 5 || i === k + 1 ? { ...e, h: H2 } : e));
  const walk = new SummaryWalk((s) => within(changed, s));
  walk.add(flat, 0);
  assert.deepEqual(walk.next(), { k: "page", from: server[0]!.p, to: server[2 * k]!.p });
  assert.equal(walk.next(), undefined);
  const w2 = new SummaryWalk(() => []);
  assert.throws(() => w2.add([{ a: "base/a", h: H1, c: 40 }], 1, { from: "base/b", to: "base/c" }), /outside the stretch/);
  assert.throws(() => w2.add([{ a: "base/c", h: H1, c: 40 }], 1, { from: "base/b", to: "base/c" }), /outside the stretch/);
});

test("a walk stops descending at its depth bound and pages what is left, whatever a server claims its counts are", () => {
  // a server that answers every sub-summary with one range claiming many entries and a digest that never matches
  const liar = (s: Stretch): SummaryRange[] => [{ a: s.from!, h: H2, c: 1_000_000 }];
  const walk = new SummaryWalk(() => [live("base/x", H1, 1)]);
  walk.add([{ a: "base/x", h: H2, c: 1_000_000 }], 0);
  let subs = 0;
  let last: WalkStep | undefined;
  for (let s = walk.next(); s; s = walk.next()) {
    last = s;
    if (s.k === "sub") {
      subs++;
      walk.add(liar(s), s.depth, s);
    }
  }
  assert.equal(subs, treeDepthMax - 1);
  assert.equal(last?.k, "page");
});

test("a summary crosses the wire as [path, 32-byte sha256, count]; malformed ones are refused", () => {
  const sum = summarize(many(100), 10);
  assert.deepEqual(summaryFromWire(cbor.decode(cbor.encode(summaryToWire(sum)) as Uint8Array)), sum);
  // the previous version's form (no count) is read
  assert.deepEqual(summaryFromWire([["base/a", Buffer.alloc(32, 1)]]), [{ a: "base/a", h: "01".repeat(32) }]);
  assert.throws(() => summaryFromWire(undefined), /malformed/);
  assert.throws(() => summaryFromWire([["base/a", Buffer.alloc(31)]]), /malformed/);
  assert.throws(() => summaryFromWire([["base/a", Buffer.alloc(32), -1]]), /whole number/);
  assert.throws(() => summaryFromWire([["base/b", Buffer.alloc(32)], ["base/a", Buffer.alloc(32)]]), /out of order/);
});

/**
 * The bytes of a resync (requests and answers, CBOR) of a manifest of `n` keys of which the server deleted one, by
 * tree summaries (this version) or by the flat summary (the previous one, which a server still sends a puller of
 * that version). The server's answers are made as engine.ts makes them.
 */
function resyncBytes(n: number, tree: boolean): { bytes: number; requests: number; deleted: number } {
  const puller = Array.from({ length: n }, (_, i) => live(`accepted/minion-${String(i).padStart(6, "0")}.example.com`, H1, 1_700_000_000_000));
  const server = puller.map((e, i) => (i === Math.floor(n * 0.37) ? tombstone(e.p, 1_700_000_000_500) : e));
  let bytes = 0;
  let requests = 0;
  const exchange = (req: unknown, answer: unknown) => {
    requests++;
    bytes += (cbor.encode(req) as Uint8Array).byteLength + (cbor.encode(answer) as Uint8Array).byteLength;
    return answer;
  };
  const top = summarize(server, tree ? treeRangeItems(n) : flatRangeItems(n));
  exchange({ op: "manifest", ch: "keys", n: pageItemsMax, digest: H2, w: wireForm, r: 1, ...(tree ? { t: 1 } : {}) }, { sum: summaryToWire(top) });
  const walk = new SummaryWalk((s) => within(puller, s));
  walk.add(tree ? top : top.map(({ a, h }) => ({ a, h })), 0);
  let deleted = 0;
  for (let s = walk.next(); s; s = walk.next()) {
    if (s.k === "sub") {
      const req = subRequest("keys", s);
      const ans = exchange(req, { sum: summaryToWire(summarize(within(server, req), treeRangeItems(req.c))) }) as { sum: unknown };
      walk.add(summaryFromWire(ans.sum), s.depth, s);
      continue;
    }
    const stretch = { from: s.from, ...(s.to !== undefined ? { to: s.to } : {}) };
    const entries = within(server, stretch);
    for (let i = 0; i === 0 || i < entries.length; i += pageItemsMax) {
      const page = entries.slice(i, i + pageItemsMax);
      exchange({ op: "manifest", ch: "keys", ...(i ? { after: entries[i - 1]!.p } : {}), ...stretch, n: pageItemsMax, w: wireForm }, { entries: page.map(entryToWire), more: i + pageItemsMax < entries.length, w: wireForm });
      deleted += diffPage("newer", page, (p) => puller.find((e) => e.p === p)).delete.length;
    }
  }
  return { bytes, requests, deleted };
}

test("a resync after one key deleted among 100k sends a few KiB of summaries and one short page (O(log n)), not the √n ranges and entries of a flat summary", (t) => {
  const rows = [1_000, 10_000, 100_000].map((n) => ({ n, tree: resyncBytes(n, true), flat: resyncBytes(n, false) }));
  for (const r of rows) t.diagnostic(`${r.n} keys: tree ${r.tree.bytes} bytes in ${r.tree.requests} round trips; flat ${r.flat.bytes} bytes in ${r.flat.requests}`);
  for (const r of rows) {
    assert.equal(r.tree.deleted, 1, `${r.n}: the one delete found`);
    assert.equal(r.flat.deleted, 1);
  }
  const [k1, k10, k100] = rows.map((r) => r.tree.bytes);
  // bounded by the depth of the tree (a summary of 16 ranges, ~1.3 KiB with these 40-byte paths, per factor of 16)
  // and one page of at most 32 entries: a hundredfold more keys costs about two summaries more, not tenfold
  assert.ok(k100! <= 8 * 1024, `100k: ${k100} bytes`);
  assert.ok(k100! <= 2.5 * k1!, `1k → 10k → 100k: ${k1} → ${k10} → ${k100} bytes`);
  // the flat summary grows as √n: about 40 KiB at 100k keys
  assert.ok(rows[2]!.flat.bytes >= 10 * rows[0]!.flat.bytes / 2, `flat ${rows.map((r) => r.flat.bytes).join(" → ")} bytes`);
  assert.ok(rows[2]!.flat.bytes > 5 * k100!, `flat ${rows[2]!.flat.bytes} bytes against tree ${k100}`);
  assert.ok(rows[2]!.tree.requests <= 6, `${rows[2]!.tree.requests} round trips`);
  assert.ok(leafItemsMax <= 32);
});
