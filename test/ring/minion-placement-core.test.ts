/**
 * Minion data placement's pure decisions (src/shared/minion-placement.ts) and the cluster-wide targeting built
 * on them (src/lib/targeting/cluster.ts): outbox keys of their own kind beside the jobs', last writer wins across
 * masters' records, and a target evaluated over data spread across masters giving what one master holding every
 * minion's data would.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { dataTypeOf, mergeTarget, minionOutboxKey, mustGather, newestRecords, notingUnknown, parseMinionOutboxKey, placedByKey, planMinionShed, PlacementQuiet, wantedFrom, MINION_OUTBOX_PREFIX, type MinionAnswer, type MinionQuery, type MinionRecord, type StampEntry } from "../../src/shared/minion-placement.js";
import { outboxJid, planRound, settleRound } from "../../src/shared/placement.js";
import { checkMinions, type MinionData } from "../../src/lib/targeting/check-minions.js";
import { clusterCheckMinions, clusterRecords, type ClusterMinions } from "../../src/lib/targeting/cluster.js";
import { compareIds } from "../../src/shared/protocol/ids.js";

test("minion outbox keys name their bank and id, sort after every job key, and are never read as one", () => {
  for (const [bank, id, key] of [
    ["data", "web1", "~d/web1"],
    ["mine", "db.example.com", "~m/db.example.com"],
  ] as const) {
    assert.equal(minionOutboxKey(bank, id), key);
    assert.deepEqual(parseMinionOutboxKey(key), { bank, id });
  }
  for (const job of ["20261125120000000001", "20261125120000000001/web1", "20261125120000000001_abc/x"]) {
    assert.equal(parseMinionOutboxKey(job), undefined, job);
    assert.ok(job < MINION_OUTBOX_PREFIX, `${job} sorts before the minion keys`);
  }
  for (const bad of ["~x/web1", "~d", "~dweb1", "~d/"]) assert.equal(parseMinionOutboxKey(bad), undefined, bad);
  assert.deepEqual([dataTypeOf("data"), dataTypeOf("mine")], ["grains", "mine"]);
});

test("a round of minion keys groups each key alone: one owner failing holds back only the keys it owns", () => {
  const entries: [string, number][] = [["~m/a", 1], ["~m/b", 2], ["~d/a", 3]];
  const owners: Record<string, string[]> = { "~m/a": ["m1", "m2"], "~m/b": ["m2", "m3"], "~d/a": ["m1", "m2"] };
  const plan = planRound(entries, (k) => owners[k]!, "m3", (k) => k);
  assert.deepEqual([...plan.jobs.keys()], ["~m/a", "~m/b", "~d/a"]);
  assert.deepEqual(Object.fromEntries(plan.byPeer), { m1: ["~m/a", "~d/a"], m2: ["~m/a", "~m/b", "~d/a"] });
  const st = settleRound(plan, new Map([["m2", new Set(["~m/a", "~m/b", "~d/a"])], ["m1", new Set(["~d/a"])]]), "m3");
  assert.deepEqual(st.settled.map((s) => s[0]), ["~m/b", "~d/a"]);
  assert.deepEqual([...st.drop], ["~d/a"], "m3 owns ~m/b: kept; ~d/a goes once both owners have it");
  // the jobs' grouping is unchanged by default
  assert.equal(outboxJid("20261125120000000001/web1"), "20261125120000000001");
});

test("the newest record of each id wins across masters, a tombstone included; equal times fall to the origin", () => {
  const r = (id: string, t: number, o: string, v: Record<string, unknown> | null): MinionRecord => ({ k: "mine", id, t, o, v });
  const got = newestRecords([[r("a", 5, "m1", { x: 1 }), r("b", 9, "m1", { y: 1 })], [r("a", 7, "m2", null), r("b", 9, "m3", { y: 2 })]]);
  assert.deepEqual(got.get("a"), r("a", 7, "m2", null));
  assert.deepEqual(got.get("b"), r("b", 9, "m3", { y: 2 }));
});

/** The whole fleet's data, split over masters that each hold some. */
const FLEET: Record<string, MinionData> = {
  w1: { grains: { role: "web", os: "Debian" } },
  w2: { grains: { role: "web", os: "RedHat" } },
  d1: { grains: { role: "db", os: "Debian" } },
  d2: { grains: { role: "db", os: "Debian" }, pillar: { tier: "gold" } },
};
const ACCEPTED = ["d1", "d2", "nodata", "w1", "w2"];

