import { test } from "node:test";
import assert from "node:assert/strict";
import { assignSlots } from "../../src/shared/sab-ring/assign.js";
import { createRingBuffer, ringSlots } from "../../src/shared/sab-ring/layout.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";
import { masterIds, minionKeys } from "./minion-keys.js";
import { cv, keyCounts, keySlots, noiseFloor } from "./ring-metrics.js";

const KEYS = 200_000;
const keys = minionKeys(KEYS);
const slots = keySlots(keys);

function slotCounts(owners: Uint8Array, n: number): number[] {
  const c = new Array<number>(n).fill(0);
  for (const o of owners) c[o]!++;
  return c;
}

for (const n of [3, 5, 10]) {
  test(`load CV over ${KEYS} minion ids on ${n} nodes is within 2x the binomial noise floor`, () => {
    const a = assignSlots(masterIds(n));
    const floor = noiseFloor(n, KEYS);
    const measured = cv(keyCounts(a, slots));
    assert.ok(measured <= 2 * floor, `CV ${(measured * 100).toFixed(3)}% > 2 x floor ${(floor * 100).toFixed(3)}%`);
    // and the table itself is exactly balanced: floor or ceil of slots/N per node
    for (const c of slotCounts(a.owners, n)) {
      assert.ok(c === Math.floor(ringSlots / n) || c === Math.ceil(ringSlots / n), `node holds ${c} slots`);
    }
  });
}

test("a table reached through membership changes is as balanced as a fresh one", () => {
  // 3 -> 4 -> ... -> 10, then remove two and add one: the path production tables take
  let a = assignSlots(masterIds(3));
  for (let n = 4; n <= 10; n++) a = assignSlots(masterIds(n), a);
  a = assignSlots(masterIds(10).filter((id) => id !== "master-04" && id !== "master-07"), a);
  a = assignSlots([...a.nodes, "master-11"], a);
  assert.equal(a.nodes.length, 9);
  const measured = cv(keyCounts(a, slots));
  assert.ok(measured <= 2 * noiseFloor(9, KEYS), `CV ${(measured * 100).toFixed(3)}%`);
  for (const c of slotCounts(a.owners, 9)) assert.ok(c === 455 || c === 456, `node holds ${c} slots`);
});

test("balance holds for node ids that are UUIDs, not numbered names", () => {
  const ids = ["0f8fad5b-d9cb-469f-a165-70867728950e", "7c9e6679-7425-40de-944b-e07fc1f90ae7", "16fd2706-8baf-433b-82eb-8c7fada847da", "886313e1-3b8a-5372-9b90-0c9aee199e5d", "a3bb189e-8bf9-3888-9912-ace4e6543002"];
  const a = assignSlots(ids);
  const measured = cv(keyCounts(a, slots));
  assert.ok(measured <= 2 * noiseFloor(5, KEYS), `CV ${(measured * 100).toFixed(3)}%`);
});

test("the shared buffer answers exactly what the table says, for every key", () => {
  const a = assignSlots(masterIds(5));
  const w = RingWriter.attach(createRingBuffer());
  w.publishRing("cluster", a, 1);
  const r = new RingReader(w.buffer);
  const counts = new Map<string, number>();
  for (let i = 0; i < keys.length; i += 7) {
    const owner = r.owner(keys[i]!);
    assert.equal(owner, a.nodes[a.owners[slots[i]!]!]);
    counts.set(owner!, (counts.get(owner!) ?? 0) + 1);
  }
  assert.equal(counts.size, 5);
});
