/**
 * The minion data hand-off (src/workers/raft/minion-placement.ts) over real LMDB stores, one per master in temp
 * dirs, and an in-process peer channel between three MinionPlacement services; ring "minions" on m1 and m2 with
 * replicas 2 (both own every id), m3 outside it, `mine` and `grains` routed to it:
 * - a mine record written on m3 (through the job cache's outbox) reaches both owners, then leaves m3; while
 *   one owner is down m3 keeps it;
 * - an owner keeps the newest record by stamp: an older copy handed off later does not replace it;
 * - records a master held before the route (broadcast) are placed by the first placement scan;
 * - reads: the newest record of each id, a grain target evaluated where the data is, the ids held, answered
 *   with one owner down;
 * - a malformed hand-off is refused with a clear error, never stored.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { MinionCache } from "../../src/lib/store/minion-cache.js";
import { assignSlots } from "../../src/shared/sab-ring/assign.js";
import { BrineError } from "../../src/shared/errors.js";
import { cbor } from "../../src/shared/cbor.js";
import { ownersOf, type PlacementTable } from "../../src/shared/placement.js";
import { MINION_PLACEMENT_CHANNEL, MinionPlacement } from "../../src/workers/raft/minion-placement.js";
import { stateSyncRunners } from "../../src/runners/cluster-sync.js";
import type { RunnerContext } from "../../src/runners/context.js";
import type { MinionQuery } from "../../src/shared/minion-placement.js";
import { PeerRemoteError, type PeerMessage } from "../../src/workers/raft/peer/peer-types.js";
import { lacksKind, unknownKind } from "../../src/workers/raft/peer-kinds.js";

const a = assignSlots(["m1", "m2"]);
const TABLE: PlacementTable = { ring: "minions", members: "voters", replicas: 2, voters: a.nodes, nodes: a.nodes, owners: a.owners, epoch: 3 };

type Handler = (m: PeerMessage) => Uint8Array | void | Promise<Uint8Array | void>;

function cluster(dir: string) {
  const handlers = new Map<string, Map<string, Handler>>();
  const down = new Set<string>();
  const stores = new Map<string, Store>();
  const svc = new Map<string, MinionPlacement>();
  /** requests made, by `<op>:<from>-><to>` */
  const sent = new Map<string, number>();
  /** ms each answer of a master takes (a test hook: a large bank without the wait), by master */
  const slow = new Map<string, number>();
  /** request kinds a master does not know (it runs an older brine), by master */
  const older = new Map<string, Set<string>>();
  /** calls a master's placement service made on its job store's databases, by master */
  const looks = new Map<string, number>();
  let routed = true;
  let clock = 1_000;
  let table = TABLE;
  for (const id of ["m1", "m2", "m3"]) {
    stores.set(id, openStore({ cachedir: path.join(dir, id), brine_lmdb_map_bytes: 64 * 1024 * 1024 }));
    handlers.set(id, new Map());
    const channel = {
      on: (ch: string, h: Handler) => {
        handlers.get(id)!.set(ch, h);
        return () => handlers.get(id)!.delete(ch);
      },
      request: async (peer: string, ch: string, payload: Uint8Array) => {
        if (down.has(peer) || down.has(id)) throw new BrineError("CLUSTER_PEER_DOWN", peer);
        const op = `${String((cbor.decode(payload) as { op?: unknown }).op)}:${id}->${peer}`;
        sent.set(op, (sent.get(op) ?? 0) + 1);
        const h = handlers.get(peer)?.get(ch);
        if (!h) throw new BrineError("CLUSTER_PEER_UNKNOWN", peer);
        // a master of an older version (before a16d205) answered a kind it did not know so
        const kind = String((cbor.decode(payload) as { op?: unknown }).op);
        // a slow master (a large bank, a loaded box): each of its answers takes this long
        const delay = slow.get(peer);
        if (delay) await new Promise((r) => setTimeout(r, delay));
        if (older.get(peer)?.has(kind)) throw new PeerRemoteError(peer, "MINION_PLACEMENT_BAD_MESSAGE", `malformed minion data placement message: unknown op ${kind}`);
        try {
          return (await h({ from: id, channel: ch, payload, request: true })) ?? new Uint8Array(0);
        } catch (e) {
          // as the peer channel answers a handler's error (inbound.ts): its code and message
          throw new PeerRemoteError(peer, (e as BrineError).code ?? "CLUSTER_PEER_REMOTE", (e as Error).message);
        }
      },
    };
    const own = () => (id === "m3" ? undefined : table);
    svc.set(
      id,
      new MinionPlacement({
        store: () => counted(stores.get(id)!, () => looks.set(id, (looks.get(id) ?? 0) + 1)),
        channel,
        self: id,
        timeoutMs: 5000,
        route: (dt) => (routed && (dt === "mine" || dt === "grains") ? "minions" : null),
        localTable: own,
        // m3 learns the table from a host (JobPlacement.table in the worker)
        table: async () => table,
        peers: () => ["m1", "m2", "m3"].filter((x) => x !== id),
        up: (peer) => !down.has(peer),
        now: () => clock,
      }),
    );
  }
  /** the minion cache a request worker of `id` writes through (placed: the outbox), on a clock the test moves */
  const writer = (id: string) => {
    const c = new MinionCache(stores.get(id)!, () => clock);
    c.track(id, () => assert.fail("a placed bank is not broadcast"), () => routed);
    return c;
  };
  const rounds = async (n = 3) => {
    for (let i = 0; i < n; i++) for (const s of svc.values()) await s.round();
  };
  /**
   * `n` ticks of `id`'s worker timer, 50 ms apart on the test's clock, each round or gather a tick starts run to
   * its end before the clock moves on (the test's clock moves only with ticks: a round still writing to disk
   * would otherwise see seconds pass)
   */
  const ticks = async (id: string, n: number) => {
    const s = svc.get(id)! as unknown as { tick(): void; busy: boolean; broadcast: { gatherBusy: boolean } };
    for (let i = 0; i < n; i++) {
      clock += 50;
      s.tick();
      do await new Promise((r) => setImmediate(r));
      while (s.busy || s.broadcast.gatherBusy);
    }
  };
  return { stores, svc, down, sent, looks, older, slow, writer, rounds, ticks, tick: (ms: number) => (clock += ms), unroute: () => (routed = false), reroute: () => (routed = true), setTable: (t: PlacementTable) => (table = t) };
}

