/**
 * The hand-off outbox over real job caches (one LMDB store per master in temp dirs) and an in-process peer
 * channel between three JobPlacement services (src/workers/raft/job-placement.ts), ring "jobs" on m1 and m2
 * with replicas 2:
 * - a job and its returns written on m3 (outside the ring) reach both owners, and m3 then drops its copy;
 * - while one owner cannot be reached, m3 keeps everything (nothing acknowledged to a minion is lost), and
 *   the next round after it is back finishes the hand-off;
 * - an owner that took the return itself keeps its copy and hands it to the other owner;
 * - a master outside the ring learns the table from a host;
 * - cluster-wide reads merge every master's copy, and answer while one master is down;
 * - a job list larger than one peer-channel message arrives whole, page by page (a small page and frame limit);
 * - when the ring's table changes (a voter joins, one leaves), each job moves to its new owners and leaves the
 *   masters that no longer own it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { MinionCache } from "../../src/lib/store/minion-cache.js";
import { envDirOf, recoverRunners } from "../../src/runners/cluster-recover.js";
import type { RunnerContext } from "../../src/runners/context.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { assignSlots } from "../../src/shared/sab-ring/assign.js";
import { BrineError } from "../../src/shared/errors.js";
import { ownersOf, type PlacementTable } from "../../src/shared/placement.js";
import { JobPlacement } from "../../src/workers/raft/job-placement.js";
import { encodeWire } from "../../src/shared/protocol/msgpack.js";
import { cbor } from "../../src/shared/cbor.js";
import type { PeerMessage } from "../../src/workers/raft/peer/peer-types.js";

const a = assignSlots(["m1", "m2"]);
const TABLE: PlacementTable = { ring: "jobs", members: "voters", replicas: 2, voters: a.nodes, nodes: a.nodes, owners: a.owners, epoch: 3 };

type Handler = (m: PeerMessage) => Uint8Array | void | Promise<Uint8Array | void>;

interface ClusterOptions {
  /** each master's own table of ring "jobs" (default: TABLE on m1 and m2, none on m3) */
  table?: (id: string) => PlacementTable | undefined;
  listPageBytes?: number;
  /** the channel refuses a request or an answer larger than this (a peer-channel frame limit), bytes */
  frameBytes?: number;
}

/** Three masters' placement services wired through one in-process channel; `down` cuts a master off. */
function cluster(dir: string, o: ClusterOptions = {}) {
  const handlers = new Map<string, Map<string, Handler>>();
  const down = new Set<string>();
  const stores = new Map<string, Store>();
  const svc = new Map<string, JobPlacement>();
  /** requests made over the channel, by op (`list`, `read`, `store`, `table`) and by op and sender (`store:m1`) */
  const requests = new Map<string, number>();
  const make = (id: string) => {
    const store = stores.get(id)!;
    const channel = {
      on: (ch: string, h: Handler) => {
        handlers.get(id)!.set(ch, h);
        return () => handlers.get(id)!.delete(ch);
      },
      request: async (peer: string, ch: string, payload: Uint8Array) => {
        if (down.has(peer) || down.has(id)) throw new BrineError("CLUSTER_PEER_DOWN", peer);
        const op = String((cbor.decode(payload) as { op?: unknown }).op);
        for (const k of [op, `${op}:${id}`]) requests.set(k, (requests.get(k) ?? 0) + 1);
        const h = handlers.get(peer)?.get(ch);
        if (!h) throw new BrineError("CLUSTER_PEER_UNKNOWN", peer);
        if (o.frameBytes !== undefined && payload.byteLength > o.frameBytes) throw new BrineError("CLUSTER_PEER_CHANNEL", `request of ${payload.byteLength} bytes`);
        let answer: Uint8Array;
        try {
          answer = (await h({ from: id, channel: ch, payload, request: true })) ?? new Uint8Array(0);
        } catch (e) {
          throw new BrineError("CLUSTER_PEER_REMOTE", (e as Error).message);
        }
        if (o.frameBytes !== undefined && answer.byteLength > o.frameBytes) throw new BrineError("CLUSTER_PEER_CHANNEL", `answer of ${answer.byteLength} bytes`);
        return answer;
      },
    };
    svc.set(
      id,
      new JobPlacement({
        store: () => store,
        channel,
        self: id,
        timeoutMs: 5000,
        route: () => "jobs",
        localTable: () => (o.table ? o.table(id) : id === "m3" ? undefined : TABLE),
        hosts: () => ["m1", "m2"],
        peers: () => ["m1", "m2", "m3"].filter((x) => x !== id),
        up: (peer) => !down.has(peer),
        ...(o.listPageBytes !== undefined ? { listPageBytes: o.listPageBytes } : {}),
      }),
    );
  };
  for (const id of ["m1", "m2", "m3"]) {
    stores.set(id, openStore({ cachedir: path.join(dir, id), brine_lmdb_map_bytes: 64 * 1024 * 1024 }));
    handlers.set(id, new Map());
    make(id);
  }
  /** a master's placement service started again on its store (what it knew in memory is gone) */
  const restart = (id: string) => {
    svc.get(id)!.close();
    make(id);
  };
  return { stores, svc, down, restart, requests, jobs: (id: string) => new JobCache(stores.get(id)!, () => true), plain: (id: string) => new JobCache(stores.get(id)!) };
}

