/**
 * What remove_member says about the hand-off outbox of the master it removes (src/runners/cluster-ops.ts
 * outboxReport, removalLosesHandoff; the outbox's content from src/workers/raft/held-jobs.ts): a removed master
 * hands nothing on, so the records it took and no owner acknowledged are lost with it. Without force a master
 * holding some (job records or minion records) is refused; with force, or when it cannot be asked (down), the
 * removal commits and its answer says what was lost (counts, the jids and minion records by name) or that it is
 * unknown, and why.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { HeldJobsService, outboxNamesMax } from "../../src/workers/raft/held-jobs.js";
import { outboxReport, removalLosesHandoff } from "../../src/runners/cluster-ops.js";
import type { PeerMessage } from "../../src/workers/raft/peer/peer-types.js";

const J1 = "20261126010000000001";
const J2 = "20261126010000000002";

test("a master's answer names what its hand-off outbox holds, jobs and minion records, and remove_member's report says what a forced removal loses", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-removed-outbox-"));
  const handlers = new Map<string, (m: PeerMessage) => Uint8Array | Promise<Uint8Array>>();
  const channel = (self: string) => ({
    on: (ch: string, h: (m: PeerMessage) => Uint8Array | Promise<Uint8Array>) => {
      handlers.set(`${self}/${ch}`, h);
      return () => handlers.delete(`${self}/${ch}`);
    },
    request: async (peer: string, ch: string, payload: Uint8Array) => handlers.get(`${peer}/${ch}`)!({ from: self, channel: ch, payload, request: true }),
  });
  const svc = ["m1", "m4"].map((id) => new HeldJobsService({ cachedir: path.join(dir, id), brine_lmdb_map_bytes: 64 * 1024 * 1024 }, channel(id), 5_000, id, () => ({ skip: "n/a" })));
  try {
    const s4 = svc[1]!.open();
    // m4 took a publish (J1's load), two returns (J1, J2) and two minion writes that no owner acknowledged yet
    for (const [k, stamp] of [[J1, 1], [`${J1}/web1`, 2], [`${J2}/web2`, 3], ["~m/pm-a", 4], ["~d/pm-b", 5]] as const) await s4.handoff.put(k, stamp);
    const held = (await svc[0]!.ask(["m4"], 1)).m4!;
    assert.ok(!("error" in held));
    assert.equal(held.pending, 3, "job records (a load and two returns)");
    assert.deepEqual(held.outbox, { minions: 2, jids: [J1, J2], ids: ["grains/pm-b", "mine/pm-a"] });
    assert.deepEqual(outboxReport("m4", held), { status: "lost", job_records: 3, jids: [J1, J2], minion_records: 2, minion_records_named: ["grains/pm-b", "mine/pm-a"] });
    assert.match(removalLosesHandoff("m4", held.pending, held.outbox!.minions) ?? "", /^m4 holds 3 job record\(s\) and 2 minion record\(s\) \(mine, grains\) in its hand-off outbox .*data_type=mine and grains too.*force=True/);
    // minion records alone refuse a removal too (before, only job records were counted)
    assert.match(removalLosesHandoff("m4", 0, 2) ?? "", /^m4 holds 2 minion record\(s\)/);
    // an emptied outbox: nothing lost
    for (const k of [J1, `${J1}/web1`, `${J2}/web2`, "~m/pm-a", "~d/pm-b"]) await s4.handoff.remove(k);
    const empty = (await svc[0]!.ask(["m4"], 1)).m4!;
    assert.deepEqual(outboxReport("m4", empty), { status: "empty" });
    assert.equal(removalLosesHandoff("m4", 0, 0), undefined);
    // a master that cannot be asked: removed all the same, and the answer says its outbox is unknown, with why
    const down = outboxReport("m4", { error: "down (no peer session)" });
    assert.equal(down.status, "unknown");
    assert.match((down as { reason: string }).reason, /^m4 could not be asked \(down \(no peer session\)\): the records of its hand-off outbox, if any, are lost with it/);
    // names are bounded: a big outbox is counted whole and named in part
    for (let i = 0; i < outboxNamesMax + 20; i++) await s4.handoff.put(`${String(BigInt(J1) + BigInt(i + 10))}/m`, i);
    const big = (await svc[0]!.ask(["m4"], 1)).m4!;
    assert.ok(!("error" in big));
    assert.equal(big.pending, outboxNamesMax + 20);
    assert.equal(big.outbox!.jids.length, outboxNamesMax);
  } finally {
    for (const s of svc) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
