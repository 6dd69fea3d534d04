/**
 * Job placement's pure decisions (src/shared/placement.ts): a jid's owners from a ring table (the same order
 * the shared ring's RingReader.replicas gives), a hand-off round grouped by jid and owner, which keys a round
 * settles and which copies the master drops, the merge of every master's copy for cluster-wide reads, and
 * which jobs move when the ring's table changes (rebalancing).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { assignSlots } from "../../src/shared/sab-ring/assign.js";
import { RingWriter } from "../../src/shared/sab-ring/writer.js";
import { RingReader } from "../../src/shared/sab-ring/reader.js";
import { createRingBuffer } from "../../src/shared/sab-ring/layout.js";
import { hostTable, mergeCopies, mergeLists, mustHandOn, outboxJid, ownersMoved, ownersOf, planRound, sameOwnership, settleRound, tableUsable, type PlacementTable } from "../../src/shared/placement.js";

const NODES = ["m1", "m2", "m3"];

function votersTable(replicas: number): PlacementTable {
  const a = assignSlots(NODES);
  return { ring: "jobs", members: "voters", replicas, voters: a.nodes, nodes: a.nodes, owners: a.owners, epoch: 1 };
}

test("a jid's owners from a fetched table are the shared ring's first R replicas (what the gate and placement_check use)", () => {
  const sab = createRingBuffer();
  const w = RingWriter.attach(sab);
  const a = assignSlots(NODES);
  w.sync(new Map([["jobs", { assignment: a, epoch: 1, replicas: 2 }]]));
  const r = new RingReader(sab);
  const t = votersTable(2);
  for (let i = 0; i < 500; i++) {
    const jid = `2026112500000000${String(i).padStart(4, "0")}`;
    const owners = ownersOf(t, jid);
    assert.equal(owners.length, 2);
    assert.deepEqual(owners, [...r.replicas(jid, 2, "jobs")].sort(), jid);
  }
  w.release();
});

test("owners: policy self gives every voter; replicas above the node count is capped; a table without slots names nobody", () => {
  const self: PlacementTable = { ring: "jobs", members: "self", replicas: 1, voters: ["m2", "m1"], nodes: [], owners: new Uint8Array(0), epoch: 0 };
  assert.deepEqual(ownersOf(self, "20261125000000000001"), ["m1", "m2"]);
  assert.equal(ownersOf(votersTable(5), "20261125000000000001").length, 3);
  const empty: PlacementTable = { ...votersTable(2), nodes: [], owners: new Uint8Array(0) };
  assert.equal(tableUsable(empty), false);
  assert.deepEqual(ownersOf(empty, "20261125000000000001"), []);
});

test("a round groups outbox keys by jid and sends each jid to its owners other than this master", () => {
  const owners: Record<string, string[]> = { j1: ["m1", "m2"], j2: ["m2", "m3"], j3: [] };
  const plan = planRound(
    [
      ["j1", 11],
      ["j1/a", 12],
      ["j2/b", 13],
      ["j3/c", 14],
    ],
    (jid) => owners[jid]!,
    "m1",
  );
  assert.deepEqual([...plan.byPeer].sort(), [
    ["m2", ["j1", "j2"]],
    ["m3", ["j2"]],
  ]);
  assert.deepEqual(plan.jobs.get("j1")!.keys, [
    ["j1", 11],
    ["j1/a", 12],
  ]);
  assert.deepEqual(plan.unplaced, ["j3"], "no owners known: left for the next round");
  assert.equal(outboxJid("j1/a"), "j1");
  assert.equal(outboxJid("j1"), "j1");
});

test("settling: a jid is settled only when every other owner acknowledged it; a non-owner drops its copy, an owner keeps it", () => {
  const owners: Record<string, string[]> = { j1: ["m1", "m2"], j2: ["m2", "m3"], j3: ["m2", "m3"] };
  const plan = planRound(
    [
      ["j1/a", 1],
      ["j2", 2],
      ["j2/b", 3],
      ["j3/c", 4],
    ],
    (jid) => owners[jid]!,
    "m1",
  );
  const st = settleRound(
    plan,
    new Map([
      ["m2", new Set(["j1", "j2", "j3"])],
      ["m3", new Set(["j2"])],
    ]),
    "m1",
  );
  assert.deepEqual(st.settled, [
    ["j1/a", 1],
    ["j2", 2],
    ["j2/b", 3],
  ]);
  assert.deepEqual([...st.drop].sort(), ["j2", "j2/b"], "m1 owns j1: it keeps its copy");
  assert.deepEqual(st.pending, ["j3"], "m3 did not acknowledge j3: nothing of it is settled or dropped");
  const failed = settleRound(plan, new Map(), "m1");
  assert.deepEqual([failed.settled, failed.pending], [[], ["j1", "j2", "j3"]]);
});

test("reads merge every master's copy: the load, the union of minions, every return, nocache from any copy", () => {
  const m = mergeCopies([
    { returns: { a: { return: 1 } }, minions: ["a"] },
    { load: { fun: "test.ping" }, minions: ["b", "a"], endtime: "2026, Nov 25 10:00:00.000000", returns: { b: { return: 2 } } },
    { nocache: true, returns: { a: { return: 1 } } },
  ]);
  assert.deepEqual(m, { load: { fun: "test.ping" }, minions: ["a", "b"], endtime: "2026, Nov 25 10:00:00.000000", nocache: true, returns: { a: { return: 1 }, b: { return: 2 } } });
  assert.deepEqual(mergeCopies([]), { returns: {} });
  const l = mergeLists([
    [["j2", { fun: "x" }, ["a"], null]],
    [
      ["j1", { fun: "y" }, null, "t1"],
      ["j2", { fun: "x" }, ["b"], "t2"],
    ],
  ]);
  assert.deepEqual(l, [
    ["j1", { fun: "y" }, null, "t1"],
    ["j2", { fun: "x" }, ["a", "b"], "t2"],
  ]);
});

test("rebalancing: a changed table is told from an equal one, and only jids whose owners changed move", () => {
  const over = (nodes: string[], replicas: number, epoch = 1): PlacementTable => {
    const a = assignSlots(nodes);
    return { ring: "jobs", members: "voters", replicas, voters: a.nodes, nodes: a.nodes, owners: a.owners, epoch };
  };
  const self = (voters: string[]): PlacementTable => ({ ring: "jobs", members: "self", replicas: 1, voters, nodes: [], owners: new Uint8Array(0), epoch: 0 });
  const cases: [string, PlacementTable, PlacementTable, boolean][] = [
    ["same voters and replicas, another epoch", over(NODES, 2, 1), over(NODES, 2, 7), true],
    ["a voter joined", over(["m1", "m2"], 1), over(NODES, 1), false],
    ["a voter left", over(NODES, 2), over(["m1", "m3"], 2), false],
    ["replicas changed", over(NODES, 1), over(NODES, 2), false],
    ["policy changed", over(NODES, 3), self(NODES), false],
    ["self, same voters in another order", self(["m2", "m1"]), self(["m1", "m2"]), true],
    ["self, a voter more", self(["m1", "m2"]), self(NODES), false],
  ];
  for (const [what, a, b, same] of cases) assert.equal(sameOwnership(a, b), same, what);

  const jids = Array.from({ length: 400 }, (_, i) => `2026112500000001${String(i).padStart(4, "0")}`);
  for (const [what, a, b] of cases) {
    let moved = 0;
    for (const jid of jids) {
      const m = ownersMoved(a, b, jid);
      assert.equal(m, ownersOf(a, jid).join() !== ownersOf(b, jid).join(), `${what}: ${jid}`);
      if (m) moved++;
    }
    if (sameOwnership(a, b)) assert.equal(moved, 0, `${what}: nothing moves`);
  }
  // a voter joining moves about a third of the jids with one replica, not all of them
  const joined = jids.filter((jid) => ownersMoved(over(["m1", "m2"], 1), over(NODES, 1), jid)).length;
  assert.ok(joined > 60 && joined < 220, `a third move: ${joined}`);
  // a new table that cannot place a jid moves nothing yet
  const empty: PlacementTable = { ...over(NODES, 1), nodes: [], owners: new Uint8Array(0) };
  assert.equal(ownersMoved(over(NODES, 1), empty, jids[0]!), false);
});

test("a host's table: under self the owners are the ring group's voters now (they follow the cluster's), not its founders", () => {
  const a = assignSlots(NODES);
  const base = {
    ring: "jobs",
    self: "m1",
    record: { founding_voters: ["m1", "m2", "m3"], status: "active" },
    members: "self" as const,
    replicas: 1,
    groupVoters: ["m2", "m1"] as string[] | undefined,
    view: { nodes: a.nodes, owners: a.owners, epoch: 4, replicas: 2 },
    epoch: 4,
  };
  const cases: [string, Parameters<typeof hostTable>[0], string[] | undefined][] = [
    ["self: m3 was removed from the ring's group", base, ["m1", "m2"]],
    ["self: the group's voters not known yet: the founders", { ...base, groupVoters: undefined }, ["m1", "m2", "m3"]],
    ["self: a founder added back", { ...base, groupVoters: ["m3", "m2", "m1"] }, ["m1", "m2", "m3"]],
    ["voters: the slot table's nodes", { ...base, members: "voters", replicas: 3 }, ["m1", "m2", "m3"]],
    ["voters: no slot table yet", { ...base, members: "voters", view: null }, undefined],
    ["a ring destroyed", { ...base, record: { founding_voters: ["m1", "m2", "m3"], status: "destroyed" } }, undefined],
    ["not a founder", { ...base, self: "m4" }, undefined],
    ["policy not applied yet", { ...base, members: undefined }, undefined],
  ];
  for (const [what, input, owners] of cases) {
    const t = hostTable(input);
    assert.deepEqual(t ? ownersOf(t, "20261125000000000001") : undefined, owners, what);
  }
  assert.equal(hostTable({ ...base, members: "voters", replicas: undefined })!.replicas, 2, "voters: replicas from the shared ring when the policy has none");
});

test("rebalancing on one master: it hands a job on when it is no longer an owner or an owner is new, not when its co-owners only shrank", () => {
  const over = (nodes: string[], replicas: number): PlacementTable => {
    const a = assignSlots(nodes);
    return { ring: "jobs", members: "voters", replicas, voters: a.nodes, nodes: a.nodes, owners: a.owners, epoch: 1 };
  };
  const self = (voters: string[]): PlacementTable => ({ ring: "jobs", members: "self", replicas: 1, voters, nodes: [], owners: new Uint8Array(0), epoch: 0 });
  const jid = "20261125000000000001";
  const cases: [string, PlacementTable, PlacementTable, string, boolean][] = [
    ["self: a voter left, a voter that stays", self(NODES), self(["m1", "m2"]), "m1", false],
    ["self: a voter left, the one that left (still running)", self(NODES), self(["m1", "m2"]), "m3", true],
    ["self: a voter joined", self(["m1", "m2"]), self(NODES), "m1", true],
    ["self: a master outside the ring holding a copy", self(["m1", "m2"]), self(["m1", "m2"]), "m4", true],
    ["self to voters over the same masters, replicas 3: nobody new", self(NODES), over(NODES, 3), "m2", false],
    ["voters to self: every voter owns it now", over(NODES, 1), self(NODES), ownersOf(over(NODES, 1), jid)[0]!, true],
  ];
  for (const [what, prev, next, me, want] of cases) assert.equal(mustHandOn(prev, next, jid, me), want, what);
  // replicas 2 -> 1: each of the two owners hands on exactly when it is no longer the owner
  for (let i = 0; i < 50; i++) {
    const j = `2026112500000001${String(i).padStart(4, "0")}`;
    const [keep] = ownersOf(over(NODES, 1), j);
    for (const me of ownersOf(over(NODES, 2), j)) assert.equal(mustHandOn(over(NODES, 2), over(NODES, 1), j, me), me !== keep, `${j} on ${me}`);
  }
  const empty: PlacementTable = { ...over(NODES, 1), nodes: [], owners: new Uint8Array(0) };
  assert.equal(mustHandOn(over(NODES, 1), empty, jid, "m1"), false, "a table that cannot place the jid moves nothing yet");
});