/** A jid whose owners under TABLE are m1 and m2 (with replicas 2 over two voters, every jid). */
const JID = "20261125120000000001";

test("a job written outside the ring reaches both owners, then leaves the master that took it; an owner down keeps it there", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-handoff-"));
  const c = cluster(dir);
  try {
    assert.deepEqual(ownersOf(TABLE, JID), ["m1", "m2"]);
    const m3 = c.jobs("m3");
    await m3.saveLoad(JID, { jid: JID, fun: "test.ping", tgt: "*" }, ["a", "b"]);
    assert.equal(await m3.saveReturn(JID, "a", { return: true, retcode: 0 }, true), true);
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 2, "the load and the return wait in m3's outbox");

    // m2 is down: nothing may leave m3
    c.down.add("m2");
    await c.svc.get("m3")!.round();
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 2);
    assert.ok(c.plain("m3").getLoad(JID), "m3 keeps the job while an owner has not got it");
    assert.deepEqual(Object.keys(c.plain("m3").returnsFor(JID)), ["a"]);

    // the other owner already has it (a first round reached it); reads still answer from m1 and m3
    const whileDown = await c.svc.get("m1")!.clusterCopy(JID);
    assert.deepEqual(Object.keys(whileDown.job.returns), ["a"]);
    assert.deepEqual(Object.keys(whileDown.unreachable), ["m2"]);

    c.down.delete("m2");
    await c.svc.get("m3")!.round();
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 0, "every owner acknowledged: the outbox is empty");
    assert.equal(c.plain("m3").getLoad(JID), undefined, "m3 is not an owner: its copy is gone");
    assert.equal(c.stores.get("m3")!.listed.get(JID), undefined, "its list entry too");
    for (const id of ["m1", "m2"]) assert.ok(c.stores.get(id)!.listed.get(JID), `${id} keeps the list entry with the load`);
    assert.deepEqual(c.plain("m3").returnsFor(JID), {});
    assert.equal(c.plain("m3").endtime(JID), undefined);
    for (const id of ["m1", "m2"]) {
      const j = c.plain(id);
      assert.equal(j.getLoad(JID)?.fun, "test.ping", id);
      assert.deepEqual(j.expectedMinions(JID), ["a", "b"], id);
      assert.deepEqual(j.returnsFor(JID), { a: { return: true, retcode: 0 } }, id);
      assert.ok(j.endtime(JID), `${id} has the end time`);
      assert.equal(c.stores.get(id)!.handoff.getCount(), 0, `${id} queued nothing: a hand-off's receiver has no outbox`);
    }

    // a later return on m3 goes the same way (m3 no longer has the load: only the return and its end time travel)
    assert.equal(await m3.saveReturn(JID, "b", { return: false }, true), true);
    await c.svc.get("m3")!.round();
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 0);
    assert.deepEqual(Object.keys(c.plain("m1").returnsFor(JID)).sort(), ["a", "b"]);
    assert.deepEqual(Object.keys(c.plain("m2").returnsFor(JID)).sort(), ["a", "b"]);
    assert.deepEqual(c.plain("m3").returnsFor(JID), {});

    // a runner job's return is stored as msgpack bytes (job-cache.ts): handed off as stored, read back decoded
    const RJID = "20261125120000000002";
    await m3.saveLoad(RJID, { jid: RJID, fun: "runner.test.arg" }, ["m3"]);
    assert.equal(await m3.saveReturn(RJID, "m3", { return: undefined, return_msgpack: encodeWire({ ran: [1, "two"] }), success: true }, false), true);
    await c.svc.get("m3")!.round();
    assert.equal(c.stores.get("m3")!.handoff.getCount(), 0, "the runner job was accepted by both owners");
    assert.deepEqual(c.plain("m1").returnsFor(RJID), { m3: { return: { ran: [1, "two"] }, success: true } });
    assert.deepEqual((await c.svc.get("m3")!.clusterCopy(RJID)).job.returns, { m3: { return: { ran: [1, "two"] }, success: true } });

    // reads on the master outside the ring find it all
    const read = await c.svc.get("m3")!.clusterCopy(JID);
    assert.deepEqual([Object.keys(read.job.returns).sort(), read.job.minions, read.job.load?.fun, read.unreachable], [["a", "b"], ["a", "b"], "test.ping", {}]);
    const list = await c.svc.get("m3")!.clusterList();
    assert.deepEqual(
      list.jobs.map((j) => [j[0], j[2]]),
      [
        [JID, ["a", "b"]],
        [RJID, ["m3"]],
      ],
    );
  } finally {
    for (const s of c.svc.values()) s.close();
    for (const s of c.stores.values()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an owner that took a return keeps it and hands it to the other owner, and nothing goes to a master outside the ring", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-handoff-"));
  const c = cluster(dir);
  try {
    await c.jobs("m1").saveLoad(JID, { jid: JID, fun: "test.ping" }, ["a"]);
    await c.jobs("m1").saveReturn(JID, "a", { return: 1 }, false);
    await c.svc.get("m1")!.round();
    assert.equal(c.stores.get("m1")!.handoff.getCount(), 0);
    assert.deepEqual(c.plain("m1").returnsFor(JID), { a: { return: 1 } }, "m1 owns the jid: it keeps its copy");
    assert.deepEqual(c.plain("m2").returnsFor(JID), { a: { return: 1 } });
    assert.deepEqual(c.plain("m3").returnsFor(JID), {}, "m3 is no owner: nothing was sent there");

  } finally {
    for (const s of c.svc.values()) s.close();
    for (const s of c.stores.values()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a job list larger than one peer-channel message arrives whole, page by page", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-handoff-"));
  // pages of 2 KB under a 4 KB frame: one answer with every job (about 30 KB) could not cross the channel
  const c = cluster(dir, { listPageBytes: 2048, frameBytes: 4096 });
  try {
    const jids: string[] = [];
    for (let i = 0; i < 60; i++) {
      const jid = `202611251200000${String(10000 + i)}`;
      jids.push(jid);
      // a plain cache: not queued for hand-off, so each job stays where it was written
      await c.plain(i % 2 === 0 ? "m1" : "m2").saveLoad(jid, { jid, fun: "test.arg", arg: ["x".repeat(400)], tgt: "*" }, [`minion-${i}`]);
    }
    const list = await c.svc.get("m3")!.clusterList();
    assert.deepEqual(list.unreachable, {});
    assert.deepEqual(list.jobs.map((j) => j[0]), jids, "every job of m1 and m2, once each, in jid order");
    assert.deepEqual(list.jobs[7]![2], ["minion-7"]);
    // one page alone is under the frame limit, and paging walked back to the oldest job
    const first = c.svc.get("m1")!.localList(undefined, 2048);
    assert.ok(first.next !== undefined && first.jobs.length > 0 && first.jobs.length < 30, `m1's first page holds part of its 30 jobs: ${first.jobs.length}`);
    assert.equal(first.jobs[first.jobs.length - 1]![0], jids[58], "the first page holds the newest jobs");
  } finally {
    for (const s of c.svc.values()) s.close();
    for (const s of c.stores.values()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a cluster-wide list over max jobs keeps the newest max, reads only the pages it needs, and says it was cut", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-handoff-"));
  // pages of about 6 jobs
  const c = cluster(dir, { listPageBytes: 2048 });
  try {
    const jids: string[] = [];
    for (let i = 0; i < 90; i++) {
      const jid = `202611251200000${String(10000 + i)}`;
      jids.push(jid);
      // every third job on m1 and m2 (an owner pair), the others on m2 or m3: a jid held twice is listed once
      const on = i % 3 === 0 ? ["m1", "m2"] : [["m1", "m2", "m3"][i % 3]!];
      for (const m of on) await c.plain(m).saveLoad(jid, { jid, fun: "test.arg", arg: ["x".repeat(200)], tgt: "*" }, [`minion-${i}`, m]);
    }
    const whole = await c.svc.get("m3")!.clusterList();
    assert.deepEqual(whole.jobs.map((j) => j[0]), jids, "no bound: every job once");
    assert.equal(whole.truncated, undefined);
    assert.deepEqual(whole.jobs[0]![2], ["m1", "m2", "minion-0"], "a job held twice is merged");

    c.requests.clear();
    const cut = await c.svc.get("m3")!.clusterList(10);
    assert.deepEqual(cut.jobs.map((j) => j[0]), jids.slice(-10), "the newest 10, oldest first");
    assert.equal(cut.truncated, true);
    assert.deepEqual(cut.unreachable, {});
    // m2 holds 60 jobs and m1 30 (pages of about 6): the newest 10 of the cluster need two pages of each at most
    const lists = c.requests.get("list") ?? 0;
    assert.ok(lists >= 2 && lists <= 4, `only the first pages were asked for: ${lists} list requests`);

    // this master's own list is read in pages by count (nothing to send): the newest first, a cursor when more are left
    const own = c.svc.get("m2")!.localList(undefined, Infinity, 5);
    assert.deepEqual(own.jobs.map((j) => j[0]), jids.filter((_, i) => i % 3 !== 2).slice(-5));
    assert.equal(own.next, own.jobs[0]![0]);

    // exactly as many jobs as the bound: all of them, not cut
    const exact = await c.svc.get("m1")!.clusterList(90);
    assert.equal(exact.jobs.length, 90);
    assert.equal(exact.truncated, undefined);

    // a master down: the others' newest, and it is named
    c.down.add("m2");
    const without = await c.svc.get("m3")!.clusterList(5);
    assert.deepEqual(Object.keys(without.unreachable), ["m2"]);
    assert.deepEqual(without.jobs.map((j) => j[0]), jids.slice(-7).filter((_, k) => [0, 1, 3, 4, 6].includes(k)), "the newest of m1 and m3");
    assert.equal(without.truncated, true);
  } finally {
    for (const s of c.svc.values()) s.close();
    for (const s of c.stores.values()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("when the ring's voters change, each job moves to its new owners and leaves the masters that no longer own it", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-handoff-"));
  const over = (nodes: string[], replicas: number, epoch: number): PlacementTable => {
    const t = assignSlots(nodes);
    return { ring: "jobs", members: "voters", replicas, voters: t.nodes, nodes: t.nodes, owners: t.owners, epoch };
  };
  let table = over(["m1", "m2"], 1, 1);
  const c = cluster(dir, { table: (id) => (table.nodes.includes(id) ? table : undefined) });
  const ids = ["m1", "m2", "m3"];
  const holders = (jid: string) => ids.filter((id) => c.plain(id).getLoad(jid) !== undefined);
  const returnHolders = (jid: string) => ids.filter((id) => c.plain(id).hasReturn(jid, "a"));
  /** rounds on every master until every outbox is empty twice in a row (a rescan takes a round per slice) */
  const settle = async () => {
    let quiet = 0;
    for (let n = 0; n < 20 && quiet < 2; n++) {
      for (const id of ids) await c.svc.get(id)!.round();
      quiet = ids.every((id) => c.stores.get(id)!.handoff.getCount() === 0) ? quiet + 1 : 0;
    }
    assert.equal(quiet, 2, "every outbox emptied");
  };
  const placedOn = (t: PlacementTable, jids: string[]) => {
    for (const jid of jids) {
      assert.deepEqual(holders(jid), ownersOf(t, jid), `${jid}'s job record is on its owners only`);
      assert.deepEqual(returnHolders(jid), ownersOf(t, jid), `${jid}'s return is on its owners only`);
    }
  };
  try {
    const jids: string[] = [];
    for (let i = 0; i < 40; i++) {
      const jid = `202611251300000${String(10000 + i)}`;
      jids.push(jid);
      const on = c.jobs(["m1", "m2", "m3"][i % 3]!);
      await on.saveLoad(jid, { jid, fun: "test.ping", tgt: "*" }, ["a"]);
      await on.saveReturn(jid, "a", { return: true }, true);
    }
    await settle();
    placedOn(table, jids);

    // m3 joins the ring: the jobs whose owner is now m3 move there, and leave m1/m2
    const before = table;
    table = over(["m1", "m2", "m3"], 1, 2);
    const moving = jids.filter((jid) => ownersOf(before, jid)[0] !== ownersOf(table, jid)[0]);
    assert.ok(moving.length > 0, "some jobs change owner");
    await settle();
    placedOn(table, jids);

    // replicas 2, then m2 leaves the ring (it is still up: it hands its copies on and drops them)
    table = over(["m1", "m2", "m3"], 2, 3);
    await settle();
    placedOn(table, jids);
    table = over(["m1", "m3"], 2, 4);
    await settle();
    placedOn(table, jids);
    for (const jid of jids) assert.deepEqual(holders(jid), ["m1", "m3"]);

    // m3 is down while the ring goes to one replica over m1 and m3: its jobs owned by m3 alone stay there, and
    // when it starts again (nothing in memory) it rebalances against the table kept in jobs/placed-by
    c.down.add("m3");
    table = over(["m1", "m3"], 1, 5);
    for (let n = 0; n < 3; n++) await c.svc.get("m1")!.round();
    c.restart("m3");
    c.down.delete("m3");
    await settle();
    placedOn(table, jids);
  } finally {
    for (const s of c.svc.values()) s.close();
    for (const s of c.stores.values()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Rounds on every master until every outbox is empty twice in a row (a rescan takes a round per slice). */
async function settle(c: ReturnType<typeof cluster>, ids = ["m1", "m2", "m3"]): Promise<void> {
  let quiet = 0;
  for (let n = 0; n < 30 && quiet < 2; n++) {
    for (const id of ids) await c.svc.get(id)!.round();
    quiet = ids.every((id) => c.stores.get(id)!.handoff.getCount() === 0) ? quiet + 1 : 0;
  }
  assert.equal(quiet, 2, "every outbox emptied");
}

test("under members self, a voter added to the ring gets every job, one that leaves it hands its copies on and drops them, and the voters that stay send nothing", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-handoff-"));
  const self = (voters: string[]): PlacementTable => ({ ring: "jobs", members: "self", replicas: 1, voters, nodes: [], owners: new Uint8Array(0), epoch: 0 });
  let table = self(["m1", "m2"]);
  const c = cluster(dir, { table: (id) => (table.voters.includes(id) ? table : undefined) });
  const ids = ["m1", "m2", "m3"];
  const holders = (jid: string) => ids.filter((id) => c.plain(id).getLoad(jid) !== undefined && c.plain(id).hasReturn(jid, "a"));
  try {
    const jids: string[] = [];
    for (let i = 0; i < 30; i++) {
      const jid = `202611251400000${String(10000 + i)}`;
      jids.push(jid);
      const on = c.jobs(ids[i % 3]!);
      await on.saveLoad(jid, { jid, fun: "test.ping", tgt: "*" }, ["a"]);
      await on.saveReturn(jid, "a", { return: true }, true);
    }
    await settle(c);
    for (const jid of jids) assert.deepEqual(holders(jid), ["m1", "m2"], `${jid} on both voters`);

    // m3 is added to the ring's group (a founder the cluster has as a voter again): it gets every job
    table = self(["m1", "m2", "m3"]);
    await settle(c);
    for (const jid of jids) assert.deepEqual(holders(jid), ids, `${jid} on the three voters`);

    // m2 leaves the ring's group while it runs: it hands on (the others have everything) and drops its copies
    c.requests.clear();
    table = self(["m1", "m3"]);
    await settle(c);
    for (const jid of jids) assert.deepEqual(holders(jid), ["m1", "m3"], `${jid} on the two voters left`);
    assert.equal(c.requests.get("store:m1") ?? 0, 0, "m1, an owner before and after, sends nothing");
    assert.equal(c.requests.get("store:m3") ?? 0, 0, "m3, an owner before and after, sends nothing");
    assert.ok((c.requests.get("store:m2") ?? 0) > 0, "m2 handed its copies on before dropping them");
  } finally {
    for (const s of c.svc.values()) s.close();
    for (const s of c.stores.values()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("rebalancing moves a job's end time, expected minions or nocache mark held without its load", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-handoff-"));
  const over = (nodes: string[], epoch: number): PlacementTable => {
    const t = assignSlots(nodes);
    return { ring: "jobs", members: "voters", replicas: 1, voters: t.nodes, nodes: t.nodes, owners: t.owners, epoch };
  };
  let table = over(["m1", "m2"], 1);
  const c = cluster(dir, { table: (id) => (table.nodes.includes(id) ? table : undefined) });
  try {
    // jids m1 owns now and m3 owns once it joins the ring
    const next = over(["m1", "m2", "m3"], 2);
    const jids: string[] = [];
    for (let i = 0; jids.length < 3 && i < 10_000; i++) {
      const jid = `2026112515${String(i).padStart(10, "0")}`;
      if (ownersOf(table, jid)[0] === "m1" && ownersOf(next, jid)[0] === "m3") jids.push(jid);
    }
    assert.equal(jids.length, 3);
    const [timed, expected, nocache] = jids as [string, string, string];
    // what a hand-off gives an owner before the job's load arrives from where it was published
    const m1 = c.stores.get("m1")!;
    await m1.endtimes.put(timed, "2026, Nov 25 15:00:00.000000");
    await m1.minions.put(expected, ["a", "b"]);
    await m1.nocache.put(nocache, true);
    for (const id of ["m1", "m2", "m3"]) await c.svc.get(id)!.round();

    table = next;
    await settle(c);
    const m3 = c.stores.get("m3")!;
    assert.equal(m3.endtimes.get(timed), "2026, Nov 25 15:00:00.000000", "the end time reached its new owner");
    assert.deepEqual(m3.minions.get(expected), ["a", "b"], "the expected minions reached their new owner");
    assert.equal(m3.nocache.get(nocache), true, "the nocache mark reached its new owner");
    assert.equal(m1.endtimes.get(timed), undefined, "m1 no longer owns it: its copy is gone");
    assert.equal(m1.minions.get(expected), undefined);
    assert.equal(m1.nocache.get(nocache), undefined);
  } finally {
    for (const s of c.svc.values()) s.close();
    for (const s of c.stores.values()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a cluster-wide list cut at max with list_jobs' filters keeps the newest matching jobs of every master, not the matches among the newest jobs", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-handoff-"));
  const c = cluster(dir, { listPageBytes: 2048 });
  try {
    // 60 jobs over the three masters; the 6 oldest ran state.apply on web*, the 54 newer test.ping on *
    const jids: string[] = [];
    for (let i = 0; i < 60; i++) {
      const jid = `202611251200000${String(10000 + i)}`;
      jids.push(jid);
      const apply = i < 6;
      await c.plain(["m1", "m2", "m3"][i % 3]!).saveLoad(jid, { jid, fun: apply ? "state.apply" : "test.ping", arg: [], tgt: apply ? "web1" : "*", tgt_type: "glob" }, [`minion-${i}`]);
    }
    const applied = jids.slice(0, 6);
    const byFun = await c.svc.get("m3")!.clusterList(4, { functions: ["state.*"] });
    assert.deepEqual(byFun.jobs.map((j) => j[0]), applied.slice(-4), "the newest 4 state.apply jobs, from every master");
    assert.equal(byFun.truncated, true, "6 matched: cut at 4");
    const byTarget = await c.svc.get("m1")!.clusterList(10, { targets: ["web*"] });
    assert.deepEqual(byTarget.jobs.map((j) => j[0]), applied, "all 6 matches, fewer than max: not cut");
    assert.equal(byTarget.truncated, undefined);
    // without the filter the newest 10 hold no state.apply job at all (what the runner then filtered to nothing)
    const plainCut = await c.svc.get("m1")!.clusterList(10);
    assert.equal(plainCut.jobs.filter((j) => j[1].fun === "state.apply").length, 0);
    // a filtered page that matches nothing is empty
    const page = c.svc.get("m2")!.localList(undefined, Infinity, 1000, { functions: ["nothing.*"] });
    assert.deepEqual(page.jobs, []);
    // a malformed filter from a peer is refused with a clear error, not answered unfiltered
    const serve = (c.svc.get("m1") as unknown as { serve(m: PeerMessage): Promise<Uint8Array> }).serve({ from: "m3", channel: "raft/placement", payload: cbor.encode({ op: "list", filter: { functions: "state.*" } }) as Uint8Array, request: true });
    await assert.rejects(serve, /list's filter is malformed/);
  } finally {
    for (const s of c.svc.values()) s.close();
    for (const s of c.stores.values()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/**
 * An LMDB environment's files (not lock.mdb: LMDB's reader table, written by every reader, read-only or not):
 * name → sha256, size and mtime.
 */
function storeFiles(envDir: string): Record<string, string> {
  const files = readdirSync(envDir).filter((f) => f !== "lock.mdb");
  assert.ok(files.includes("data.mdb"), files.join(" "));
  return Object.fromEntries(files.map((f) => [f, `${createHash("sha256").update(readFileSync(path.join(envDir, f))).digest("hex")} ${statSync(path.join(envDir, f)).size} ${statSync(path.join(envDir, f)).mtimeMs}`]));
}

test("recover_outbox: a removed master's waiting records, read from its LMDB directory by a live master, reach their owners through its hand-off; a dry run counts them and writes nothing", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-handoff-"));
  const c = cluster(dir);
  // m4 was removed with force while its outbox held a job, one of its returns and a minion's mine record
  const m4 = openStore({ cachedir: path.join(dir, "m4"), brine_lmdb_map_bytes: 64 * 1024 * 1024 });
  try {
    const jid = "20261125120000000077";
    const jobs4 = new JobCache(m4, () => true);
    await jobs4.saveLoad(jid, { jid, fun: "test.ping", tgt: "*" }, ["a", "b"]);
    assert.equal(await jobs4.saveReturn(jid, "a", { return: true, retcode: 0 }, true), true);
    const mine4 = new MinionCache(m4, () => 5_000);
    mine4.track("m4", () => assert.fail("placed: not broadcast"), () => true);
    await mine4.setMine("web9", { "test.ping": true });
    assert.equal(m4.handoff.getCount(), 3);
    // an older master's environment: without the named databases brine added since (eauth tokens, presence)
    await m4.tokens.drop();
    await m4.presence.drop();
    await m4.close();
    const m3 = c.stores.get("m3")!;
    const run = (kwarg: Record<string, unknown>) =>
      recoverRunners["cluster.recover_outbox"]!(
        { cfg: { cluster_id: "c1", cachedir: path.join(dir, "m3"), brine_lmdb_map_bytes: 64 * 1024 * 1024 }, store: m3, cluster: { ring: { route: (dt: string) => (dt === "jobs" ? "jobs" : null) } } } as unknown as RunnerContext,
        [],
        kwarg,
      ) as Promise<Record<string, unknown>>;
    await assert.rejects(run({ path: "relative/dir" }), /an absolute path/);
    await assert.rejects(run({ path: path.join(dir, "nothing-here") }), /no brine LMDB environment at/);
    await assert.rejects(run({ path: path.join(dir, "m3") }), /this master's own LMDB environment/);
    const before = storeFiles(path.join(dir, "m4", "brine-lmdb"));
    const dry = await run({ path: path.join(dir, "m4"), dry_run: true });
    assert.deepEqual(
      [dry.dry_run, dry.jids, dry.job_records, dry.minion_records, dry.minion_records_newer, dry.missing, dry.jobs_route],
      [true, 1, 2, 1, 1, 0, "jobs"],
    );
    assert.deepEqual(storeFiles(path.join(dir, "m4", "brine-lmdb")), before, "the removed master's store is opened read-only: its files are byte for byte what they were");
    assert.equal(m3.loads.get(jid), undefined, "a dry run writes nothing");
    assert.equal(m3.handoff.getCount(), 0);
    const real = await run({ path: path.join(dir, "m4") });
    assert.deepEqual([real.jids, real.job_records, real.minion_records, real.minion_records_newer], [1, 2, 1, 1]);
    assert.match(String(real.note), /to their owners on ring jobs/);
    assert.deepEqual(new MinionCache(m3).mine("web9"), { "test.ping": true }, "the mine record, stamp and all");
    assert.ok(m3.handoff.get("~m/web9") !== undefined, "in m3's outbox: to every master (mine is not routed) by its minion hand-off");
    // m3's job hand-off gives the job to its owners, then drops m3's copy (m3 is not an owner)
    for (let i = 0; i < 3; i++) await c.svc.get("m3")!.round();
    for (const m of ["m1", "m2"]) {
      assert.deepEqual(c.stores.get(m)!.loads.get(jid), { jid, fun: "test.ping", tgt: "*" }, m);
      assert.deepEqual(c.stores.get(m)!.returns.get(`${jid}/a`), { return: true, retcode: 0 }, m);
    }
    assert.equal(m3.loads.get(jid), undefined, "m3 is not an owner: its copy went once both owners had it");
    // again: nothing changes on the owners (loads kept, returns not overwritten)
    const again = await run({ path: path.join(dir, "m4") });
    assert.equal(again.minion_records_newer, 0, "m3 holds the mine record at the same stamp");
    assert.deepEqual(storeFiles(path.join(dir, "m4", "brine-lmdb")), before, "nor does a recovery that adopts the records write to it");
  } finally {
    for (const s of c.svc.values()) s.close();
    for (const s of c.stores.values()) await s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("recover_outbox finds a removed master's LMDB environment from its brine_lmdb_dir or its cachedir (a clustered master's is under brine-node/<id>/), and refuses an ambiguous or empty one", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-recover-"));
  try {
    const env = (d: string) => {
      mkdirSync(d, { recursive: true });
      writeFileSync(path.join(d, "data.mdb"), "");
      return d;
    };
    const own = env(path.join(dir, "a", "brine-node", "m4", "brine-lmdb"));
    assert.equal(envDirOf(own), own, "the environment itself");
    assert.equal(envDirOf(path.join(dir, "a")), own, "a clustered master's cachedir");
    const plain = env(path.join(dir, "b", "brine-lmdb"));
    assert.equal(envDirOf(path.join(dir, "b")), plain, "an unclustered cachedir");
    env(path.join(dir, "a", "brine-node", "m5", "brine-lmdb"));
    assert.throws(() => envDirOf(path.join(dir, "a")), /holds the LMDB environments of several masters: name the removed one's/);
    assert.throws(() => envDirOf(path.join(dir, "c")), /no brine LMDB environment at/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
