/**
 * The hand-off outbox over real job caches (one LMDB store per master in temp dirs) and an in-process peer
 * channel between three JobPlacement services (src/workers/raft/job-placement.ts), ring "jobs" on m1 and m2
 * with replicas 2:
 * - a job and its returns written on m3 (outside the ring) reach both owners, and m3 then drops its copy;
 * - while one owner cannot be reached, m3 keeps everything (nothing acknowledged to a minion is lost), and
 *   the next round after it is back finishes the hand-off;
 * - an owner that took the return itself keeps its copy and hands it to the other owner;
 * - a master outside the ring learns the table from a host;
 * - cluster-wide reads merge every master's copy, and answer while one master is down.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { JobCache } from "../../src/lib/store/job-cache.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { assignSlots } from "../../src/shared/sab-ring/assign.js";
import { BrineError } from "../../src/shared/errors.js";
import { ownersOf, type PlacementTable } from "../../src/shared/placement.js";
import { JobPlacement } from "../../src/workers/raft/job-placement.js";
import { encodeWire } from "../../src/shared/protocol/msgpack.js";
import type { PeerMessage } from "../../src/workers/raft/peer/peer-types.js";

const a = assignSlots(["m1", "m2"]);
const TABLE: PlacementTable = { ring: "jobs", members: "voters", replicas: 2, voters: a.nodes, nodes: a.nodes, owners: a.owners, epoch: 3 };

type Handler = (m: PeerMessage) => Uint8Array | void | Promise<Uint8Array | void>;

/** Three masters' placement services wired through one in-process channel; `down` cuts a master off. */
function cluster(dir: string) {
  const handlers = new Map<string, Map<string, Handler>>();
  const down = new Set<string>();
  const stores = new Map<string, Store>();
  const svc = new Map<string, JobPlacement>();
  for (const id of ["m1", "m2", "m3"]) {
    const store = openStore({ cachedir: path.join(dir, id), brine_lmdb_map_bytes: 64 * 1024 * 1024 });
    stores.set(id, store);
    handlers.set(id, new Map());
    const channel = {
      on: (ch: string, h: Handler) => {
        handlers.get(id)!.set(ch, h);
        return () => handlers.get(id)!.delete(ch);
      },
      request: async (peer: string, ch: string, payload: Uint8Array) => {
        if (down.has(peer) || down.has(id)) throw new BrineError("CLUSTER_PEER_DOWN", peer);
        const h = handlers.get(peer)?.get(ch);
        if (!h) throw new BrineError("CLUSTER_PEER_UNKNOWN", peer);
        try {
          return (await h({ from: id, channel: ch, payload, request: true })) ?? new Uint8Array(0);
        } catch (e) {
          throw new BrineError("CLUSTER_PEER_REMOTE", (e as Error).message);
        }
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
        localTable: () => (id === "m3" ? undefined : TABLE),
        hosts: () => ["m1", "m2"],
        peers: () => ["m1", "m2", "m3"].filter((x) => x !== id),
        up: (peer) => !down.has(peer),
      }),
    );
  }
  return { stores, svc, down, jobs: (id: string) => new JobCache(stores.get(id)!, () => true), plain: (id: string) => new JobCache(stores.get(id)!) };
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
