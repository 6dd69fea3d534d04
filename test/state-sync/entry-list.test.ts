/** A page's entries to fetch held as bytes (src/workers/state-sync/entry-list.ts): what goes in comes out, page after page. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { EntryList } from "../../src/workers/state-sync/entry-list.js";
import type { ManifestEntry } from "../../src/workers/state-sync/manifest.js";

const hex = (s: string) => createHash("sha256").update(s).digest("hex");
const entry = (p: string, i: number): ManifestEntry => ({ p, s: i * 1000 + 7, h: hex(p), m: i % 2 ? 0o600 : 0o7777, t: 1_700_000_000_123 + i });

test("an entry list gives back each entry it was loaded with (paths in any script, sizes, hashes, modes, stamps)", () => {
  const entries = ["base/top.sls", "base/é/ü.sls", "base/日本/語.txt", "base/emoji/😀.sls", "base/x"].map(entry);
  entries.push({ p: "base/big.iso", s: 1024 ** 3, h: hex("big"), m: 0o644, t: 0 });
  const list = new EntryList();
  list.load(entries);
  assert.equal(list.length, entries.length);
  for (let i = 0; i < entries.length; i++) {
    assert.deepEqual(list.at(i), entries[i]);
    assert.equal(list.path(i), entries[i]!.p);
    assert.equal(list.size(i), entries[i]!.s);
  }
});

test("an entry list reloaded with a page longer or shorter than the last holds that page alone", () => {
  const list = new EntryList();
  const long = Array.from({ length: 300 }, (_, i) => entry(`base/d/${"n".repeat(i % 50)}${i}`, i));
  const short = [entry("base/only", 1), entry("base/two", 2)];
  list.load(short);
  list.load(long);
  assert.equal(list.length, 300);
  assert.deepEqual(Array.from({ length: 300 }, (_, i) => list.at(i)), long);
  list.load(short);
  assert.equal(list.length, 2);
  assert.deepEqual([list.at(0), list.at(1)], short);
  assert.throws(() => list.at(2), RangeError);
  list.load([]);
  assert.equal(list.length, 0);
  assert.throws(() => list.path(0), RangeError);
});

test("an entry list refuses a tombstone and a hash that is not a sha256 in hex", () => {
  const list = new EntryList();
  assert.throws(() => list.load([{ p: "base/gone", s: 0, h: "", m: 0, t: 5, d: 1 }]), /tombstone/);
  assert.throws(() => list.load([{ ...entry("base/x", 1), h: "abc" }]), /not a sha256/);
});
