/**
 * A peer master stores a job return only from a return its origin verified (issue #13), and a bulk sync carries
 * the job cache and the replay nonces a master missed.
 *
 * The origin's request handlers run for real (with a stand-in context): a minion event whose tag names another
 * minion's return (the `_minion_event` pretag trick) and a plain event fired with a return's tag are forwarded
 * to the peer's bus but never marked verified, so the peer's job cache does not store them; the victim's real
 * `_return` is stored. (Salt's masters share the job cache through `cachedir`, written by `_return` only.)
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { FakeChannel } from "../helpers/fake-channel.js";
import { AES_FUNCS } from "../../src/workers/req-handler/aes-funcs.js";
import { newEffects, type MasterContext } from "../../src/workers/req-handler/context.js";
import { MetricsBoard } from "../../src/shared/metrics/board.js";
import { packEvent } from "../../src/shared/event-frame.js";
import { ClusterForwarder } from "../../src/main-thread/cluster/forwarding.js";
import { JobRecords } from "../../src/workers/state-sync/job-records.js";
import { SyncStore } from "../../src/workers/state-sync/sync-store.js";
import { encodePull, type SyncCursor } from "../../src/workers/state-sync/sync-store.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { jidToMs } from "../../src/shared/protocol/jid.js";
import type { WireValue } from "../../src/shared/protocol/msgpack.js";
import { lmdbDir } from "../../src/lib/store/lmdb-env.js";
import { NonceSet, packNonces } from "../../src/shared/nonce-set.js";
import { NonceAppender, NonceJournal } from "../../src/shared/nonce-journal.js";
import { replayWindowMs } from "../../src/workers/req-handler/replay-window.js";
import { newNonce } from "../../src/lib/minion/sign-in.js";

function tmpStore(): { dir: string; store: Store; cfg: ReturnType<typeof masterDefaults> } {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-vjr-"));
  const cfg = { ...masterDefaults(), cachedir: dir };
  return { dir, store: openStore(cfg), cfg };
}

const JID = "20261125120000000000";

test("a forged return event on the origin reaches the peer's bus but not its job cache; a real return does", async () => {
  const fx = newEffects();
  // a stand-in for the origin's context: only what the two handlers touch
  const ctx = {
    cfg: { ...masterDefaults(), job_cache: false },
    jobs: { isNocache: () => false },
    fire: (f: typeof fx, tag: string, data: unknown) => f.events.push(packEvent(tag, data)),
    metrics: new MetricsBoard(),
  } as unknown as MasterContext;
  const forged = { return: "forged", retcode: 0, success: true, fun: "test.ping" };
  AES_FUNCS.get("_minion_event")!(ctx, { id: "evil", cmd: "_minion_event", pretag: `salt/job/${JID}/ret`, events: [{ tag: "good", data: forged }] } as Record<string, WireValue>, fx);
  // whatever the minion event filter lets through, an event fired outside the return path is never vouched for
  ctx.fire(fx, `salt/job/${JID}/ret/other`, forged);
  AES_FUNCS.get("_return")!(ctx, { id: "good", cmd: "_return", jid: JID, fun: "test.ping", return: true, retcode: 0, success: true } as Record<string, WireValue>, fx);
  assert.equal(fx.verified.length, 1, "only the return is marked verified");
  assert.match(packEventTag(fx.events[fx.verified[0]!]!), /\/ret\/good$/);

  const aLink = new FakeChannel(["b"]);
  const a = new ClusterForwarder("a", aLink, { events: () => undefined, publishes: () => undefined });
  a.forward(fx.events, fx.verified);
  const onBus: Uint8Array[] = [];
  const mirrored: Uint8Array[] = [];
  const bLink = new FakeChannel(["a"]);
  new ClusterForwarder("b", bLink, { events: (f) => onBus.push(...f), publishes: () => undefined, mirror: (f) => mirrored.push(...f) });
  for (const s of aLink.sent) bLink.handlers.get(s.channel)!({ from: "a", payload: s.payload });
  assert.equal(onBus.length, fx.events.length, "every event reaches the peer's bus");
  assert.equal(mirrored.length, 1, "only the verified return is mirrored");

  const { dir, store, cfg } = tmpStore();
  try {
    const jr = new JobRecords(store, cfg);
    await jr.storeEvents(mirrored);
    assert.deepEqual(Object.keys(jr.jobs.returnsFor(JID)), ["good"]);
    assert.equal(jr.jobs.returnsFor(JID).good!.return, true);
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a batch whose verified list is malformed is refused whole", () => {
  const aLink = new FakeChannel(["b"]);
  const a = new ClusterForwarder("a", aLink, { events: () => undefined, publishes: () => undefined });
  const frame = packEvent(`salt/job/${JID}/ret/m1`, { return: true });
  a.forward([frame], [1]); // an index past the frames
  let got = 0;
  const bLink = new FakeChannel(["a"]);
  const b = new ClusterForwarder("b", bLink, { events: (f) => (got += f.length), publishes: () => undefined, mirror: () => assert.fail("nothing mirrored") });
  for (const s of aLink.sent) bLink.handlers.get(s.channel)!({ from: "a", payload: s.payload });
  assert.equal(got, 0);
  assert.equal(b.counters.refused, 1);
});

test("a bulk sync that asks for the job cache carries jobs and returns from jobsSince on, and storing them twice keeps one copy", async () => {
  const src = tmpStore();
  const dst = tmpStore();
  try {
    const from = new SyncStore(src.cfg, src.store, "m1");
    const to = new SyncStore(dst.cfg, dst.store, "m2");
    const old = "20261125100000000000";
    for (const jid of [old, JID]) {
      await from.jobRecords.jobs.saveLoad(jid, { jid, fun: "test.ping", tgt: "*" }, ["a", "b"]);
      await from.jobRecords.jobs.saveReturn(jid, "a", { return: true }, false);
      await from.jobRecords.jobs.saveReturn(jid, "b", { return: "x".repeat(1000) }, false);
    }
    const pull = async (jobsSince?: number) => {
      let cursor: SyncCursor | null = { bank: "data" };
      let stored = 0;
      while (cursor) {
        const reply = from.serve(encodePull({ cursor, since: 0, ...(jobsSince !== undefined ? { jobsSince } : {}) }));
        const r = await to.applyChunk("m1", reply);
        assert.ok(!("error" in r), JSON.stringify(r));
        cursor = r.next;
        stored += r.n;
      }
      return stored;
    };
    assert.equal(await pull(), 0, "without jobsSince no job record travels");
    assert.equal(await pull(jidToMs(JID) - 1000), 3, "the newer job's load and two returns");
    assert.equal(to.jobRecords.jobs.getLoad(old), undefined, "the job before jobsSince stays behind");
    assert.deepEqual(to.jobRecords.jobs.getLoad(JID)?.Minions, ["a", "b"]);
    assert.deepEqual(Object.keys(to.jobRecords.jobs.returnsFor(JID)).sort(), ["a", "b"]);
    assert.equal(await pull(0), 3, "from the start: the older job too, nothing stored twice");
    assert.equal(to.jobRecords.newestMs(), jidToMs(JID));
  } finally {
    for (const s of [src, dst]) {
      await s.store.close();
      rmSync(s.dir, { recursive: true, force: true });
    }
  }
});

test("a bulk sync that asks for the replay nonces carries what the peer's journal holds, chunk by chunk", async () => {
  const src = tmpStore();
  const dst = tmpStore();
  const journals: NonceJournal[] = [];
  try {
    const [srcSet, dstSet] = [new NonceSet(1 << 16), new NonceSet(1 << 16)];
    for (const [s, set] of [[src, srcSet], [dst, dstSet]] as const) {
      const j = new NonceJournal(lmdbDir(s.cfg), set, replayWindowMs);
      j.load();
      journals.push(j);
    }
    const seen = Array.from({ length: 20_000 }, () => newNonce());
    for (const n of seen) assert.equal(srcSet.checkAndInsert(n), true);
    new NonceAppender(lmdbDir(src.cfg), srcSet).append(packNonces(seen.slice(0, 15_000)));
    journals[0]!.rotate(); // the rest in the next generation's file
    new NonceAppender(lmdbDir(src.cfg), srcSet).append(packNonces(seen.slice(15_000)));
    const from = new SyncStore(src.cfg, src.store, "m1", Date.now, srcSet);
    const to = new SyncStore(dst.cfg, dst.store, "m2", Date.now, dstSet);
    let cursor: SyncCursor | null = { bank: "data" };
    let chunks = 0;
    while (cursor) {
      const r = await to.applyChunk("m1", from.serve(encodePull({ cursor, since: 0, nonces: true })));
      assert.ok(!("error" in r), JSON.stringify(r));
      cursor = r.next;
      chunks++;
    }
    assert.ok(chunks >= 2, `${chunks} chunks`);
    assert.ok(seen.every((n) => !dstSet.checkAndInsert(n)), "every nonce the peer remembers is refused here");
    assert.equal(dstSet.checkAndInsert(newNonce()), true);
  } finally {
    for (const j of journals) j.close();
    for (const s of [src, dst]) {
      await s.store.close();
      rmSync(s.dir, { recursive: true, force: true });
    }
  }
});

function packEventTag(frame: Uint8Array): string {
  const text = Buffer.from(frame).toString("latin1");
  const m = /salt\/job\/[^\n]*?(?=\n\n)/.exec(text);
  return m ? m[0] : "";
}