/** A master holding `here` and a cluster whose other masters hold `there` (each answers for what it holds). */
function spread(here: string[], there: string[][], fail = false) {
  const asked: MinionQuery[] = [];
  const cluster: ClusterMinions = {
    placed: () => true,
    warn: () => undefined,
    ask: async (q) => {
      asked.push(q);
      if (fail) throw new Error("no answer");
      assert.equal(q.op, "target");
      if (q.op !== "target") throw new Error("unexpected");
      const matched = new Set<string>();
      const held = new Set<string>();
      for (const ids of there) {
        const h = q.ids.filter((id) => ids.includes(id));
        for (const id of h) held.add(id);
        for (const id of checkMinions(q.tgt, q.tgtType, { acceptedIds: h, minionData: (id) => FLEET[id], nodegroups: q.nodegroups as never, greedy: q.greedy }, { delimiter: q.delimiter }).minions) matched.add(id);
      }
      return { matched: [...matched], held: [...held], unreachable: {} } satisfies MinionAnswer;
    },
  };
  const ctx = (greedy: boolean) => ({ acceptedIds: ACCEPTED, minionData: (id: string) => (here.includes(id) ? FLEET[id] : undefined), nodegroups: { dbs: "G@role:db" }, greedy });
  return { cluster, ctx, asked };
}

test("a target over data spread across masters selects what one master holding all of it would (greedy and not, compound, nodegroup, pillar)", async () => {
  const everything = (greedy: boolean) => ({ acceptedIds: ACCEPTED, minionData: (id: string) => FLEET[id], nodegroups: { dbs: "G@role:db" }, greedy });
  const cases: [unknown, string][] = [
    ["role:web", "grain"],
    ["os:Deb*", "grain"],
    ["role:(web|db)", "grain_pcre"],
    ["tier:gold", "pillar"],
    ["G@role:db and not G@os:RedHat", "compound"],
    ["w* or G@role:db", "compound"],
    ["dbs", "nodegroup"],
  ];
  for (const [here, there] of [
    [["w1"], [["w2", "d1"], ["d1", "d2"]]],
    [[], [["w1", "w2", "d1", "d2"]]],
    [["w1", "w2", "d1", "d2"], []],
  ] as [string[], string[][]][]) {
    for (const greedy of [true, false]) {
      for (const [tgt, type] of cases) {
        const s = spread(here, there);
        const got = await clusterCheckMinions(tgt, type, s.ctx(greedy), {}, s.cluster);
        const want = checkMinions(tgt, type, everything(greedy));
        assert.deepEqual(got.minions, want.minions, `${String(tgt)} (${type}), greedy ${greedy}, here ${here.join(",")}`);
      }
    }
  }
});

test("a glob or list target never asks the other masters; only the ids this master holds no data for are sent", async () => {
  const s = spread(["w1", "d1"], [["w2", "d2"]]);
  assert.deepEqual((await clusterCheckMinions("w*", "glob", s.ctx(true), {}, s.cluster)).minions, ["w1", "w2"]);
  assert.deepEqual((await clusterCheckMinions("w1,zz", "list", s.ctx(true), {}, s.cluster)).missing, ["zz"]);
  assert.equal(s.asked.length === 0, true);
  await clusterCheckMinions("role:web", "grain", s.ctx(true), {}, s.cluster);
  const q = s.asked.map((x) => (x.op === "target" ? [...x.ids].sort() : x.op));
  assert.deepEqual(q, [["d2", "nodata", "w2"]]);
});

