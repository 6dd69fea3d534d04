import { test } from "node:test";
import assert from "node:assert/strict";
import { assignSlots, type RingAssignment } from "../../src/shared/sab-ring/assign.js";
import { ringSlots } from "../../src/shared/sab-ring/layout.js";
import { masterIds, minionKeys, prng } from "./minion-keys.js";
import { keySlots, movedFraction } from "./ring-metrics.js";

const keys = minionKeys(200_000);
const slots = keySlots(keys);
const PP = 0.01; // one percentage point

const ownerOf = (a: RingAssignment, slot: number): string => a.nodes[a.owners[slot]!]!;

for (const n of [3, 5, 10]) {
  test(`adding a node to ${n} moves at most the ideal 1/(N+1) + 1 pp, all of it to the new node`, () => {
    const before = assignSlots(masterIds(n));
    const after = assignSlots([...masterIds(n), "master-new"], before);
    const moved = movedFraction(before, after, slots);
    const ideal = 1 / (n + 1);
    assert.ok(moved <= ideal + PP, `moved ${(moved * 100).toFixed(2)}% > ideal ${(ideal * 100).toFixed(2)}% + 1 pp`);
    assert.ok(moved >= ideal - PP, `moved ${(moved * 100).toFixed(2)}%: the new node got too little`);
    for (let s = 0; s < ringSlots; s++) {
      if (ownerOf(before, s) !== ownerOf(after, s)) assert.equal(ownerOf(after, s), "master-new", `slot ${s}`);
    }
  });

  test(`removing a node from ${n} moves at most 1/N + 1 pp, and only that node's keys`, () => {
    const before = assignSlots(masterIds(n));
    const gone = masterIds(n)[1]!;
    const after = assignSlots(masterIds(n).filter((id) => id !== gone), before);
    const moved = movedFraction(before, after, slots);
    assert.ok(moved <= 1 / n + PP, `moved ${(moved * 100).toFixed(2)}%`);
    for (let s = 0; s < ringSlots; s++) {
      const was = ownerOf(before, s);
      if (was === gone) assert.notEqual(ownerOf(after, s), gone);
      else assert.equal(ownerOf(after, s), was, `slot ${s} moved off ${was}, which stayed`);
    }
  });
}

test("replacing a node (one out, one in, one CONFIG) moves only the departed node's slots, to the newcomer", () => {
  const before = assignSlots(masterIds(5));
  const after = assignSlots([...masterIds(5).filter((id) => id !== "master-03"), "master-99"], before);
  for (let s = 0; s < ringSlots; s++) {
    if (ownerOf(before, s) === "master-03") assert.equal(ownerOf(after, s), "master-99");
    else assert.equal(ownerOf(after, s), ownerOf(before, s));
  }
});

test("the same history gives the same table (determinism), whatever order the ids come in", () => {
  const a1 = assignSlots(["m-c", "m-a", "m-b"]);
  const a2 = assignSlots(["m-b", "m-c", "m-a"]);
  assert.deepEqual(a1.nodes, a2.nodes);
  assert.deepEqual(a1.owners, a2.owners);
  const b1 = assignSlots(["m-a", "m-b", "m-c", "m-d"], a1);
  const b2 = assignSlots(["m-d", "m-c", "m-b", "m-a"], a2);
  assert.deepEqual(b1.owners, b2.owners);
});

test("200 random membership changes: every table stays exactly balanced and every change is minimal", () => {
  const rnd = prng(42);
  let members = masterIds(4);
  let spare = 100;
  let table = assignSlots(members);
  for (let step = 0; step < 200; step++) {
    const next = [...members];
    const op = rnd();
    if ((op < 0.45 && next.length < 20) || next.length <= 2) next.push(`master-${spare++}`);
    else if (op < 0.9) next.splice(Math.floor(rnd() * next.length), 1);
    else next.splice(Math.floor(rnd() * next.length), 1, `master-${spare++}`);
    const after = assignSlots(next, table);
    const counts = new Map<string, number>(after.nodes.map((id) => [id, 0]));
    for (let s = 0; s < ringSlots; s++) counts.set(ownerOf(after, s), counts.get(ownerOf(after, s))! + 1);
    for (const c of counts.values()) assert.ok(Math.abs(c - ringSlots / next.length) < 1, `step ${step}: ${c} slots`);
    // minimal: a slot moves only if its owner left, or it went to a node that joined in this step
    const joined = new Set(next.filter((id) => !members.includes(id)));
    for (let s = 0; s < ringSlots; s++) {
      const was = ownerOf(table, s);
      const now = ownerOf(after, s);
      if (was !== now) assert.ok(!next.includes(was) || joined.has(now), `step ${step}: slot ${s} ${was} -> ${now}`);
    }
    members = next;
    table = after;
  }
});
