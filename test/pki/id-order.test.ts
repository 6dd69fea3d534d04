/**
 * Salt's id order (salt.utils.data.sorted_ignorecase: `sorted(ids, key=str.lower)`), which its CkMinions uses for
 * the accepted list a target is matched against and salt.key uses for every listing: brine's compareIds, the
 * kept SortedIds and KeyStore.list follow it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { compareIds, sortIds } from "../../src/shared/protocol/ids.js";
import { SortedIds } from "../../src/lib/pki/sorted-ids.js";
import { KeyStore } from "../../src/lib/pki/key-store.js";

const cases: Array<[a: string, b: string, sign: -1 | 0 | 1]> = [
  ["alpha", "Beta", -1], // case ignored: a < b
  ["Beta", "alpha", 1],
  ["web2", "Web3", -1],
  ["Web3", "web10", 1], // '3' > '1' once case is ignored
  ["web", "Web1", -1], // a prefix first
  ["a_b", "aB", -1], // '_' (0x5f) < 'b' (0x62): compared lowered, as Python's str.lower() keys compare
  ["Foo", "foo", -1], // equal but for case: code units, a fixed order
  ["foo", "foo", 0],
  ["Ärger", "ärmel", -1], // non-ASCII: lowered by toLowerCase, as Python's lower()
];

test("compareIds orders ids as Python's sorted(key=str.lower) does, with code units breaking ties", () => {
  for (const [a, b, sign] of cases) assert.equal(Math.sign(compareIds(a, b)), sign, `${a} vs ${b}`);
});

test("sortIds and a kept SortedIds give the same order, and binary search finds ids in it", () => {
  const ids = ["web2", "DB1", "Web3", "alpha", "web10", "Beta", "a_b", "aB"];
  const want = ["a_b", "aB", "alpha", "Beta", "DB1", "web10", "web2", "Web3"];
  assert.deepEqual(sortIds(ids), want);
  const kept = new SortedIds();
  kept.reset(ids.slice(0, 4));
  kept.apply(ids.slice(4).map((id) => [id, true] as const));
  assert.deepEqual(kept.ids, want);
  for (const id of want) assert.ok(kept.has(id), id);
  kept.apply([["Web3", false], ["zeta", true]]);
  assert.deepEqual(kept.ids, ["a_b", "aB", "alpha", "Beta", "DB1", "web10", "web2", "zeta"]);
});

test("salt-key's listing of a pki directory is in Salt's order, case ignored", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-idorder-"));
  try {
    mkdirSync(path.join(dir, "minions"), { recursive: true });
    for (const id of ["web2", "Web3", "db1", "Alpha"]) writeFileSync(path.join(dir, "minions", id), "x");
    const store = new KeyStore(dir);
    assert.deepEqual(store.list("accepted"), ["Alpha", "db1", "web2", "Web3"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
