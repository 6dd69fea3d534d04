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
 */
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomUUID } from "node:crypto";
import { NonceSet, packNonces } from "../src/shared/nonce-set.js";
import { NonceAppender, NonceJournal } from "../src/shared/nonce-journal.js";
import { replayWindowMs, staleTs } from "../src/workers/req-handler/replay-window.js";
import type { BenchOptions, BenchRow } from "./types.js";

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
    for (let b = 0; b < half; b += 64) batches.push(packNonces(all.slice(b, b + 64)));
    t = process.hrtime.bigint();
    for (const b of batches) peerJournal.peer(b);
    const peerUs = Number(process.hrtime.bigint() - t) / 1000 / half;
    journal.close();
    peerJournal.close();

    rows.push({ figure: "nonce check-and-insert (before this work), per request", value: insertUs, unit: "µs", note: "for scale" });
    rows.push({ figure: "added per request in the worker, batches of 64", value: per64, unit: "µs", target: TARGET_US, better: "lower", note: "ts window + journal append per batch" });
    rows.push({ figure: "added per request in the worker, batches of 1", value: per1, unit: "µs", target: TARGET_US, better: "lower", note: "one journal write per request" });
    rows.push({ figure: "peer: a forwarded nonce into set + journal", value: peerUs, unit: "µs", target: TARGET_US, better: "lower", note: "batches of 64" });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
