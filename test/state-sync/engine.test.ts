/**
 * The state-sync thread's transfers (src/workers/state-sync/engine.ts) against a scripted peer: the engine's
 * port is driven as the main thread drives it, and each of its peer requests is answered by the test, so a peer
 * can send what a real one never would (a traversal path, damaged ranges) and a transfer can be cut midway.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { cbor } from "../../src/shared/cbor.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { StateSyncEngine } from "../../src/workers/state-sync/engine.js";
import { chunkBytesMax, pagePathCharsMax, probeName, STATUS_DIR, STATUS_FILE, type FromEngine, type PeerReport, type RunnerAsk, type ToEngine } from "../../src/workers/state-sync/messages.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { byManifest, byPath, entryFromWire, entryToWire, type ManifestEntry } from "../../src/workers/state-sync/manifest.js";
import { closeKeyDbs, keyStoreFor } from "../../src/lib/pki/key-store.js";
import type { RootDatabase } from "lmdb";
import { dirNamesInMemoryMax, scratchDb } from "../../src/workers/state-sync/manifest-store.js";

const sha = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex");

interface Rig {
  root: string;
  cfg: MasterConfig;
  store: Store;
  engine: StateSyncEngine;
  main: MessagePort;
  requests: { op: string; [k: string]: unknown }[];
  syncFrom(peer: string, channels: string[]): Promise<PeerReport>;
  /** a request from peer "p1" to the engine; its answer, decoded */
  serve(msg: unknown): Promise<any>;
  close(): Promise<void>;
}