/** `s` with every call on one of its databases (and its root) reported to `call` */
function counted(s: Store, call: () => void): Store {
  const wrap = (db: object) =>
    new Proxy(db, {
      get(t, k) {
        const v = Reflect.get(t, k) as unknown;
        return typeof v === "function" ? (...a: unknown[]) => (call(), (v as (...x: unknown[]) => unknown).apply(t, a)) : v;
      },
    });
  return new Proxy(s, {
    get(t, k) {
      const v = Reflect.get(t, k) as unknown;
      return typeof v === "object" && v !== null ? wrap(v) : v;
    },
  });
}

const holders = (c: ReturnType<typeof cluster>, bank: "mine" | "minionData", id: string) => ["m1", "m2", "m3"].filter((m) => c.stores.get(m)![bank].get(id) !== undefined);

test("a mine record written outside the ring reaches both owners and leaves the master that took it; an owner down keeps it there", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    await c.writer("m3").setMine("web1", { "test.ping": true });
    assert.equal(c.stores.get("m3")!.handoff.get("~m/web1") !== undefined, true, "the write put its key in the outbox");
    c.down.add("m2");
    await c.rounds();
    assert.deepEqual(holders(c, "mine", "web1"), ["m1", "m3"], "m3 keeps the record while m2 has not got it");
    assert.ok(c.stores.get("m3")!.handoff.get("~m/web1") !== undefined);
    c.down.delete("m2");
    await c.rounds();
    assert.deepEqual(holders(c, "mine", "web1"), ["m1", "m2"]);
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 0);
    assert.equal(new MinionCache(c.stores.get("m3")!).stampOf("mine", "web1"), undefined, "m3's stamp went with the record");
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an owner keeps the newest record by stamp: an older copy handed off after a newer one does not replace it", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    // the older write on m3 waits (m3 cut off), the newer on m1 is placed first
    c.down.add("m3");
    await c.writer("m3").put("db1", { grains: { role: "old" } });
    c.tick(1000);
    await c.writer("m1").put("db1", { grains: { role: "new" } });
    await c.rounds();
    c.down.delete("m3");
    await c.rounds();
    for (const m of ["m1", "m2"]) assert.deepEqual(c.stores.get(m)!.minionData.get("db1"), { grains: { role: "new" } }, m);
    assert.deepEqual(holders(c, "minionData", "db1"), ["m1", "m2"], "m3's older copy was acknowledged (superseded) and dropped");
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("records held before the route (broadcast: every master has every minion) are placed by the first placement scan", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    for (const m of ["m1", "m2", "m3"]) {
      const plain = new MinionCache(c.stores.get(m)!);
      for (const id of ["x1", "x2", "x3"]) await plain.setMine(id, { f: id });
    }
    await c.rounds(4);
    for (const id of ["x1", "x2", "x3"]) assert.deepEqual(holders(c, "mine", id), ["m1", "m2"], id);
    assert.ok(c.stores.get("m3")!.placedBy.get("~mine/minions"), "the table the copies are placed by is kept");
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("when the ring's table changes (replicas 2 -> 1 -> 2), each record moves to its new owners and leaves the others", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  const ids = Array.from({ length: 12 }, (_, i) => `r${i}`);
  try {
    for (const id of ids) await c.writer("m3").setMine(id, { f: id });
    await c.rounds();
    for (const id of ids) assert.deepEqual(holders(c, "mine", id), ["m1", "m2"], id);
    c.setTable({ ...TABLE, replicas: 1, epoch: 4 });
    await c.rounds(4);
    const one = ids.map((id) => holders(c, "mine", id));
    for (const [i, h] of one.entries()) assert.deepEqual(h, ownersOf({ ...TABLE, replicas: 1 }, ids[i]!), ids[i]);
    assert.ok(one.some((h) => h[0] === "m1") && one.some((h) => h[0] === "m2"), "both masters own some");
    c.setTable({ ...TABLE, epoch: 5 });
    await c.rounds(4);
    for (const id of ids) assert.deepEqual(holders(c, "mine", id), ["m1", "m2"], `${id} back on both`);
    for (const m of ["m1", "m2", "m3"]) assert.equal(c.stores.get(m)!.handoff.getCount(), 0, `${m}'s outbox is empty`);
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("reads across masters: newest records, a grain target evaluated where the data is, ids held; answered with one owner down", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    await c.writer("m3").put("w1", { grains: { role: "web" } });
    await c.writer("m3").put("d1", { grains: { role: "db" } });
    await c.writer("m3").setMine("w1", { "test.ping": true });
    await c.rounds();
    assert.deepEqual(holders(c, "minionData", "w1"), ["m1", "m2"]);
    c.down.add("m1");
    const m3 = c.svc.get("m3")!;
    const recs = await m3.query({ op: "records", bank: "mine", ids: ["w1", "d1"] });
    assert.deepEqual(recs.records!.map((r) => [r.id, r.v]), [["w1", { "test.ping": true }]]);
    assert.deepEqual(Object.keys(recs.unreachable), ["m1"]);
    const tgt = await m3.query({ op: "target", tgt: "role:web", tgtType: "grain", delimiter: ":", greedy: true, nodegroups: {}, ids: ["w1", "d1", "nodata"] });
    assert.deepEqual([tgt.matched, [...tgt.held!].sort()], [["w1"], ["d1", "w1"]], "nodata is held nowhere: the asker's greedy verdict stands");
    const ids = await m3.query({ op: "ids", bank: "data" });
    assert.deepEqual(ids.ids, ["d1", "w1"]);
    const held = await m3.query({ op: "held", bank: "data" });
    assert.deepEqual(held.held_by!.m2, { ids: ["d1", "w1"], truncated: false, pending: 0 });
    assert.ok("error" in held.held_by!.m1!);
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a malformed hand-off or read is refused with a clear error, and nothing is stored", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  const ask = (q: unknown) => (c.svc.get("m1") as unknown as { serve(m: PeerMessage): Promise<Uint8Array> }).serve({ from: "m3", channel: MINION_PLACEMENT_CHANNEL, payload: cbor.encode(q) as Uint8Array, request: true });
  try {
    await assert.rejects(ask({ op: "store" }), /malformed minion data placement message: store carries no items/);
    await assert.rejects(ask({ op: "records", bank: "mine", ids: ["../x"] }), /ids must be at most/);
    await assert.rejects(ask({ op: "nope" }), { code: "PEER_UNKNOWN_KIND", message: /m1 has no raft\/minions request "nope"/ });
    const r = cbor.decode(await ask({ op: "store", items: [{ k: "mine", id: "bad/id", t: 1, o: "m3", v: {} }, { k: "mine", id: "ok1", t: "x", o: "m3", v: {} }] })) as { ok: string[] };
    assert.deepEqual(r.ok, []);
    assert.equal(c.stores.get("m1")!.mine.getCount(), 0);
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("back to broadcast: once mine is no longer routed, every master pulls the records it lacks from the others, and placement_check's held answer says who is still gathering", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  const ids = ["b1", "b2", "b3", "b4"];
  try {
    for (const id of ids) await c.writer("m3").setMine(id, { f: id });
    await c.rounds();
    for (const id of ids) assert.deepEqual(holders(c, "mine", id), ["m1", "m2"], `${id} placed on its owners`);
    // an owner writes a newer record just before the route goes: the newest wins everywhere after the gather
    c.tick(1000);
    await c.writer("m1").setMine("b1", { f: "newer" });
    await c.rounds();
    c.unroute();
    c.down.add("m2");
    // m3 cannot pull from m2 yet: still gathering, its marks kept
    await c.svc.get("m3")!.broadcast.gather("mine");
    const held = await c.svc.get("m1")!.query({ op: "held", bank: "mine" });
    assert.equal((held.held_by!.m3 as { gathering?: boolean }).gathering, true, "m3 says it is still gathering");
    assert.ok([...c.stores.get("m3")!.placedBy.getKeys({ start: "~mine/", end: "~mine/\uffff" })].length > 0, "m3 keeps its placed-by marks until it pulled from every master");
    c.down.delete("m2");
    // the timer's path: a tick starts the gather (due at once after the first attempt's retry delay)
    c.tick(10_000);
    for (const s of c.svc.values()) s.tick();
    await until(() => ["m1", "m2", "m3"].every((m) => [...c.stores.get(m)!.placedBy.getKeys({ start: "~mine/", end: "~mine/\uffff" })].length === 0));
    for (const id of ids) assert.deepEqual(holders(c, "mine", id), ["m1", "m2", "m3"], `${id} on every master`);
    for (const m of ["m1", "m2", "m3"]) assert.deepEqual(c.stores.get(m)!.mine.get("b1"), { f: "newer" }, `${m} holds the newest b1`);
    const after = await c.svc.get("m1")!.query({ op: "held", bank: "mine" });
    for (const m of ["m1", "m2", "m3"]) assert.equal((after.held_by![m] as { gathering?: boolean }).gathering, undefined, `${m} is done`);
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a record still in the outbox when its bank goes back to broadcast is spread to every master, not left where it was written", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    c.down.add("m1");
    c.down.add("m2");
    await c.writer("m3").put("late1", { grains: { role: "late" } });
    await c.rounds();
    assert.deepEqual(holders(c, "minionData", "late1"), ["m3"], "no owner reachable: it waits on m3");
    c.unroute();
    // every master already gathered (nothing else to pull) before m3's outbox record could move
    c.down.delete("m1");
    c.down.delete("m2");
    for (const m of ["m1", "m2"]) await c.svc.get(m)!.broadcast.gather("data");
    assert.deepEqual(holders(c, "minionData", "late1").includes("m1"), true, "m1 pulled it from m3 in its gather");
    // the outbox path alone: a record written on m3 after the others gathered still reaches them
    // (m3 had not applied the cleared route yet: its write went to the outbox, not to the peers)
    const stale = new MinionCache(c.stores.get("m3")!, () => 5_000);
    stale.track("m3", () => assert.fail("written as placed"), () => true);
    await stale.put("late1", { grains: { role: "later" } });
    await c.rounds(1);
    for (const m of ["m1", "m2", "m3"]) assert.deepEqual(c.stores.get(m)!.minionData.get("late1"), { grains: { role: "later" } }, m);
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 0, "acknowledged by every master: out of the outbox");
    // with a master down it waits in the outbox, and the master that has it is not sent it again every round
    c.down.add("m2");
    const later = new MinionCache(c.stores.get("m3")!, () => 6_000);
    later.track("m3", () => assert.fail("written as placed"), () => true);
    await later.put("late1", { grains: { role: "latest" } });
    c.sent.clear();
    await c.rounds(5);
    assert.deepEqual([c.sent.get("spread:m3->m1"), c.sent.get("spread:m3->m2")], [1, undefined], "m1 once, m2 (down) not at all");
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 1, "waits for m2");
    c.down.delete("m2");
    await c.rounds(1);
    assert.deepEqual([c.sent.get("spread:m3->m1"), c.sent.get("spread:m3->m2")], [1, 1]);
    assert.deepEqual(c.stores.get("m2")!.minionData.get("late1"), { grains: { role: "latest" } });
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 0);
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("collect_from_peers of a minion bank pulls only what this master lacks or holds older, and is refused while the bank is placed", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    await assert.rejects(c.svc.get("m3")!.query({ op: "collect", bank: "mine" }), /placed on a ring: mine is routed to ring minions.*route_clear mine/);
    c.unroute();
    const plain = (m: string, t: number) => {
      const mc = new MinionCache(c.stores.get(m)!, () => t);
      mc.track(m, () => undefined);
      return mc;
    };
    await plain("m1", 100).setMine("c1", { v: "old" });
    await plain("m2", 200).setMine("c1", { v: "new" });
    await plain("m2", 200).setMine("c2", { v: 2 });
    await plain("m3", 300).setMine("c3", { v: 3 });
    const r = await c.svc.get("m1")!.query({ op: "collect", bank: "mine" });
    assert.deepEqual([r.collected!.m2!.items, r.collected!.m3!.items], [2, 1], "c1 (newer on m2) and c2 from m2, c3 from m3");
    assert.deepEqual(c.stores.get("m1")!.mine.get("c1"), { v: "new" });
    const again = await c.svc.get("m1")!.query({ op: "collect", bank: "mine" });
    assert.deepEqual([again.collected!.m2!.items, again.collected!.m3!.items], [0, 0], "nothing newer elsewhere: nothing fetched");
    c.down.add("m3");
    const partial = await c.svc.get("m1")!.query({ op: "collect", bank: "mine" });
    assert.deepEqual(partial.collected!.m3, { items: 0, bytes: 0, errors: ["not connected"], ms: 0, failed: ["bank:minions/mine"] });
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("shed_unowned of a minion bank drops a record this master does not own only when an owner holds it as new; the only or newest copy stays", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    // replicas 1 on m1, m2: each id has one owner; m1 holds extra copies of ids m2 owns
    const one = { ...TABLE, replicas: 1, epoch: 9 };
    c.setTable(one);
    const ids = Array.from({ length: 8 }, (_, i) => `s${i}`);
    const theirs = ids.filter((id) => ownersOf(one, id)[0] === "m2");
    assert.ok(theirs.length >= 3, "m2 owns some");
    const [same, older, absent] = theirs;
    const at = (m: string, t: number) => new MinionCache(c.stores.get(m)!, () => t);
    for (const id of ids) {
      const w = at("m1", 100);
      w.track("m1", () => undefined);
      await w.setMine(id, { here: id });
    }
    // m2 holds `same` (and the rest of its ids) at m1's stamp, `older` at an older stamp, and not `absent`
    for (const id of [same!, ...theirs.slice(3)]) await new MinionCache(c.stores.get("m2")!).applyPeer({ k: "mine", id, t: 100, o: "m1", v: { here: id } });
    await new MinionCache(c.stores.get("m2")!).applyPeer({ k: "mine", id: older!, t: 50, o: "m2", v: { old: true } });
    const dry = await c.svc.get("m1")!.query({ op: "shed", ring: "minions", bank: "mine", dryRun: true });
    const expectDrop = theirs.length - 2;
    assert.deepEqual(dry.shed, { status: "ok", dropped: expectDrop, kept: ids.length - expectDrop, kept_sole_copy: 2 });
    assert.equal(c.stores.get("m1")!.mine.getCount(), ids.length, "a dry run removes nothing");
    const real = await c.svc.get("m1")!.query({ op: "shed", ring: "minions", bank: "mine", dryRun: false });
    assert.deepEqual(real.shed, dry.shed, "the real run drops what the dry run counted");
    assert.ok(c.stores.get("m1")!.mine.get(older!) && c.stores.get("m1")!.mine.get(absent!), "the newest and the only copy stay");
    assert.equal(c.stores.get("m1")!.mine.get(same!), undefined, "a copy its owner holds at the same stamp goes");
    // not routed to the ring: nothing is shed
    c.unroute();
    const skipped = await c.svc.get("m1")!.query({ op: "shed", ring: "minions", bank: "mine", dryRun: false });
    assert.equal(skipped.shed!.status, "skipped");
    assert.match(skipped.shed!.reason!, /routed to no ring \(broadcast/);
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a route cleared and set again to the same ring between two rounds places again what the gather brought back to broadcast", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  const ids = ["g1", "g2", "g3"];
  try {
    for (const id of ids) await c.writer("m3").setMine(id, { f: id });
    await c.rounds();
    for (const id of ids) assert.deepEqual(holders(c, "mine", id), ["m1", "m2"], `${id} placed on its owners`);
    // route_clear: every master gathers (no round runs meanwhile: with neither bank routed a master only gathers)
    c.unroute();
    for (const m of ["m1", "m2", "m3"]) assert.equal((await c.svc.get(m)!.broadcast.gather("mine")).complete, true, m);
    for (const id of ids) assert.deepEqual(holders(c, "mine", id), ["m1", "m2", "m3"], `${id} on every master (broadcast)`);
    // route_set mine minions again, the same ring and table as before
    c.reroute();
    await c.rounds(4);
    for (const id of ids) assert.deepEqual(holders(c, "mine", id), ["m1", "m2"], `${id} back on its owners only`);
    assert.ok(c.stores.get("m3")!.placedBy.get("~mine/minions"), "m3's scan is done");
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a route set again while a gather still pulls: the placement scan waits for the pull, and what it stored goes to the owners", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  const ids = ["p1", "p2", "p3"];
  try {
    for (const id of ids) await c.writer("m3").setMine(id, { f: id });
    await c.rounds();
    c.unroute();
    c.slow.set("m1", 200); // m1's answers take 200 ms: m3's pull from it outlasts the route's return
    const gathering = c.svc.get("m3")!.broadcast.gather("mine");
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(c.svc.get("m3")!.broadcast.pulling("mine"), true, "m3 is pulling");
    c.reroute();
    await c.svc.get("m3")!.round(); // a round while the pull is under way: no scan yet
    assert.equal(c.stores.get("m3")!.placedBy.get("~mine/minions"), undefined, "no scan while the pull stores records");
    const g = await gathering;
    assert.equal(g.complete, false, "routed again meanwhile: the gather ends without dropping its mark");
    assert.ok(ids.some((id) => c.stores.get("m3")!.mine.get(id) !== undefined), "the pull stored records on m3, which owns none");
    c.slow.delete("m1");
    await c.rounds(4);
    for (const id of ids) assert.deepEqual(holders(c, "mine", id), ["m1", "m2"], `${id} on its owners only`);
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an idle master (no bank routed, nothing to hand off or gather) does not touch the job store on its ticks; a route set later still starts placement", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    c.unroute();
    await c.ticks("m3", 240); // 12 s: past idleSettleMs after its start
    assert.ok((c.looks.get("m3") ?? 0) > 0, "it looked at the store while the routes had just changed (its start)");
    c.looks.clear();
    await c.ticks("m3", 1200); // a minute of ticks
    assert.equal(c.looks.get("m3") ?? 0, 0, "no look at the store in a minute of idle ticks");
    c.reroute();
    await c.writer("m3").setMine("r1", { "test.ping": true });
    await c.ticks("m3", 2);
    assert.deepEqual(holders(c, "mine", "r1"), ["m1", "m2"]);
    assert.ok((c.looks.get("m3") ?? 0) > 0);
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 0, "handed off: the outbox is empty");
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a record written as placed just after the route was cleared (a thread that read the old route) still leaves the outbox before the tick goes quiet", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    await c.ticks("m3", 240);
    c.unroute();
    await c.ticks("m3", 20); // 1 s after the route went
    const stale = new MinionCache(c.stores.get("m3")!, () => 99_000);
    stale.track("m3", () => assert.fail("written as placed"), () => true);
    await stale.setMine("s1", { f: "stale" });
    await c.ticks("m3", 240);
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 0, "spread: out of the outbox");
    assert.equal(c.stores.get("m3")!.placedBy.getCount(), 0, "m3's gather back to broadcast (its copies were placed) is done");
    for (const m of ["m1", "m2"]) assert.deepEqual(c.stores.get(m)!.mine.get("s1"), { f: "stale" }, `spread to ${m}`);
    c.looks.clear();
    await c.ticks("m3", 400);
    assert.equal(c.looks.get("m3") ?? 0, 0, "then quiet");
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("back to broadcast beside a master of an older version (it lacks stamps and spread): the gather does not wait for it and names it, collect_from_peers says it cannot take part, the outbox does not wait for it", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    for (const id of ["o1", "o2"]) await c.writer("m3").setMine(id, { f: id });
    await c.rounds();
    c.unroute();
    c.older.set("m2", new Set(["stamps", "spread"]));
    const t0 = Date.now();
    const r = await c.svc.get("m3")!.broadcast.gather("mine");
    assert.ok(Date.now() - t0 < 2_000, "answered at once, not waited out");
    assert.deepEqual([r.complete, r.pulled, Object.keys(r.unable), Object.keys(r.waiting)], [true, ["m1"], ["m2"], []]);
    assert.match(r.unable.m2!, /m2 does not know raft\/minions "stamps" \(it runs an older brine\)/);
    assert.equal(c.stores.get("m3")!.placedBy.getCount({ start: "~mine/", end: "~mine/\uffff" }), 0, "the gather ended: m3's marks of the bank went");
    for (const id of ["o1", "o2"]) assert.ok(c.stores.get("m3")!.mine.get(id), `${id} pulled from m1`);
    const held = await c.svc.get("m1")!.query({ op: "held", bank: "mine" });
    assert.deepEqual(Object.keys((held.held_by!.m3 as { gathered_without?: Record<string, string> }).gathered_without ?? {}), ["m2"], "m3's ids answer names the master it gathered without");
    const col = await c.svc.get("m3")!.query({ op: "collect", bank: "mine" });
    assert.match(col.collected!.m2!.errors[0]!, /bank:minions\/mine: m2 cannot take part: it does not know raft\/minions "stamps"/);
    assert.deepEqual(col.collected!.m1!.errors, []);
    // a record left in m3's outbox for the bank back to broadcast reaches m1 and does not wait for m2
    const stale = new MinionCache(c.stores.get("m3")!, () => 50_000);
    stale.track("m3", () => assert.fail("written as placed"), () => true);
    await stale.setMine("o3", { f: "late" });
    c.sent.clear();
    await c.rounds(2);
    assert.deepEqual(c.stores.get("m1")!.mine.get("o3"), { f: "late" });
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 0, "out of the outbox");
    assert.equal(c.sent.get("spread:m3->m2"), 1, "m2 asked once, then not waited for");
    // once m2 is upgraded, collect_from_peers pulls from it and m3 no longer names it
    c.older.delete("m2");
    const again = await c.svc.get("m3")!.query({ op: "collect", bank: "mine" });
    assert.deepEqual(again.collected!.m2!.errors, []);
    const after = await c.svc.get("m1")!.query({ op: "held", bank: "mine" });
    assert.equal((after.held_by!.m3 as { gathered_without?: unknown }).gathered_without, undefined);
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a peer's answer that it lacks a request kind is told apart from a failure worth retrying", () => {
  const now = new PeerRemoteError("m2", "PEER_UNKNOWN_KIND", unknownKind("raft/minions", "stamps", "m2").message);
  assert.equal(lacksKind(now, "stamps"), true);
  assert.equal(lacksKind(now, "spread"), false, "another kind");
  assert.equal(lacksKind(new PeerRemoteError("m2", "MINION_PLACEMENT_BAD_MESSAGE", "malformed minion data placement message: unknown op stamps"), "stamps"), true, "an older master's answer");
  assert.equal(lacksKind(new PeerRemoteError("m2", "MINION_PLACEMENT_BAD_MESSAGE", "malformed minion data placement message: stamps names no bank"), "stamps"), false, "a malformed request");
  assert.equal(lacksKind(new PeerRemoteError("m2", "CLUSTER_PEER_CHANNEL", "invalid peer channel or handler: no handler for channel raft/minions on m2"), "stamps"), false, "a master still starting");
  assert.equal(lacksKind(new BrineError("CLUSTER_PEER_TIMEOUT", "raft/minions to m2 after 10000 ms"), "stamps"), false);
});

test("collect_from_peers of a minion bank that outlasts the Raft client's call deadline answers Salt's result when the pull is done; with a timeout it answers early naming what is in flight; async=True at once", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-minion-handoff-"));
  const c = cluster(dir);
  try {
    c.unroute();
    const plain = (m: string) => {
      const mc = new MinionCache(c.stores.get(m)!, () => 500);
      mc.track(m, () => undefined);
      return mc;
    };
    for (const id of ["k1", "k2", "k3"]) await plain("m2").setMine(id, { f: id });
    await plain("m1").setMine("k4", { f: "k4" });
    // m3's runner thread talks to its Raft worker with a 600 ms call deadline (the real one is ~15 s), as RaftClient does
    const deadlineMs = 600;
    const m3 = c.svc.get("m3")!;
    const raft = {
      callTimeoutMs: deadlineMs,
      minionQuery: (q: MinionQuery) => {
        let t: NodeJS.Timeout | undefined;
        const late = new Promise<never>((_, no) => (t = setTimeout(() => no(new BrineError("RAFT_UNKNOWN", `no answer from the raft worker within ${deadlineMs} ms`)), deadlineMs)));
        return Promise.race([m3.query(q), late]).finally(() => clearTimeout(t));
      },
    };
    const ctx = { cfg: { cluster_id: "c1" }, cluster: { nodeId: "m3", raft } } as unknown as RunnerContext;
    const run = (kwarg: Record<string, unknown>) => stateSyncRunners["cluster.collect_from_peers"]!(ctx, [], { banks: "minions/mine", ...kwarg }) as Promise<Record<string, Record<string, unknown>>>;
    c.slow.set("m2", 700); // a stamps page and a records answer from m2: ~1.4 s, past the call deadline
    const t0 = Date.now();
    const r = await run({});
    assert.ok(Date.now() - t0 > deadlineMs * 2, `the pull outlasted one call's deadline (${Date.now() - t0} ms)`);
    assert.deepEqual(Object.keys(r), ["m1", "m2"]);
    assert.deepEqual([r.m1!.items, r.m1!.errors, r.m1!.deleted], [1, [], 0]);
    assert.deepEqual([r.m2!.items, r.m2!.errors, r.m2!.in_flight], [3, [], undefined], "Salt's shape, the whole pull from m2");
    for (const id of ["k1", "k2", "k3", "k4"]) assert.ok(c.stores.get("m3")!.mine.get(id), id);
    // the operator's bound (salt-run -t): answered then, m2 named in flight; the pull carries on
    await new MinionCache(c.stores.get("m2")!, () => 900).setMine("k5", { f: "k5" });
    const t1 = Date.now();
    const early = await run({ timeout: 0.3 });
    assert.ok(Date.now() - t1 < 1_200, `answered at its timeout (${Date.now() - t1} ms)`);
    assert.equal(early.m2!.in_flight, true);
    assert.equal(early.m1!.in_flight, undefined, "m1 answered in time");
    await until(() => c.stores.get("m3")!.mine.get("k5") !== undefined);
    // a call made while a collection is under way gets the next one, not that one: it may have read m2's stamps
    // before a record written since (m2's stamps are read ~0.7 s in, its records ~1.4 s); the next starts when it ends
    const t3 = Date.now();
    await run({ timeout: 0.2 });
    await new Promise((r) => setTimeout(r, Math.max(0, 1_000 - (Date.now() - t3))));
    await new MinionCache(c.stores.get("m2")!, () => 960).setMine("k7", { f: "k7" });
    const next = await run({});
    assert.ok(c.stores.get("m3")!.mine.get("k7"), `the call's collection pulled what was written before the call: ${JSON.stringify(next)}`);
    // Salt's fire-and-forget
    await new MinionCache(c.stores.get("m2")!, () => 950).setMine("k6", { f: "k6" });
    const t2 = Date.now();
    assert.deepEqual(await run({ async: true }), { status: "fan-out initiated", tag: "cluster/runner/collect_from_peers", data: { channels: ["bank:minions/mine"] } });
    assert.ok(Date.now() - t2 < 500);
    await until(() => c.stores.get("m3")!.mine.get("k6") !== undefined);
    await assert.rejects(run({ timeout: "soon" }), /timeout must be a number of seconds above 0/);
  } finally {
    for (const s of c.svc.values()) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

async function until(cond: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) assert.fail("condition not met in time");
    await new Promise((r) => setTimeout(r, 20));
  }
}
