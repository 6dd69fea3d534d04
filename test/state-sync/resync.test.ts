/**
 * Two state-sync engines (src/workers/state-sync/engine.ts), a server and a puller, their peer messages relayed as
 * the main thread relays them (CBOR bytes both ways) and counted: what a pull reports, and what a resync sends.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { cbor } from "../../src/shared/cbor.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { closeKeyDbs } from "../../src/lib/pki/key-store.js";
import { StateSyncEngine } from "../../src/workers/state-sync/engine.js";
import { stateSyncCfg } from "../helpers/state-sync-pair.js";
import { keysTickMs } from "../../src/workers/state-sync/messages.js";
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
  const cfg = stateSyncCfg(id, root);
  mkdirSync(path.join(root, "srv", "salt"), { recursive: true });
  mkdirSync(path.join(root, "pki", "minions"), { recursive: true });
  const store = openStore(cfg);
  const { port1, port2 } = new MessageChannel();
  const engine = new StateSyncEngine(cfg, id, store, port2, { autoKeys });
  return { id, root, cfg, store, engine, port: port1 };
}

/** `puller` pulls from `server`; every request and answer relayed and its payload bytes counted (`hold`: a request's answer waits for it). */
function pair(server: Side, puller: Side, hold?: (m: Record<string, unknown>) => Promise<void> | undefined) {
  const wire = { bytes: 0, requests: [] as Record<string, unknown>[], notes: [] as Record<string, unknown>[] };
  let next = 1;
  const waiting = new Map<number, number>();
  const calls = new Map<number, (m: FromEngine) => void>();
  puller.port.on("message", (m: FromEngine) => {
    if (m.k === "req") {
      const rid = next++;
      waiting.set(rid, m.id);
      wire.bytes += m.p.byteLength;
      const msg = cbor.decode(m.p) as Record<string, unknown>;
      wire.requests.push(msg);
      void Promise.resolve(hold?.(msg)).then(() => server.port.postMessage({ k: "in", id: rid, from: puller.id, p: m.p, req: true } satisfies ToEngine));
    } else if (m.k === "res" || m.k === "err") calls.get(m.id)?.(m);
    else if (m.k === "send") wire.notes.push(cbor.decode(m.p) as Record<string, unknown>);
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

const pub = generateKeyPairSync("rsa", { modulusLength: 2048, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs1", format: "pem" } }).publicKey;

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
    for (let i = 0; i < 1100; i++) {
      const body = `file ${i} `.repeat(30 + (i % 7));
      writeFileSync(path.join(a.root, "srv", "salt", `f${i}.sls`), body);
      content += Buffer.byteLength(body);
    }
    const { syncFrom, wire } = pair(a, b);
    const rep = await syncFrom(["file_roots"]);
    assert.deepEqual(rep.errors, []);
    assert.equal(rep.items, 1100);
    assert.ok(wire.requests.filter((r) => r.op === "get").length >= 4, "the items took several fetch requests");
    assert.equal(rep.bytes, content);
  } finally {
    await close(a, b);
  }
});

test("a resync after one key deleted among 1,000 sends the deletion as one tombstone in a few KiB: two range summaries and one short page", async () => {
  const a = side("a");
  const b = side("b");
  try {
    for (let i = 0; i < 1000; i++) writeFileSync(path.join(a.root, "pki", "minions", `minion-${String(i).padStart(5, "0")}`), pub);
    const { syncFrom, wire } = pair(a, b);
    const first = await syncFrom(["keys"]);
    assert.deepEqual([first.items, first.errors], [1000, []]);
    rmSync(path.join(a.root, "pki", "minions", "minion-00567"));
    wire.bytes = 0;
    wire.requests.length = 0;
    const again = await syncFrom(["keys"]);
    assert.deepEqual([again.items, again.deleted, again.errors], [0, 1, []]);
    assert.equal(existsSync(path.join(b.root, "pki", "minions", "minion-00567")), false);
    // 1,000 entries: 16 ranges of 63, then the one that differs cut into 16 of 4, then its 4 entries
    assert.deepEqual(wire.requests.map((m) => [m.op, m.sub, m.c]), [["manifest", undefined, undefined], ["manifest", 1, 63], ["manifest", undefined, undefined]]);
    assert.ok(wire.bytes < 3 * 1024, `resync bytes ${wire.bytes}`);
    const tomb = b.engine.source("keys").entry("accepted/minion-00567");
    assert.equal(tomb?.d, 1, "the puller keeps the tombstone");
  } finally {
    await close(a, b);
  }
});

test("while a pull installs keys, the key timer neither rescans the directory nor announces; a key an operator adds during the pull is rescanned and announced once the pull ends", async () => {
  const a = side("a");
  const b = side("b", true); // the puller runs its key timer and watchers, as a master does
  try {
    for (let i = 0; i < 300; i++) writeFileSync(path.join(a.root, "pki", "minions", `minion-${String(i).padStart(4, "0")}`), pub);
    const src = b.engine.source("keys");
    const scans: number[] = [];
    const scan = src.scan.bind(src);
    src.scan = () => {
      scans.push(Date.now());
      return scan();
    };
    // the first fetch is answered after two ticks of the timer, and an operator accepts a key here meanwhile
    let released = false;
    let pullStarted = 0;
    let answered = 0;
    const { syncFrom, wire } = pair(a, b, (m) => {
      if (m.op !== "get" || released) return undefined;
      released = true;
      writeFileSync(path.join(b.root, "pki", "minions", "operator-key"), pub);
      return new Promise((r) => setTimeout(r, 2.5 * keysTickMs)).then(() => {
        answered = Date.now();
      });
    });
    // let the timer's first scans and announcement pass before the pull
    await new Promise((r) => setTimeout(r, keysTickMs + 500));
    scans.length = 0;
    wire.notes.length = 0;
    pullStarted = Date.now();
    const rep = await syncFrom(["keys"]);
    const pullEnded = Date.now();
    assert.deepEqual([rep.items, rep.errors], [300, []]);
    assert.ok(answered - pullStarted >= 2 * keysTickMs && answered <= pullEnded, "the pull outlasted two ticks");
    assert.equal(scans.filter((t) => t <= answered).length, 1, "the pull's own scan only, none by the timer while it ran");
    assert.deepEqual(wire.notes.filter((n) => n.ch === "keys"), [], "no digest announced half-way");
    // after the pull: one rescan finds the operator's key and the new digest is announced
    for (let i = 0; i < 40 && src.entry("accepted/operator-key") === undefined; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(src.entry("accepted/operator-key")?.d, undefined);
    assert.ok(src.entry("accepted/operator-key"), "the operator's key is in the manifest");
    for (let i = 0; i < 20 && !wire.notes.some((n) => n.ch === "keys"); i++) await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(wire.notes.filter((n) => n.ch === "keys").map((n) => n.digest), [src.digest()], "the digest with the operator's key, announced once");
  } finally {
    await close(a, b);
  }
});

test("a symlink planted at a small item's partial-file name is replaced, never written through", async () => {
  const a = side("a");
  const b = side("b");
  try {
    writeFileSync(path.join(a.root, "pki", "minions", "minion-1"), pub);
    const outside = path.join(b.root, "outside.txt");
    writeFileSync(outside, "untouched\n");
    const h = createHash("sha256").update(pub).digest("hex");
    const part = path.join(b.root, "pki", "minions", `.brine-part-${createHash("sha256").update(`minion-1\0${h}`).digest("hex").slice(0, 32)}`);
    symlinkSync(outside, part);
    const { syncFrom } = pair(a, b);
    const rep = await syncFrom(["keys"]);
    assert.deepEqual([rep.items, rep.errors], [1, []]);
    assert.equal(readFileSync(outside, "utf8"), "untouched\n");
    assert.equal(readFileSync(path.join(b.root, "pki", "minions", "minion-1"), "utf8"), pub);
    assert.ok(lstatSync(path.join(b.root, "pki", "minions", "minion-1")).isFile());
    assert.equal(existsSync(part), false);
  } finally {
    await close(a, b);
  }
});
