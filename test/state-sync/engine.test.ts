/**
 * The state-sync thread's transfers (src/workers/state-sync/engine.ts) against a scripted peer: the engine's
 * port is driven as the main thread drives it, and each of its peer requests is answered by the test, so a peer
 * can send what a real one never would (a traversal path, damaged ranges) and a transfer can be cut midway.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { cbor } from "../../src/shared/cbor.js";
import { chunkBytesMax, pagePathCharsMax, probeName, STATUS_DIR, STATUS_FILE, type FromEngine, type RunnerAsk, type ToEngine } from "../../src/workers/state-sync/messages.js";
import { entryFromWire, entryToWire, type ManifestEntry } from "../../src/workers/state-sync/manifest.js";
import { keyStoreFor } from "../../src/lib/pki/key-store.js";
import { rig, servePeer, fetchItems, sha } from "../helpers/state-sync-rig.js";

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
