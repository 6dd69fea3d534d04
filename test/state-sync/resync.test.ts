/**
 * Two state-sync engines (src/workers/state-sync/engine.ts), a server and a puller, their peer messages relayed as
 * the main thread relays them (CBOR bytes both ways) and counted: what a pull reports, and what a resync sends.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { cbor } from "../../src/shared/cbor.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { closeKeyDbs } from "../../src/lib/pki/key-store.js";
import { StateSyncEngine } from "../../src/workers/state-sync/engine.js";
import type { FromEngine, PeerReport, ToEngine } from "../../src/workers/state-sync/messages.js";

interface Side {
  id: string;
  root: string;
  cfg: MasterConfig;
  store: Store;
  engine: StateSyncEngine;
  port: MessagePort;
}

function side(id: string, autoKeys = false): Side {
  const root = mkdtempSync(path.join(os.tmpdir(), `brine-resync-${id}-`));
  const cfg = {
    id,
    cachedir: path.join(root, "cache"),
    pki_dir: path.join(root, "pki"),
    cluster_pki_dir: path.join(root, "pki"),
    cluster_id: "resync",
    brine_lmdb_map_bytes: 64 * 1024 * 1024,
    file_roots: { base: [path.join(root, "srv", "salt")] },
    pillar_roots: { base: [path.join(root, "srv", "pillar")] },
  } as unknown as MasterConfig;
  mkdirSync(path.join(root, "srv", "salt"), { recursive: true });
  mkdirSync(path.join(root, "pki", "minions"), { recursive: true });
  const store = openStore(cfg);
  const { port1, port2 } = new MessageChannel();
  const engine = new StateSyncEngine(cfg, id, store, port2, { autoKeys });
  return { id, root, cfg, store, engine, port: port1 };
}

/** `puller` pulls from `server`; every request and answer relayed and its payload bytes counted. */
function pair(server: Side, puller: Side) {
  const wire = { bytes: 0, requests: [] as Record<string, unknown>[] };
  let next = 1;
  const waiting = new Map<number, number>();
  const calls = new Map<number, (m: FromEngine) => void>();
  puller.port.on("message", (m: FromEngine) => {
    if (m.k === "req") {
      const rid = next++;
      waiting.set(rid, m.id);
      wire.bytes += m.p.byteLength;
      wire.requests.push(cbor.decode(m.p) as Record<string, unknown>);
      server.port.postMessage({ k: "in", id: rid, from: puller.id, p: m.p, req: true } satisfies ToEngine);
    } else if (m.k === "res" || m.k === "err") calls.get(m.id)?.(m);
  });
  server.port.on("message", (m: FromEngine) => {
    if (m.k !== "res" && m.k !== "err") return;
    const id = waiting.get(m.id)!;
    waiting.delete(m.id);
    if (m.k === "res") {
      wire.bytes += (m.v as Uint8Array).byteLength;
      puller.port.postMessage({ k: "res", id, p: m.v as Uint8Array } satisfies ToEngine);
    } else puller.port.postMessage({ k: "err", id, code: m.code, text: m.text } satisfies ToEngine);
  });
  server.port.postMessage({ k: "peers", up: [], known: [puller.id] } satisfies ToEngine);
  puller.port.postMessage({ k: "peers", up: [server.id], known: [server.id] } satisfies ToEngine);
  let cid = 0;
  const syncFrom = (channels: string[]) =>
    new Promise<PeerReport>((resolve, reject) => {
      const id = ++cid;
      calls.set(id, (m) => (m.k === "res" ? resolve(m.v as PeerReport) : reject(new Error((m as { text: string }).text))));
      puller.port.postMessage({ k: "call", id, call: { op: "syncFrom", peer: server.id, channels } } satisfies ToEngine);
    });
  return { wire, syncFrom };
}

async function close(...sides: Side[]): Promise<void> {
  for (const s of sides) {
    await s.engine.close();
    s.port.close();
    await s.store.close();
  }
  await closeKeyDbs();
  for (const s of sides) rmSync(s.root, { recursive: true, force: true });
}

test("a pull reports every byte it installed, with several fetch requests in flight at once", async () => {
  const a = side("a");
  const b = side("b");
  try {
    let content = 0;
    for (let i = 0; i < 2000; i++) {
      const body = `file ${i} `.repeat(30 + (i % 7));
      writeFileSync(path.join(a.root, "srv", "salt", `f${i}.sls`), body);
      content += Buffer.byteLength(body);
    }
    const { syncFrom, wire } = pair(a, b);
    const rep = await syncFrom(["file_roots"]);
    assert.deepEqual(rep.errors, []);
    assert.equal(rep.items, 2000);
    assert.ok(wire.requests.filter((r) => r.op === "get").length >= 4, "the items took several fetch requests");
    assert.equal(rep.bytes, content);
  } finally {
    await close(a, b);
  }
});

test("a resync after one key deleted among 3,000 sends the deletion as one tombstone in a few KiB: two range summaries and one short page", async () => {
  const a = side("a");
  const b = side("b");
  try {
    const pub = generateKeyPairSync("rsa", { modulusLength: 2048, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs1", format: "pem" } }).publicKey;
    for (let i = 0; i < 3000; i++) writeFileSync(path.join(a.root, "pki", "minions", `minion-${String(i).padStart(5, "0")}`), pub);
    const { syncFrom, wire } = pair(a, b);
    const first = await syncFrom(["keys"]);
    assert.deepEqual([first.items, first.errors], [3000, []]);
    rmSync(path.join(a.root, "pki", "minions", "minion-01234"));
    wire.bytes = 0;
    wire.requests.length = 0;
    const again = await syncFrom(["keys"]);
    assert.deepEqual([again.items, again.deleted, again.errors], [0, 1, []]);
    assert.equal(existsSync(path.join(b.root, "pki", "minions", "minion-01234")), false);
    // 3,000 entries: 16 ranges of 188, then the one that differs cut into 16 of 12, then its 12 entries
    assert.deepEqual(wire.requests.map((m) => [m.op, m.sub, m.c]), [["manifest", undefined, undefined], ["manifest", 1, 188], ["manifest", undefined, undefined]]);
    assert.ok(wire.bytes < 4 * 1024, `resync bytes ${wire.bytes}`);
    const tomb = b.engine.source("keys").entry("accepted/minion-01234");
    assert.equal(tomb?.d, 1, "the puller keeps the tombstone");
  } finally {
    await close(a, b);
  }
});