/** An engine whose peer "p1" answers with `answer` (throw: the peer's error). */
function rig(answer: (m: { op: string; [k: string]: unknown }) => unknown, extra: Record<string, unknown> = {}): Rig {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-statesync-"));
  const cfg = {
    id: "m1",
    cachedir: path.join(root, "cache"),
    pki_dir: path.join(root, "pki"),
    cluster_pki_dir: path.join(root, "pki"),
    cluster_id: "c",
    brine_lmdb_map_bytes: 64 * 1024 * 1024,
    file_roots: { base: [path.join(root, "srv", "salt")] },
    pillar_roots: { base: [path.join(root, "srv", "pillar")] },
    ...extra,
  } as unknown as MasterConfig;
  mkdirSync(path.join(root, "srv", "salt"), { recursive: true });
  const store = openStore(cfg);
  const { port1, port2 } = new MessageChannel();
  const engine = new StateSyncEngine(cfg, "m1", store, port2, { autoKeys: false });
  const requests: Rig["requests"] = [];
  const calls = new Map<number, (v: unknown) => void>();
  port1.on("message", (m: FromEngine) => {
    if (m.k === "req") {
      const msg = cbor.decode(m.p) as { op: string };
      requests.push(msg);
      Promise.resolve()
        .then(() => answer(msg))
        .then(
          (v) => port1.postMessage({ k: "res", id: m.id, p: cbor.encode(v) as Uint8Array } satisfies ToEngine),
          (e: Error) => port1.postMessage({ k: "err", id: m.id, code: "CLUSTER_PEER_REMOTE", text: e.message } satisfies ToEngine),
        );
    } else if (m.k === "res" || m.k === "err") calls.get(m.id)?.(m.k === "res" ? m.v : new Error(m.text));
  });
  port1.postMessage({ k: "peers", up: ["p1"], known: ["p1"] } satisfies ToEngine);
  let id = 0;
  return {
    root,
    cfg,
    store,
    engine,
    main: port1,
    requests,
    syncFrom: (peer, channels) =>
      new Promise((resolve, reject) => {
        const n = ++id;
        calls.set(n, (v) => (v instanceof Error ? reject(v) : resolve(v as PeerReport)));
        port1.postMessage({ k: "call", id: n, call: { op: "syncFrom", peer, channels } } satisfies ToEngine);
      }),
    serve: (msg) =>
      new Promise((resolve, reject) => {
        const n = ++id;
        calls.set(n, (v) => (v instanceof Error ? reject(v) : resolve(cbor.decode(v as Uint8Array))));
        port1.postMessage({ k: "in", id: n, from: "p1", p: cbor.encode(msg) as Uint8Array, req: true } satisfies ToEngine);
      }),
    close: async () => {
      await engine.close();
      await closeKeyDbs();
      port1.close();
      await store.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The items of a fetch request as ranges: a whole item (its path alone) is all of it from 0. */
function fetchItems(m: Record<string, unknown>): { p: string; off: number; len: number }[] {
  return (m.items as unknown[]).map((it) => (typeof it === "string" ? { p: it, off: 0, len: Number.MAX_SAFE_INTEGER } : (it as { p: string; off: number; len: number })));
}

/** A peer serving `files` (item path → content) on one channel, with an optional hook on each fetch. */
function servePeer(files: Record<string, Buffer>, onGet?: (p: string, off: number, len: number, data: Buffer) => Buffer | undefined) {
  const entries: ManifestEntry[] = Object.entries(files).map(([p, b]) => ({ p, s: b.length, h: sha(b), m: 0o644, t: 1000 }));
  return (m: { op: string; [k: string]: unknown }) => {
    if (m.op === "manifest") return { entries, more: false };
    if (m.op === "get") {
      const items = fetchItems(m);
      return {
        pieces: items.map((it) => {
          const whole = files[it.p]!;
          let data = whole.subarray(it.off, it.off + it.len);
          const swapped = onGet?.(it.p, it.off, it.len, data);
          if (swapped) data = swapped;
          return { p: it.p, off: it.off, data, ph: sha(whole.subarray(it.off, it.off + it.len)) };
        }),
      };
    }
    throw new Error(`unexpected ${m.op}`);
  };
}

test("a peer's manifest naming paths outside the roots is refused item by item and logged in the report; the good items are installed", async () => {
  const good = Buffer.from("top: ok\n");
  const evil = Buffer.from("pwned\n");
  const entries = [
    { p: "base/top.sls", s: good.length, h: sha(good), m: 0o644, t: 1 },
    { p: "base/../../../outside.txt", s: evil.length, h: sha(evil), m: 0o644, t: 1 },
    { p: "/etc/evil", s: evil.length, h: sha(evil), m: 0o644, t: 1 },
    { p: "base/a\0b", s: evil.length, h: sha(evil), m: 0o644, t: 1 },
    { p: "base/x", s: -5, h: "nothex", m: 0o644, t: 1 },
  ];
  const r = rig((m) => {
    if (m.op === "manifest") return { entries, more: false };
    return { pieces: fetchItems(m).map((it) => ({ p: it.p, off: 0, data: it.p === "base/top.sls" ? good : evil, ph: sha(it.p === "base/top.sls" ? good : evil) })) };
  });
  try {
    const rep = await r.syncFrom("p1", ["file_roots"]);
    assert.equal(rep.items, 1);
    assert.equal(rep.failed, undefined, "refused items do not fail the transfer");
    assert.equal(rep.errors.length, 4, JSON.stringify(rep.errors));
    assert.match(rep.errors.join("\n"), /'\.\.' segment/);
    assert.match(rep.errors.join("\n"), /absolute/);
    assert.match(rep.errors.join("\n"), /NUL/);
    assert.match(rep.errors.join("\n"), /malformed entry/);
    assert.equal(readFileSync(path.join(r.root, "srv", "salt", "top.sls"), "utf8"), "top: ok\n");
    assert.ok(!existsSync(path.join(r.root, "outside.txt")) && !existsSync(path.join(path.dirname(r.root), "outside.txt")));
    const fetched = r.requests.filter((q) => q.op === "get").flatMap((q) => fetchItems(q).map((i) => i.p));
    assert.deepEqual(fetched, ["base/top.sls"], "nothing refused is even fetched");
    const status = JSON.parse(readFileSync(path.join(r.cfg.cachedir, STATUS_DIR, STATUS_FILE), "utf8"));
    assert.equal(status.file_roots.p1.items, 1);
    assert.equal(status.file_roots.p1.errors, 4);
  } finally {
    await r.close();
  }
});

test("an item whose directory here is a symlink leading out of the root is not installed through it", async () => {
  const body = Buffer.from("x: 1\n");
  const r = rig(servePeer({ "base/linked/x.sls": body }));
  const outside = path.join(r.root, "outside");
  mkdirSync(outside);
  symlinkSync(outside, path.join(r.root, "srv", "salt", "linked"));
  try {
    const rep = await r.syncFrom("p1", ["file_roots"]);
    assert.equal(rep.items, 0);
    assert.match(rep.errors.join("\n"), /symlink/);
    assert.deepEqual(readdirSync(outside), []);
  } finally {
    await r.close();
  }
});

test("a range that arrives damaged is fetched again, and the file is installed only with the manifest's hash", async () => {
  const big = Buffer.alloc(chunkBytesMax * 2 + 123, 7);
  let damaged = 0;
  const r = rig(servePeer({ "base/big.bin": big }, (_p, off, _len, data) => {
    if (off === chunkBytesMax && damaged++ === 0) return Buffer.alloc(data.length, 9);
    return undefined;
  }));
  try {
    const rep = await r.syncFrom("p1", ["file_roots"]);
    assert.deepEqual(rep.errors, []);
    assert.equal(rep.items, 1);
    assert.equal(damaged, 2, "the damaged range was asked for again");
    assert.equal(sha(readFileSync(path.join(r.root, "srv", "salt", "big.bin"))), sha(big));
  } finally {
    await r.close();
  }
});

test("a file whose bytes never match the manifest's hash is not installed, and no partial file is left", async () => {
  const big = Buffer.alloc(chunkBytesMax + 10, 1);
  const r = rig((m) => {
    if (m.op === "manifest") return { entries: [{ p: "base/big.bin", s: big.length, h: sha(Buffer.from("something else")), m: 0o644, t: 1 }], more: false };
    const it = fetchItems(m)[0]!;
    const data = big.subarray(it.off, it.off + it.len);
    return { pieces: [{ p: it.p, off: it.off, data, ph: sha(data) }] };
  });
  try {
    const rep = await r.syncFrom("p1", ["file_roots"]);
    assert.equal(rep.items, 0);
    assert.match(rep.errors.join("\n"), /does not match the manifest/);
    assert.deepEqual(readdirSync(path.join(r.root, "srv", "salt")), []);
  } finally {
    await r.close();
  }
});

test("a transfer cut off midway resumes from its partial file: only the missing ranges are fetched", async () => {
  const big = Buffer.alloc(chunkBytesMax * 6, 0);
  for (let i = 0; i < big.length; i += 4096) big[i] = i % 251;
  let cut = true;
  const r = rig(servePeer({ "base/big.bin": big }, (_p, off) => {
    if (cut && off >= chunkBytesMax * 3) throw new Error("peer went away");
    return undefined;
  }));
  try {
    const first = await r.syncFrom("p1", ["file_roots"]);
    assert.equal(first.items, 0);
    assert.match(first.errors.join("\n"), /peer went away/);
    assert.deepEqual(first.failed, ["file_roots"], "a transfer the peer broke off is reported failed");
    cut = false;
    r.requests.length = 0;
    const second = await r.syncFrom("p1", ["file_roots"]);
    assert.deepEqual(second.errors, []);
    assert.equal(second.items, 1);
    const offsets = r.requests.filter((q) => q.op === "get").map((q) => fetchItems(q)[0]!.off);
    assert.deepEqual(offsets, [chunkBytesMax * 3, chunkBytesMax * 4, chunkBytesMax * 5]);
    assert.equal(second.bytes, chunkBytesMax * 3);
    assert.equal(sha(readFileSync(path.join(r.root, "srv", "salt", "big.bin"))), sha(big));
  } finally {
    await r.close();
  }
});

test("a key a peer tombstoned after ours is removed here, and a key file that is not an RSA public key is never installed", async () => {
  const { publicKey } = generateKeyPairSync("rsa", { modulusLength: 1024, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs8", format: "pem" } });
  const pem = Buffer.from(publicKey);
  const junk = Buffer.from("not a key\n");
  const r = rig((m) => {
    if (m.op === "manifest") {
      return {
        entries: [
          { p: "pending/old", s: 0, h: "", m: 0, t: Date.now() + 60_000, d: 1 },
          { p: "accepted/new", s: pem.length, h: sha(pem), m: 0o644, t: 5 },
          { p: "accepted/junk", s: junk.length, h: sha(junk), m: 0o644, t: 5 },
        ],
        more: false,
      };
    }
    return { pieces: fetchItems(m).map((it) => ({ p: it.p, off: 0, data: it.p === "accepted/new" ? pem : junk, ph: sha(it.p === "accepted/new" ? pem : junk) })) };
  });
  const pki = path.join(r.root, "pki");
  mkdirSync(path.join(pki, "minions_pre"), { recursive: true });
  writeFileSync(path.join(pki, "minions_pre", "old"), pem);
  try {
    const rep = await r.syncFrom("p1", ["keys"]);
    assert.equal(rep.deleted, 1);
    assert.equal(rep.items, 1);
    assert.match(rep.errors.join("\n"), /accepted\/junk: not an RSA public key/);
    assert.ok(!existsSync(path.join(pki, "minions_pre", "old")));
    assert.equal(readFileSync(path.join(pki, "minions", "new"), "utf8"), publicKey);
    assert.ok(!existsSync(path.join(pki, "minions", "junk")));
  } finally {
    await r.close();
  }
});

test("keys are not pulled from a peer that sees the same key directory (the probe it wrote is readable here): nothing is installed or removed", async () => {
  const { publicKey } = generateKeyPairSync("rsa", { modulusLength: 1024, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs8", format: "pem" } });
  const pem = Buffer.from(publicKey);
  let pki = "";
  const r = rig((m) => {
    if (m.op !== "manifest") throw new Error("nothing should be fetched");
    // the peer writes its probe into the directory it serves keys from: here, the same one
    writeFileSync(path.join(pki, probeName("p1", "m1", "keys")), "token-1");
    return { entries: [{ p: "pending/k", s: 0, h: "", m: 0, t: Date.now() + 60_000, d: 1 }, { p: "accepted/other", s: pem.length, h: sha(pem), m: 0o644, t: 5 }], more: false, probe: "token-1" };
  });
  pki = path.join(r.root, "pki");
  mkdirSync(path.join(pki, "minions_pre"), { recursive: true });
  writeFileSync(path.join(pki, "minions_pre", "k"), pem);
  try {
    const rep = await r.syncFrom("p1", ["keys"]);
    assert.deepEqual(rep.shared, ["keys"]);
    assert.equal(rep.items + rep.deleted, 0);
    assert.ok(existsSync(path.join(pki, "minions_pre", "k")));
  } finally {
    await r.close();
  }
});

test("with keys.cache_driver mmap_key, keys are served from and installed into the indexed key store, not the directories", async () => {
  const pub = () => generateKeyPairSync("rsa", { modulusLength: 1024, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs8", format: "pem" } }).publicKey;
  const theirs = Buffer.from(generateKeyPairSync("rsa", { modulusLength: 1024, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs8", format: "pem" } }).publicKey);
  const r = rig((m) => {
    if (m.op === "manifest") return { entries: [{ p: "pending/old", s: 0, h: "", m: 0, t: Date.now() + 60_000, d: 1 }, { p: "accepted/theirs", s: theirs.length, h: sha(theirs), m: 0o644, t: 5 }], more: false };
    return { pieces: [{ p: "accepted/theirs", off: 0, data: theirs, ph: sha(theirs) }] };
  }, { "keys.cache_driver": "mmap_key" });
  const keys = keyStoreFor(r.cfg);
  keys.write("pending", "old", pub());
  keys.write("accepted", "ours", pub());
  try {
    const rep = await r.syncFrom("p1", ["keys"]);
    assert.deepEqual(rep.errors, []);
    assert.equal(rep.items, 1);
    assert.equal(rep.deleted, 1);
    assert.equal(keys.read("accepted", "theirs"), theirs.toString());
    assert.equal(keys.exists("pending", "old"), false);
    assert.ok(!existsSync(path.join(r.root, "pki", "minions", "theirs")), "no key file written");
    const served = await r.serve({ op: "manifest", ch: "keys", n: 100 });
    const entries = (served.entries as unknown[]).map(entryFromWire) as ManifestEntry[];
    const live = entries.filter((e) => !e.d).map((e) => e.p);
    assert.deepEqual(live, ["accepted/ours", "accepted/theirs"]);
    const ours = entries.find((e) => e.p === "accepted/ours")!;
    const got = await r.serve({ op: "get", ch: "keys", items: [{ p: "accepted/ours", h: ours.h, off: 0, len: ours.s }] });
    assert.equal(Buffer.from(got.pieces[0].data).toString(), keys.read("accepted", "ours"));
  } finally {
    await r.close();
  }
});

test("small items are fetched whole by path alone, answered in order without path, offsets or a hash per piece (the puller checks the manifest's hash), and a whole item that does not fit what is left of a reply is refused, not cut", async () => {
  const r = rig(() => ({}));
  const dir = path.join(r.root, "srv", "salt");
  writeFileSync(path.join(dir, "a.sls"), "a: 1\n");
  writeFileSync(path.join(dir, "big.sls"), Buffer.alloc(chunkBytesMax, 7));
  try {
    const served = await r.serve({ op: "manifest", ch: "file_roots", n: 100, w: 2 });
    const e = (p: string) => ((served.entries as unknown[]).map(entryFromWire) as ManifestEntry[]).find((x) => x.p === p)!;
    assert.ok(served.entries[0].h instanceof Uint8Array && served.entries[0].h.byteLength === 32, "a page carries each hash as its 32 bytes");
    assert.equal(served.w, 2, "and says it is in the compact form");
    const older = await r.serve({ op: "manifest", ch: "file_roots", n: 100 });
    assert.ok(typeof older.entries[0].h === "string" && older.w === undefined, "a master of an earlier version, which does not ask for it, gets hex");
    const got = await r.serve({ op: "get", ch: "file_roots", items: ["base/a.sls", "base/big.sls"] });
    assert.deepEqual(Object.keys(got.pieces[0]), ["data"], "a whole piece: its bytes only, in the request's order");
    assert.equal(Buffer.from(got.pieces[0].data).toString(), "a: 1\n");
    assert.match(got.pieces[1].error, /more than one reply carries/, "what is left of the reply cannot hold it");
    assert.equal(got.pieces[1].data, undefined);
    const alone = await r.serve({ op: "get", ch: "file_roots", items: ["base/big.sls"] });
    assert.equal(alone.pieces[0].data.byteLength, chunkBytesMax, "alone it fits exactly");
    const ranged = await r.serve({ op: "get", ch: "file_roots", items: [{ p: "base/big.sls", h: e("base/big.sls").h, off: 10, len: 20 }] });
    assert.deepEqual([ranged.pieces[0].off, ranged.pieces[0].data.byteLength, ranged.pieces[0].ph], [10, 20, sha(Buffer.alloc(20, 7))], "a range keeps its offset and hash");
  } finally {
    await r.close();
  }
});

test("a peer that answers pages in the compact form is asked for small items by path; one of an earlier version (no w in its pages) by range", async () => {
  const body = Buffer.from("x: 1\n");
  const older = servePeer({ "base/x.sls": body });
  const r = rig(older);
  try {
    assert.equal((await r.syncFrom("p1", ["file_roots"])).items, 1);
    const get = r.requests.find((q) => q.op === "get")!;
    assert.deepEqual(get.items, [{ p: "base/x.sls", h: sha(body), off: 0, len: body.length }], "ranges for an earlier version");
  } finally {
    await r.close();
  }
  const compact = rig((m) => (m.op === "manifest" ? { entries: [entryToWire({ p: "base/x.sls", s: body.length, h: sha(body), m: 0o644, t: 1000 })], more: false, w: 2 } : older(m)));
  try {
    assert.equal((await compact.syncFrom("p1", ["file_roots"])).items, 1);
    assert.deepEqual(compact.requests.find((q) => q.op === "manifest")!.w, 2, "the puller asks for the compact form");
    assert.deepEqual(compact.requests.find((q) => q.op === "get")!.items, ["base/x.sls"], "a path alone for a peer that speaks it");
  } finally {
    await compact.close();
  }
});

test("a job-cache bank is collected record by record: what is missing here is added, what is here is never overwritten, and this master's bank is served in pages", async () => {
  const loads: Record<string, unknown> = {
    "20261125000000000001": { fun: "test.ping", jid: "20261125000000000001", tgt: "*" },
    "20261125000000000002": { fun: "cmd.run", jid: "20261125000000000002", arg: ["uptime"] },
  };
  const enc = (v: unknown) => Buffer.from(cbor.encode(v) as Uint8Array);
  const r = rig((m) => {
    if (m.op === "manifest") return { entries: Object.entries(loads).map(([p, v]) => ({ p, s: enc(v).length, h: sha(enc(v)), m: 0, t: 0 })), more: false };
    return { pieces: fetchItems(m).map((it) => ({ p: it.p, off: 0, data: enc(loads[it.p]), ph: sha(enc(loads[it.p])) })) };
  });
  try {
    await r.store.loads.put("20261125000000000001", { fun: "local.version", jid: "20261125000000000001" });
    const rep = await r.syncFrom("p1", ["bank:jobs/loads"]);
    assert.deepEqual(rep.errors, []);
    assert.equal(rep.items, 1);
    assert.deepEqual(r.store.loads.get("20261125000000000002"), loads["20261125000000000002"]);
    assert.deepEqual(r.store.loads.get("20261125000000000001"), { fun: "local.version", jid: "20261125000000000001" }, "kept");
    const p1 = await r.serve({ op: "manifest", ch: "bank:jobs/loads", n: 1 });
    assert.deepEqual(p1.entries.map((e: ManifestEntry) => e.p), ["20261125000000000001"]);
    assert.equal(p1.more, true);
    const p2 = await r.serve({ op: "manifest", ch: "bank:jobs/loads", after: "20261125000000000001", n: 1 });
    assert.deepEqual(p2.entries.map((e: ManifestEntry) => e.p), ["20261125000000000002"]);
    assert.equal(p2.more, false);
  } finally {
    await r.close();
  }
});

test("a manifest page of long paths ends at pagePathCharsMax characters of paths, not at 1,000 entries, and the next page goes on from its last entry", async () => {
  const r = rig(() => {
    throw new Error("no peer traffic expected");
  });
  const items = 100;
  // each item in a chain of its own: a first segment that tells it apart, 14 more of 250 characters: ~3,770 a path
  const deep = Array.from({ length: 14 }, (_, i) => `${i}`.padEnd(250, "y"));
  try {
    for (let i = 0; i < items; i++) {
      const dir = path.join(r.root, "srv", "salt", `${String(i).padStart(3, "0")}`.padEnd(250, "d"), ...deep);
      mkdirSync(dir, { recursive: true });
      writeFileSync(path.join(dir, "f.sls"), `item ${i}\n`);
    }
    const first = await r.serve({ op: "manifest", ch: "file_roots", n: 1000 });
    const chars = (first.entries as ManifestEntry[]).reduce((n, e) => n + e.p.length, 0);
    assert.equal(first.more, true, `${first.entries.length} entries, ${chars} characters`);
    assert.ok(first.entries.length < items && chars >= pagePathCharsMax && chars - (first.entries as ManifestEntry[]).at(-1)!.p.length < pagePathCharsMax, `${first.entries.length} entries, ${chars} characters`);
    const second = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, after: (first.entries as ManifestEntry[]).at(-1)!.p });
    assert.equal(second.more, false);
    assert.equal(first.entries.length + second.entries.length, items);
  } finally {
    await r.close();
  }
});

test("a root that vanished (unmounted, wiped) is not served as every file deleted; files removed from a root that is there are", async () => {
  const r = rig(() => {
    throw new Error("no peer traffic expected");
  });
  const dir = path.join(r.root, "srv", "salt");
  writeFileSync(path.join(dir, "a.sls"), "a: 1\n");
  writeFileSync(path.join(dir, "b.sls"), "b: 1\n");
  const state = async () => Object.fromEntries(((await r.serve({ op: "manifest", ch: "file_roots", n: 100 })).entries as ManifestEntry[]).map((e) => [e.p, e.d ? "removed" : "live"]));
  try {
    assert.deepEqual(await state(), { "base/a.sls": "live", "base/b.sls": "live" });
    rmSync(dir, { recursive: true });
    assert.deepEqual(await state(), { "base/a.sls": "live", "base/b.sls": "live" });
    mkdirSync(dir);
    writeFileSync(path.join(dir, "a.sls"), "a: 1\n");
    assert.deepEqual(await state(), { "base/a.sls": "live", "base/b.sls": "removed" });
  } finally {
    await r.close();
  }
});

test("many items with the same bytes in one directory, fetched by concurrent requests, are each installed (their partial files do not collide)", async () => {
  const same = Buffer.alloc(200 * 1024, 5);
  const files: Record<string, Buffer> = {};
  for (let i = 0; i < 12; i++) files[`base/same/f${i}.sls`] = same;
  const r = rig(servePeer(files));
  try {
    const rep = await r.syncFrom("p1", ["file_roots"]);
    assert.deepEqual(rep.errors, []);
    assert.equal(rep.items, 12);
    assert.deepEqual(readdirSync(path.join(r.root, "srv", "salt", "same")).sort(), Object.keys(files).map((p) => p.slice("base/same/".length)).sort());
  } finally {
    await r.close();
  }
});

test("the status file sums each peer's transfers, and says since when a peer announced keys that are not here until a pull of them succeeds", async () => {
  const { publicKey } = generateKeyPairSync("rsa", { modulusLength: 1024, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs8", format: "pem" } });
  const pem = Buffer.from(publicKey);
  let release: () => void = () => undefined;
  let gate: Promise<void> | undefined;
  const r = rig(async (m) => {
    if (m.op === "manifest") {
      await gate;
      return { entries: [{ p: "accepted/k1", s: pem.length, h: sha(pem), m: 0o644, t: 5 }], more: false };
    }
    return { pieces: fetchItems(m).map((it) => ({ p: it.p, off: 0, data: pem, ph: sha(pem) })) };
  });
  const statusOf = () => JSON.parse(readFileSync(path.join(r.cfg.cachedir, STATUS_DIR, STATUS_FILE), "utf8")).keys.p1;
  const until = async (what: string, ok: () => boolean) => {
    for (let i = 0; i < 100 && !ok(); i++) await new Promise((res) => setTimeout(res, 50));
    assert.ok(ok(), what);
  };
  try {
    await r.syncFrom("p1", ["keys"]);
    let st = statusOf();
    assert.deepEqual([st.items_total, st.bytes_total, st.transfers, st.behind_since], [1, pem.length, 1, undefined]);
    await r.syncFrom("p1", ["keys"]);
    st = statusOf();
    assert.deepEqual([st.items, st.items_total, st.bytes_total, st.transfers], [0, 1, pem.length, 2], "a pull that carried nothing adds a transfer and no bytes");
    // the peer announces a digest this master does not have: behind from now until the pull it starts succeeds
    gate = new Promise<void>((res) => (release = res));
    const before = Date.now();
    r.main.postMessage({ k: "in", id: 1000, from: "p1", p: cbor.encode({ op: "changed", ch: "keys", digest: "a-digest-not-here" }) as Uint8Array, req: false } satisfies ToEngine);
    await until("behind_since is written while the pull waits", () => typeof statusOf().behind_since === "string");
    assert.ok(Date.parse(statusOf().behind_since) >= before - 1000);
    release();
    await until("behind_since is cleared once the pull succeeded", () => statusOf().behind_since === undefined);
    assert.equal(statusOf().transfers, 3);
  } finally {
    release();
    await r.close();
  }
});

test("the thread answers a call (a runner's, relayed by the link) in the port-call style, a failed call with a code and its text", async () => {
  const r = rig(() => ({}));
  try {
    const answer = (call: RunnerAsk["call"], id: number) =>
      new Promise<FromEngine>((resolve) => {
        const on = (m: FromEngine) => {
          if ((m.k === "res" || m.k === "err") && m.id === id) {
            r.main.off("message", on);
            resolve(m);
          }
        };
        r.main.on("message", on);
        r.main.postMessage({ k: "call", id, call } satisfies ToEngine);
      });
    const bad = await answer({ op: "collect", channels: ["no-such-channel"] }, 5);
    assert.deepEqual(bad, { k: "err", id: 5, code: "STATE_SYNC_FAILED", text: 'unknown state-sync channel "no-such-channel"' });
    const ok = await answer({ op: "collect", channels: ["keys"], async: true }, 6);
    assert.deepEqual(ok, { k: "res", id: 6, v: { peers: ["p1"] } });
  } finally {
    await r.close();
  }
});

/** Two engines back to back: `puller`'s peer "p1" is `server` (each request relayed to it as from "p1"), with the requests and reply bytes counted. */
function pair(extraServer: Record<string, unknown> = {}): { server: Rig; puller: Rig; bytes: () => number; close: () => Promise<void> } {
  const server = rig(() => {
    throw new Error("the server asks nothing");
  }, extraServer);
  let bytes = 0;
  const puller = rig(async (m) => {
    bytes += (cbor.encode(m) as Uint8Array).byteLength;
    const reply = await server.serve(m);
    bytes += (cbor.encode(reply) as Uint8Array).byteLength;
    return reply;
  });
  return { server, puller, bytes: () => bytes, close: async () => Promise.all([server.close(), puller.close()]).then(() => undefined) };
}

test("a resync after one file changed among 2,000 walks down a tree of range summaries (the whole, then the one range that differs) and pages the few entries of the one stretch that differs, not the whole manifest", async () => {
  const p = pair();
  try {
    for (let d = 0; d < 20; d++) {
      const dir = path.join(p.server.root, "srv", "salt", `d${String(d).padStart(2, "0")}`);
      mkdirSync(dir, { recursive: true });
      for (let i = 0; i < 100; i++) writeFileSync(path.join(dir, `f${i}.sls`), `file ${d}/${i}\n`);
    }
    const first = await p.puller.syncFrom("p1", ["file_roots"]);
    assert.deepEqual(first.errors, []);
    assert.equal(first.items, 2000);
    // an empty puller's ranges all differ: the whole manifest is paged through the ranges
    assert.equal(p.puller.requests[0]!.r, 1, "the puller says it reads range summaries");
    assert.equal(p.puller.requests[0]!.t, 1, "and trees of them");
    p.puller.requests.length = 0;
    writeFileSync(path.join(p.server.root, "srv", "salt", "d07", "f42.sls"), "changed\n");
    const before = p.bytes();
    const again = await p.puller.syncFrom("p1", ["file_roots"]);
    assert.deepEqual([again.items, again.deleted, again.errors], [1, 0, []]);
    assert.equal(readFileSync(path.join(p.puller.root, "srv", "salt", "d07", "f42.sls"), "utf8"), "changed\n");
    const pages = p.puller.requests.filter((m) => m.op === "manifest");
    // 16 ranges of 125 entries, then the one that differs cut into 16 of 8, then the 8 entries of the one that differs
    assert.deepEqual(pages.map((m) => [m.sub, m.c]), [[undefined, undefined], [1, 125], [undefined, undefined]], "the summary, one range's summary, one page");
    const within = (m: Record<string, unknown>) => (m.from as string) <= "base/d07/f42.sls" && (m.to === undefined || "base/d07/f42.sls" < (m.to as string));
    assert.ok(within(pages[1]!) && within(pages[2]!), "both stretches hold the changed file");
    // 2,000 entries would be ~150 KiB; two summaries of 16 ranges and one page of 8 entries are a few KiB
    assert.ok(p.bytes() - before < 5 * 1024, `resync bytes ${p.bytes() - before}`);
    // nothing changed: the digests match, one short request
    p.puller.requests.length = 0;
    const none = await p.puller.syncFrom("p1", ["file_roots"]);
    assert.deepEqual([none.items, p.puller.requests.length], [0, 1]);
  } finally {
    await p.close();
  }
});

test("a puller of an earlier version gets what it reads from a server with many items: pages without r, the flat summary (ranges of at least 32) with r alone; a tree's top with t", async () => {
  const r = rig(() => {
    throw new Error("no peer traffic expected");
  });
  try {
    for (let i = 0; i < 600; i++) writeFileSync(path.join(r.root, "srv", "salt", `f${String(i).padStart(4, "0")}.sls`), `x${i}`);
    const old = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, w: 2 });
    assert.equal(old.sum, undefined);
    assert.equal(old.entries.length, 600);
    const now = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, w: 2, r: 1 });
    assert.equal(old.entries.length, 600);
    assert.ok(Array.isArray(now.sum) && now.sum.length === Math.ceil(600 / 32), "the new form: a summary of ranges of 32");
    const range = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, w: 2, from: now.sum[1][0], to: now.sum[2][0] });
    assert.deepEqual(range.entries.map((e: { p: string }) => e.p), Array.from({ length: 32 }, (_, i) => `base/f${String(32 + i).padStart(4, "0")}.sls`));
    const tree = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, w: 2, r: 1, t: 1 });
    assert.deepEqual(tree.sum.map((x: unknown[]) => x[2]), [...Array(15).fill(38), 600 - 15 * 38], "a tree's top: 16 ranges with their counts");
    const sub = await r.serve({ op: "manifest", ch: "file_roots", n: 0, sub: 1, from: tree.sum[1][0], to: tree.sum[2][0], c: 38 });
    assert.deepEqual(sub.sum.map((x: unknown[]) => [x[0], x[2]]), Array.from({ length: 13 }, (_, i) => [`base/f${String(38 + 3 * i).padStart(4, "0")}.sls`, i < 12 ? 3 : 2]), "a stretch's summary: its 38 entries cut for 16");
  } finally {
    await r.close();
  }
});

test("a rescan walks several roots of a saltenv in the manifest's order (a directory after the files that sort before its slash), the first root winning a path both have", async () => {
  const r = rig(() => {
    throw new Error("no peer traffic expected");
  }, {});
  const second = path.join(r.root, "srv", "salt2");
  r.cfg.file_roots = { base: [path.join(r.root, "srv", "salt"), second], dev: [path.join(r.root, "srv", "dev")] } as never;
  const put = (dir: string, rel: string, text: string) => {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), text);
  };
  const first = path.join(r.root, "srv", "salt");
  put(first, "nginx/init.sls", "one");
  put(first, "nginx.sls", "one");
  put(second, "nginx.sls", "two");
  put(second, "nginx-extra.sls", "two");
  put(second, "nginx/conf.sls", "two");
  put(path.join(r.root, "srv", "dev"), "top.sls", "dev");
  try {
    const pg = await r.serve({ op: "manifest", ch: "file_roots", n: 100 });
    const got = (pg.entries as ManifestEntry[]).map((e) => e.p);
    assert.deepEqual(got, ["base/nginx-extra.sls", "base/nginx.sls", "base/nginx/conf.sls", "base/nginx/init.sls", "dev/top.sls"]);
    assert.equal((pg.entries as ManifestEntry[])[1]!.h, sha("one"), "the first root's nginx.sls");
    // a second scan of unchanged roots writes nothing: the same entries, the same stamps
    const again = await r.serve({ op: "manifest", ch: "file_roots", n: 100 });
    assert.deepEqual(again.entries, pg.entries);
  } finally {
    await r.close();
  }
});

test("a manifest kept by an earlier version (a CBOR file) is imported once, its tombstones served, and the file removed", async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-statesync-legacy-"));
  const legacy = path.join(root, "cache", STATUS_DIR, "m1", "manifest-file_roots.cbor");
  mkdirSync(path.dirname(legacy), { recursive: true });
  writeFileSync(legacy, cbor.encode([{ e: { p: "base/gone.sls", s: 0, h: "", m: 0, t: Date.now() - 1000, d: 1 } }]) as Uint8Array);
  const r = rig(() => {
    throw new Error("no peer traffic expected");
  }, { cachedir: path.join(root, "cache") });
  try {
    const pg = await r.serve({ op: "manifest", ch: "file_roots", n: 100 });
    assert.deepEqual((pg.entries as ManifestEntry[]).map((e) => [e.p, e.d]), [["base/gone.sls", 1]]);
    assert.equal(existsSync(legacy), false);
  } finally {
    await r.close();
    rmSync(root, { recursive: true, force: true });
  }
});

test("a directory with more names than a scan sorts in memory is walked through the scratch database in the manifest's order, every item once, and the scratch left empty", async () => {
  const r = rig(() => {
    throw new Error("no peer request expected");
  });
  try {
    const dir = path.join(r.root, "srv", "salt", "big");
    mkdirSync(path.join(dir, "a"), { recursive: true });
    writeFileSync(path.join(dir, "a", "x"), "x");
    // names whose order differs between JavaScript's sort and the manifest's (code points: an astral character
    // sorts above U+E000-U+FFFF), and siblings of directory `a` that sort around `a/`
    const names = ["a-b", "a.b", "a0", "\u{1F600}", "\uE000", "\uFFFD"];
    for (let i = 0; names.length < dirNamesInMemoryMax + 400; i++) names.push(`k${i}`);
    for (const n of names) writeFileSync(path.join(dir, n), n);
    const expected = [...names.map((n) => `base/big/${n}`), "base/big/a/x"].sort(byPath);
    const all = async () => {
      const got: { p: string; d?: unknown }[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await r.serve({ op: "manifest", ch: "file_roots", n: 1000, ...(after !== undefined ? { after } : {}) });
        got.push(...(page.entries as { p: string; d?: unknown }[]));
        if (!page.more) return got;
        after = got.at(-1)!.p;
      }
    };
    const got = await all();
    assert.deepEqual(got.map((e) => e.p), expected);
    const scratch = scratchDb((r.engine as unknown as { manifests: RootDatabase }).manifests);
    assert.deepEqual([...scratch.getKeys()], [], "the scratch database is empty after the scan");
    // a rescan merges the walk with the kept manifest: one file removed is one tombstone, nothing else changes
    rmSync(path.join(dir, "k5"));
    const again = await all();
    assert.deepEqual(again.map((e) => e.p), expected);
    assert.deepEqual(again.filter((e) => e.d).map((e) => e.p), ["base/big/k5"]);
  } finally {
    await r.close();
  }
});

test("items whose paths are longer than an LMDB key (3,000 bytes, nested directories) are carried to a peer in the manifest's order, and their removal travels as a tombstone", async () => {
  const a = rig(() => {
    throw new Error("the server asks nothing");
  });
  const b = rig((m) => a.serve(m));
  try {
    // 15 directories of 200 characters: item paths of about 3,000 bytes (PATH_MAX is 4,096, NAME_MAX 255)
    const deep = Array.from({ length: 15 }, (_, i) => `${String.fromCharCode(97 + i)}${"d".repeat(199)}`);
    const other = [...deep.slice(0, 14), `n${"e".repeat(199)}`];
    const files: Record<string, string> = {
      "short.sls": "short\n",
      [[...deep, "b.sls"].join("/")]: "long b\n", // b and a share more than 1,940 bytes: ordered by their keys' hash
      [[...deep, "a.sls"].join("/")]: "long a\n",
      [[...deep, "c", "z.sls"].join("/")]: "long c/z\n",
      [[...other, "x.sls"].join("/")]: "long other\n",
    };
    for (const [rel, body] of Object.entries(files)) {
      const full = path.join(a.root, "srv", "salt", rel);
      mkdirSync(path.dirname(full), { recursive: true });
      writeFileSync(full, body);
    }
    const longest = Math.max(...Object.keys(files).map((p) => Buffer.byteLength(`base/${p}`)));
    assert.ok(longest > 2900 && longest < 4096, `longest item path ${longest} bytes`);
    const rep = await b.syncFrom("p1", ["file_roots"]);
    assert.deepEqual(rep.errors, []);
    assert.equal(rep.items, 5);
    for (const [rel, body] of Object.entries(files)) assert.equal(readFileSync(path.join(b.root, "srv", "salt", rel), "utf8"), body, rel);
    // both manifests list the same paths, in the manifest's order (keys' order), and a rescan keeps every item live
    const pathsOf = async (r: Rig) => ((await r.serve({ op: "manifest", ch: "file_roots", n: 1000 })).entries as { p: string; d?: unknown }[]);
    const pa = await pathsOf(a);
    const pb = await pathsOf(b);
    assert.deepEqual(pb.map((e) => e.p), pa.map((e) => e.p));
    assert.deepEqual(pa.map((e) => e.p), Object.keys(files).map((p) => `base/${p}`).sort(byManifest));
    assert.ok(pa.every((e) => !e.d) && pb.every((e) => !e.d), "no tombstone after the rescans");
    // one long item removed at the source: the puller removes it too, the others stay
    rmSync(path.join(a.root, "srv", "salt", ...deep, "a.sls"));
    const again = await b.syncFrom("p1", ["file_roots"]);
    assert.deepEqual(again.errors, []);
    assert.equal(again.deleted, 1);
    assert.ok(!existsSync(path.join(b.root, "srv", "salt", ...deep, "a.sls")));
    assert.equal(readFileSync(path.join(b.root, "srv", "salt", ...deep, "b.sls"), "utf8"), "long b\n");
  } finally {
    await b.close();
    await a.close();
  }
});
