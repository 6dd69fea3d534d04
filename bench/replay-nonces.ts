/**
 * What replay protection across restarts and masters adds per request (issue #13: "within a few microseconds"),
 * in the request worker and on a peer's main thread, timed on the real code:
 *
 * - worker: the v3 `ts` window check, remembering the nonce for the batch, packing the batch's nonces and
 *   appending them to the nonce journal (one write per batch), per request, in batches of 64 (a lane's batch
 *   under load) and of 1 (a quiet master: one write per request);
 * - peer: recording a forwarded batch's nonces (64) in its nonce set and its journal, per nonce.
 *
 * The nonce set's own check-and-insert (there before this work) is timed beside them for scale.
 *
 * The nonce owner check (clustered: a request of a minion another master owns waits for that master's word,
 * src/shared/nonce-owner.ts), on the real modules in one thread: the asking worker's client
 * (NonceOwnerClient: ring order, packing, one BroadcastChannel message per batch), the main thread's relay
 * (NonceOwnerService: split by decider, one peer request per decider) and the decider's check-and-insert, over
 * a fake peer channel that answers at once (no network): CPU per request of the three together
 * (process.cpuUsage), and the decider's share alone (NonceJournal.decide, per nonce). A request of a minion this
 * master owns pays one ring lookup (timed too); an unclustered master pays nothing (no client is built).
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { NonceSet, packNonces } from "../src/shared/nonce-set.js";
import { NonceAppender, NonceJournal } from "../src/shared/nonce-journal.js";
import { replayWindowMs, staleTs } from "../src/workers/req-handler/replay-window.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { createRingBuffer, CLUSTER_RING } from "../src/shared/sab-ring/layout.js";
import { RingWriter } from "../src/shared/sab-ring/writer.js";
import { RingReader } from "../src/shared/sab-ring/reader.js";
import { assignSlots } from "../src/shared/sab-ring/assign.js";
import { NONCE_FRESH, nonceOwnerChannelName } from "../src/shared/nonce-owner.js";
import { NonceOwnerClient } from "../src/workers/req-handler/nonce-owner-client.js";
import { NonceOwnerService } from "../src/main-thread/cluster/nonce-owner.js";

const TARGET_US = 3;

function nonces(n: number): string[] {
  return Array.from({ length: n }, () => randomUUID().replace(/-/g, ""));
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const total = opts.full ? 1_000_000 : 200_000;
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-bench-nonces-"));
  const rows: BenchRow[] = [];
  try {
    const set = new NonceSet(1 << 21);
    const journal = new NonceJournal(dir, set, replayWindowMs);
    journal.load();
    const appender = new NonceAppender(dir, set);
    const all = nonces(total);
    const nowS = Date.now() / 1000;

    // baseline: the set's check-and-insert alone
    let t = process.hrtime.bigint();
    for (let i = 0; i < total / 2; i++) set.checkAndInsert(all[i]!);
    const insertUs = Number(process.hrtime.bigint() - t) / 1000 / (total / 2);

    const worker = (from: number, to: number, batch: number): number => {
      const start = process.hrtime.bigint();
      let ok = 0;
      for (let b = from; b < to; b += batch) {
        const fx: string[] = [];
        for (let i = b; i < Math.min(b + batch, to); i++) {
          if (staleTs(nowS, nowS * 1000, 0, 300) === undefined) ok++;
          fx.push(all[i]!);
        }
        appender.append(packNonces(fx));
      }
      if (ok !== to - from) throw new Error("ts check refused a fresh request");
      return Number(process.hrtime.bigint() - start) / 1000 / (to - from);
    };
    const half = total / 2;
    const per64 = worker(half, half + half / 2, 64);
    const per1 = worker(half + half / 2, half + half / 2 + Math.min(20_000, half / 2), 1);

    // a peer: forwarded batches of 64 packed nonces into its set and journal
    const peerSet = new NonceSet(1 << 21);
    const peerDir = path.join(dir, "peer");
    const { mkdirSync } = await import("node:fs");
    mkdirSync(peerDir);
    const peerJournal = new NonceJournal(peerDir, peerSet, replayWindowMs);
    peerJournal.load();
    const batches: Uint8Array[] = [];
    for (let b = 0; b < half; b += 64) batches.push(packNonces(all.slice(b, Math.min(b + 64, half))));
    t = process.hrtime.bigint();
    for (const b of batches) peerJournal.peer(b);
    const peerUs = Number(process.hrtime.bigint() - t) / 1000 / half;

    // the decider's share of an owner check: a peer's ask of 64 nonces into its set and journal, per nonce
    const askBatches: Uint8Array[] = [];
    for (let b = half; b < total; b += 64) askBatches.push(packNonces(all.slice(b, b + 64)));
    t = process.hrtime.bigint();
    let fresh = 0;
    for (const b of askBatches) for (const v of peerJournal.decide(b)) if (v === NONCE_FRESH) fresh++;
    const decideUs = Number(process.hrtime.bigint() - t) / 1000 / (total - half);
    if (fresh !== total - half) throw new Error(`the decider found ${total - half - fresh} fresh nonces seen`);

    // the whole owner check in one thread: worker client → main relay → decider (fake peer channel, no network)
    const owner = await ownerCheck(peerJournal, opts.full ? 200_000 : 40_000);
    journal.close();
    peerJournal.close();

    rows.push({ figure: "nonce check-and-insert (before this work), per request", value: insertUs, unit: "µs", note: "for scale" });
    rows.push({ figure: "added per request in the worker, batches of 64", value: per64, unit: "µs", target: TARGET_US, better: "lower", note: "ts window + journal append per batch" });
    rows.push({ figure: "added per request in the worker, batches of 1", value: per1, unit: "µs", target: TARGET_US, better: "lower", note: "one journal write per request" });
    rows.push({ figure: "peer: a forwarded nonce into set + journal", value: peerUs, unit: "µs", target: TARGET_US, better: "lower", note: "batches of 64" });
    rows.push({ figure: "owner check, decider: a peer's nonce into set + journal", value: decideUs, unit: "µs", target: TARGET_US, better: "lower", note: "asks of 64" });
    rows.push({ figure: "owner check, clustered, a minion this master owns: per request", value: owner.ownedUs, unit: "µs", target: TARGET_US, better: "lower", note: "one ring lookup" });
    rows.push({ figure: "owner check, asker + relay + decider CPU per request, batches of 64", value: owner.per64Us, unit: "µs", target: TARGET_US, better: "lower", note: "one thread, no network" });
    rows.push({ figure: "owner check, asker + relay + decider CPU per request, batches of 1", value: owner.per1Us, unit: "µs", note: "one message and one peer request per request" });
    rows.push({ figure: "owner check, thread hops of one batch of 64 (wall, no network)", value: owner.batchWallMs, unit: "ms", note: "worker → main → decider → back, in one thread" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

/** The owner check's CPU per request over the real client, relay and decider (see the file comment). */
async function ownerCheck(decider: NonceJournal, requests: number): Promise<{ ownedUs: number; per64Us: number; per1Us: number; batchWallMs: number }> {
  const sab = createRingBuffer();
  const writer = RingWriter.attach(sab);
  writer.publishRing(CLUSTER_RING, assignSlots(["m1", "m2", "m3"]), 1);
  const ring = new RingReader(sab);
  const ids = Array.from({ length: 3000 }, (_, i) => `minion-${i}`);
  const theirs = ids.filter((id) => ring.owner(id) !== "m1");
  const mine = ids.filter((id) => ring.owner(id) === "m1");
  const name = nonceOwnerChannelName(`/bench/${process.pid}`, Math.floor(Math.random() * 1e9));
  const channel = {
    request: async (_peer: string, _ch: string, body: Uint8Array) => decider.decide(body),
    isUp: () => true,
    on: () => () => {},
  };
  const service = new NonceOwnerService("m1", channel, (b) => decider.decide(b), 250, name, (id) => ring.replicas(id, 1024));
  const client = new NonceOwnerClient(name, ring, "m1", 250);
  try {
    let t = process.hrtime.bigint();
    let asked = 0;
    for (let i = 0; i < requests; i++) if (client.ask(mine[i % mine.length]!, "00000000000000000000000000000000") !== undefined) asked++;
    const ownedUs = Number(process.hrtime.bigint() - t) / 1000 / requests;
    if (asked !== 0) throw new Error("a request of a minion this master owns asked a decider");
    const round = async (batch: number, n: number): Promise<{ us: number; wallMs: number }> => {
      const pool = nonces(n);
      const before = process.cpuUsage();
      const start = process.hrtime.bigint();
      for (let b = 0; b < n; b += batch) {
        const waits: Promise<number>[] = [];
        for (let i = b; i < Math.min(b + batch, n); i++) waits.push(client.ask(theirs[i % theirs.length]!, pool[i]!)!);
        const v = await Promise.all(waits);
        if (v.some((x) => x !== NONCE_FRESH)) throw new Error("a fresh nonce was not found fresh");
      }
      const cpu = process.cpuUsage(before);
      return { us: (cpu.user + cpu.system) / n, wallMs: Number(process.hrtime.bigint() - start) / 1e6 / Math.ceil(n / batch) };
    };
    await round(64, 6400); // warm-up
    const r64 = await round(64, requests);
    const r1 = await round(1, Math.min(requests, 10_000));
    return { ownedUs, per64Us: r64.us, per1Us: r1.us, batchWallMs: r64.wallMs };
  } finally {
    service.close();
    writer.release();
  }
}