test("when the other masters cannot be asked, this master's data answers alone and a warning says so", async () => {
  const s = spread(["w1"], [["w2"]], true);
  const warned: string[] = [];
  const got = await clusterCheckMinions("role:web", "grain", s.ctx(false), {}, { ...s.cluster, warn: (l) => warned.push(l) });
  assert.deepEqual(got.minions, ["w1"]);
  assert.match(warned[0]!, /evaluated on this master's data alone: the other masters could not be asked \(no answer\)/);
});

test("records come from the cluster when the bank is placed (tombstones hide a copy), from this master when not", async () => {
  const local = (id: string) => (id === "a" ? { here: true } : undefined);
  const cluster: ClusterMinions = {
    placed: (bank) => bank === "mine",
    warn: () => undefined,
    ask: async () => ({ records: [{ k: "mine", id: "a", t: 9, o: "m2", v: null }, { k: "mine", id: "b", t: 3, o: "m2", v: { f: 1 } }], unreachable: {} }),
  };
  assert.deepEqual([...(await clusterRecords("mine", ["a", "b"], local, cluster))], [["b", { f: 1 }]]);
  assert.deepEqual([...(await clusterRecords("data", ["a", "b"], local, cluster))], [["a", { here: true }]]);
  assert.deepEqual([...(await clusterRecords("mine", ["a"], local, undefined))], [["a", { here: true }]]);
});

test("mergeTarget keeps this master's verdict for what it holds and for what nobody holds", () => {
  const m = mergeTarget(["a", "u1", "u2"], new Set(["u1", "u2", "u3"]), { matched: ["u3", "a"], held: ["u1", "u3"] }, compareIds);
  // a: local data; u1: held elsewhere, not matched there; u2: held nowhere (local greedy verdict); u3: matched elsewhere
  assert.deepEqual(m, ["a", "u2", "u3"]);
  const noting = notingUnknown({ minionData: (id: string) => (id === "x" ? 1 : undefined) });
  noting.ctx.minionData("x");
  noting.ctx.minionData("y");
  assert.deepEqual([...noting.unknown], ["y"]);
});

test("back to broadcast: a bank is gathered only when it is routed to no ring and its copies were placed on one", () => {
  const cases: [string | null, string[], boolean][] = [
    [null, [placedByKey("mine", "minions")], true],
    [null, [placedByKey("mine", "~placed")], true],
    [null, [], false],
    ["minions", [placedByKey("mine", "minions")], false],
    ["minions", [], false],
  ];
  for (const [route, keys, want] of cases) assert.equal(mustGather(route, keys), want, `${route} ${keys.join(",")}`);
  assert.equal(placedByKey("data", "ring1"), "~data/ring1");
});

test("a pull fetches the records another master holds newer (by time, then origin) or that this master lacks, never an older or equal one", () => {
  const mine: Record<string, { t: number; o: string }> = { same: { t: 5, o: "m1" }, older: { t: 5, o: "m1" }, newer: { t: 5, o: "m1" }, tie: { t: 5, o: "m1" } };
  const theirs: StampEntry[] = [
    ["same", 5, "m1"],
    ["older", 4, "m9"],
    ["newer", 6, "m0"],
    ["tie", 5, "m2"],
    ["absent", 0, "m2"],
  ];
  assert.deepEqual(wantedFrom(theirs, (id) => mine[id]), ["newer", "tie", "absent"]);
  assert.deepEqual(wantedFrom([], () => undefined), []);
});

test("a minion bank's shed drops a copy it does not own only when an owner holds it as new; owned ids, the only copy and the newest copy stay", () => {
  const owners: Record<string, string[]> = { own: ["m1", "m2"], dup: ["m2"], stale: ["m2"], alone: ["m2", "m3"], tomb: ["m3"], nobody: [] };
  const mine: Record<string, { t: number; o: string } | undefined> = { own: { t: 1, o: "m1" }, dup: { t: 5, o: "m1" }, stale: { t: 9, o: "m1" }, alone: { t: 3, o: "m1" }, tomb: { t: 3, o: "m1" }, nobody: { t: 1, o: "m1" } };
  const held: Record<string, Record<string, { t: number; o: string }>> = { m2: { dup: { t: 5, o: "m1" }, stale: { t: 8, o: "m2" } }, m3: { tomb: { t: 4, o: "m3" } } };
  const plan = planMinionShed({ ids: Object.keys(owners), self: "m1", owners: (id) => owners[id]!, mine: (id) => mine[id], held: (o, id) => held[o]?.[id] });
  assert.deepEqual(plan, { drop: ["dup", "tomb"], owned: 2, sole: ["stale", "alone"] }, "tomb: the owner's newer tombstone supersedes this copy; nobody: no table, never shed");
  // a record here never stamped (written before clustering) goes when an owner holds any copy
  assert.deepEqual(planMinionShed({ ids: ["x"], self: "m1", owners: () => ["m2"], mine: () => undefined, held: () => ({ t: 0, o: "m2" }) }).drop, ["x"]);
});

test("the placement tick skips the store only with neither bank routed, after a look that found nothing idleSettleMs or more after the routes last changed", () => {
  const settle = 10_000;
  // each row: the calls in order ([routes, now] a tick's question, with its expected answer; [empty, now] a look's finding)
  type Step = ["tick", string | null, string | null, number, boolean] | ["look", boolean, number];
  const rows: [string, Step[]][] = [
    ["a master's first tick is never quiet", [["tick", null, null, 0, false]]],
    ["a look that found nothing before the settle time does not quiet", [["tick", null, null, 0, false], ["look", true, 9_999], ["tick", null, null, 10_000, false]]],
    ["a look that found nothing at the settle time quiets, and stays quiet", [["tick", null, null, 0, false], ["look", true, 10_000], ["tick", null, null, 10_050, true], ["tick", null, null, 999_999, true]]],
    ["a look that found work ends the quiet", [["tick", null, null, 0, false], ["look", true, 10_000], ["look", false, 10_100], ["tick", null, null, 10_150, false]]],
    ["a route set ends the quiet at once", [["tick", null, null, 0, false], ["look", true, 10_000], ["tick", null, null, 10_050, true], ["tick", "minions", null, 10_100, false], ["tick", "minions", null, 50_000, false]]],
    ["with a bank routed, no finding quiets", [["tick", null, "minions", 0, false], ["look", true, 20_000], ["tick", null, "minions", 20_050, false]]],
    ["a route cleared starts the settle time again", [["tick", "minions", null, 0, false], ["look", true, 5_000], ["tick", null, null, 30_000, false], ["look", true, 39_000], ["tick", null, null, 39_050, false], ["look", true, 40_000], ["tick", null, null, 40_050, true]]],
  ];
  for (const [name, steps] of rows) {
    const q = new PlacementQuiet(settle);
    for (const [i, s] of steps.entries()) {
      if (s[0] === "look") q.looked(s[1], s[2]);
      else assert.equal(q.quiet(s[1], s[2], s[3]), s[4], `${name}: step ${i}`);
    }
  }
});
