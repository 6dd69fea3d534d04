/**
 * State-sync transfers (issue 15), two state-sync engines back to back in one process (the peer channel replaced
 * by a relay that counts the bytes each way, so the figures are the protocol's, not the transport's):
 *
 * - a master joining: pulls N keys and F files of roots (1k keys and 500 files / 20 MB; `--full`: 10k keys and
 *   5k files / 200 MB, the join figure) from a peer: seconds, bytes on the wire against the content
 *   (goal ≤ 1.05×), the process's peak RSS growth during the pull (goal: flat, the same at either size);
 * - a resync after one file changed at the source: bytes on the wire (goal: about one file).
 */
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { generateKeyPairSync } from "node:crypto";
import { openStore, type Store } from "../src/lib/store/lmdb-env.js";
import type { MasterConfig } from "../src/shared/config/defaults.js";
import { StateSyncEngine } from "../src/workers/state-sync/engine.js";
import type { FromEngine, PeerReport, ToEngine } from "../src/workers/state-sync/messages.js";
import type { BenchOptions, BenchRow } from "./types.js";

interface Side {
  root: string;
  cfg: MasterConfig;
  store: Store;
  engine: StateSyncEngine;
  port: MessagePort;
}

function side(name: string): Side {
  const root = mkdtempSync(path.join(os.tmpdir(), `brine-bench-statesync-${name}-`));
  const cfg = {
    id: name,
    cachedir: path.join(root, "cache"),
    pki_dir: path.join(root, "pki"),
    cluster_pki_dir: path.join(root, "pki"),
    cluster_id: "bench",
    brine_lmdb_map_bytes: 256 * 1024 * 1024,
    file_roots: { base: [path.join(root, "srv", "salt")] },
    pillar_roots: { base: [path.join(root, "srv", "pillar")] },
  } as unknown as MasterConfig;
  const store = openStore(cfg);
  const { port1, port2 } = new MessageChannel();
  const engine = new StateSyncEngine(cfg, name, store, port2, { autoKeys: false });
  return { root, cfg, store, engine, port: port1 };
}

/** Relays the puller's requests to the server and counts the payload bytes each way. */
function relay(puller: Side, server: Side, counter: { out: number; back: number }): void {
  let next = 1;
  const waiting = new Map<number, number>();
  puller.port.on("message", (m: FromEngine) => {
    if (m.k !== "req") return;
    const rid = next++;
    waiting.set(rid, m.id);
    counter.out += m.p.byteLength;
    server.port.postMessage({ k: "in", id: rid, from: puller.cfg.id, p: m.p, req: true } satisfies ToEngine);
  });
  server.port.on("message", (m: FromEngine) => {
    // the server gets no calls but `in`: every answer is to a relayed request
    if (m.k !== "res" && m.k !== "err") return;
    const id = waiting.get(m.id)!;
    waiting.delete(m.id);
    if (m.k === "res") {
      const p = m.v as Uint8Array;
      counter.back += p.byteLength;
      puller.port.postMessage({ k: "res", id, p } satisfies ToEngine);
    } else puller.port.postMessage({ k: "err", id, code: m.code, text: m.text } satisfies ToEngine);
  });
  for (const s of [puller, server]) s.port.postMessage({ k: "peers", up: [s === puller ? server.cfg.id : puller.cfg.id], known: [s === puller ? server.cfg.id : puller.cfg.id] } satisfies ToEngine);
}

function syncFrom(puller: Side, peer: string, channels: string[]): Promise<PeerReport> {
  return new Promise((resolve, reject) => {
    const on = (m: FromEngine) => {
      if (m.k !== "res" && m.k !== "err") return;
      puller.port.off("message", on);
      if (m.k === "res") resolve(m.v as PeerReport);
      else reject(new Error(m.text));
    };
    puller.port.on("message", on);
    puller.port.postMessage({ k: "call", id: 1, call: { op: "syncFrom", peer, channels } } satisfies ToEngine);
  });
}

async function one(keys: number, files: number, bytes: number): Promise<BenchRow[]> {
  const a = side("a");
  const b = side("b");
  try {
    const pub = generateKeyPairSync("rsa", { modulusLength: 2048, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs1", format: "pem" } }).publicKey;
    const acc = path.join(a.root, "pki", "minions");
    mkdirSync(acc, { recursive: true });
    for (let i = 0; i < keys; i++) writeFileSync(path.join(acc, `m-${String(i).padStart(6, "0")}`), pub);
    const per = Math.floor(bytes / files);
    let content = keys * Buffer.byteLength(pub);
    for (let i = 0; i < files; i++) {
      const dir = path.join(a.root, "srv", "salt", `d${i % 50}`);
      mkdirSync(dir, { recursive: true });
      // each file its own bytes (a hash of its name repeated), so nothing compresses or deduplicates
      const seed = createHash("sha256").update(String(i)).digest();
      const buf = Buffer.alloc(per);
      for (let o = 0; o < per; o += seed.length) seed.copy(buf, o);
      writeFileSync(path.join(dir, `f${i}.sls`), buf);
      content += per;
    }
    const counter = { out: 0, back: 0 };
    relay(b, a, counter);
    global.gc?.();
    const rss0 = process.memoryUsage().rss;
    let peak = rss0;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const t0 = performance.now();
    const rep = await syncFrom(b, "a", ["keys", "file_roots"]);
    const secs = (performance.now() - t0) / 1000;
    clearInterval(sampler);
    if (rep.errors.length || rep.items !== keys + files) throw new Error(`join pull: ${JSON.stringify(rep).slice(0, 300)}`);
    const wire = counter.out + counter.back;
    // one file changed at the source, then the same pull again
    writeFileSync(path.join(a.root, "srv", "salt", "d0", "f0.sls"), Buffer.alloc(per, 1));
    counter.out = counter.back = 0;
    const again = await syncFrom(b, "a", ["keys", "file_roots"]);
    if (again.items !== 1) throw new Error(`resync: ${JSON.stringify(again).slice(0, 300)}`);
    const label = `${keys} keys + ${files} files (${Math.round(content / 2 ** 20)} MiB)`;
    return [
      { figure: `join pull, ${label}`, value: secs, unit: "s", better: "lower" },
      { figure: `bytes on the wire / content, ${label}`, value: wire / content, unit: "×", target: 1.05, better: "lower" },
      { figure: `peak RSS growth during the pull, ${label}`, value: (peak - rss0) / 2 ** 20, unit: "MiB", better: "lower", note: "both engines in one process" },
      { figure: `resync after one ${Math.round(per / 1024)} KiB file changed, ${label}`, value: (counter.out + counter.back) / 1024, unit: "KiB", better: "lower", note: "manifests included" },
    ];
  } finally {
    for (const s of [a, b]) {
      s.engine.close();
      s.port.close();
      await s.store.close();
      rmSync(s.root, { recursive: true, force: true });
    }
  }
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const rows = await one(1000, 500, 20 * 2 ** 20);
  rows.push(...(opts.full ? await one(10_000, 5000, 200 * 2 ** 20) : await one(10_000, 500, 20 * 2 ** 20)));
  return rows;
}
