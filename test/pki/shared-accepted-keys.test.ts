/**
 * A minion's accepted key held once per master (issue 17): request threads share one KeyTable, so what one thread
 * read answers the others, and every change to a key (rotated, deleted, rejected) reaches every thread as it
 * reached the thread that read it before. Two caches over one table stand for two threads (each with its own
 * KeyStore and directory stamp, as each thread has); the last test uses a real worker thread.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtempSync, renameSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import { Worker } from "node:worker_threads";
import { AcceptedKeyCache, KeyStore } from "../../src/lib/pki/key-store.js";
import { KeyTable } from "../../src/shared/key-table.js";
import { cleanKey } from "../../src/shared/protocol/pem.js";

/** a key file's text, as long as a 2,048-bit key's (a record keeps a tok as long as the key's modulus) */
const PUB = (n: string) => `-----BEGIN PUBLIC KEY-----\n${n}${"A".repeat(400)}\n-----END PUBLIC KEY-----\n`;

function otherProcess(code: string): void {
  execFileSync(process.execPath, ["-e", code]);
}

/** A key directory settled a minute ago (the stamps vouch for it), and `threads` caches over one table. */
function setup(threads: number, opts: { minions?: number; now?: () => number } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sak-"));
  new KeyStore(dir).ensureDirs();
  const sab = KeyTable.create(opts.minions ?? 64);
  const warnings: string[] = [];
  const caches = Array.from({ length: threads }, () => new AcceptedKeyCache(new KeyStore(dir), 1000, 16, opts.now ?? Date.now, undefined, new KeyTable(sab), (l) => warnings.push(l)));
  const acceptedDir = path.join(dir, "minions");
  // the directory's mtime set to `ageS` before the test's start: the same age gives the same mtime (as if unchanged)
  const start = Date.now();
  const settle = (ageS = 60) => {
    const past = (start - ageS * 1000) / 1000;
    utimesSync(acceptedDir, past, past);
  };
  return { dir, acceptedDir, caches, warnings, settle, file: (id: string) => path.join(acceptedDir, id), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

test("a key one thread read answers another thread from the table, without that thread reading the file", () => {
  let now = Date.now();
  const s = setup(2, { now: () => now });
  try {
    writeFileSync(s.file("m1"), PUB("one"));
    s.settle();
    const [a, b] = s.caches;
    const ka = a!.get("m1")!;
    assert.equal(ka.pem, cleanKey(PUB("one")));
    // an in-place rewrite leaves the directory's mtime alone: a thread that read the file now would see "two"
    otherProcess(`require("fs").writeFileSync(${JSON.stringify(s.file("m1"))}, ${JSON.stringify(PUB("two"))})`);
    s.settle();
    now += 100;
    const kb = b!.get("m1")!;
    assert.equal(kb.pem, cleanKey(PUB("one")), "b answered from a's read (the shared record), not from the file");
    assert.equal(kb.tag, ka.tag, "the same text: the same tag in both threads");
    assert.equal(a!.ownCopies + b!.ownCopies, 0, "neither thread keeps a copy of its own");
    now += 10_000;
    const later = b!.get("m1")!;
    assert.equal(later.pem, cleanKey(PUB("two")), "past trustMsMax the record is read again: the in-place rewrite is seen");
    assert.notEqual(later.tag, ka.tag, "a new text, a new tag");
    assert.equal(a!.get("m1")!.pem, cleanKey(PUB("two")), "and a answers the new text from b's read");
  } finally {
    s.cleanup();
  }
});

test("a key rotated by another process (a new file renamed into place) reaches every thread at its stamp's next look, and at once at sign-in", () => {
  let now = Date.now();
  const s = setup(2, { now: () => now });
  try {
    writeFileSync(s.file("m1"), PUB("one"));
    s.settle(60);
    const [a, b] = s.caches;
    const before = a!.get("m1")!;
    assert.equal(b!.get("m1")!.tag, before.tag);
    otherProcess(`const fs = require("fs"); fs.writeFileSync(${JSON.stringify(s.file("m1") + ".x")}, ${JSON.stringify(PUB("two"))}); fs.renameSync(${JSON.stringify(s.file("m1") + ".x")}, ${JSON.stringify(s.file("m1"))})`);
    assert.equal(b!.getFresh("m1")!.pem, cleanKey(PUB("two")), "a sign-in in b: the new key at once (the file's identity changed)");
    s.settle(30); // the rename as if 30 s ago: the stamps vouch for the new mtime
    now += 300;
    const after = a!.get("m1")!;
    assert.equal(after.pem, cleanKey(PUB("two")), "a: the new key at its stamp's next look");
    assert.notEqual(after.tag, before.tag);
    assert.equal(b!.get("m1")!.tag, after.tag, "one text, one tag, in both threads");
  } finally {
    s.cleanup();
  }
});

test("a key deleted by another process: gone for every thread at its stamp's next look, and for all at once after one sign-in saw it", () => {
  let now = Date.now();
  const s = setup(3, { now: () => now });
  try {
    writeFileSync(s.file("m1"), PUB("one"));
    // the file's identity is kept only for a file over a second old: make it so
    const past = (Date.now() - 60_000) / 1000;
    utimesSync(s.file("m1"), past, past);
    s.settle();
    const [a, b, c] = s.caches;
    assert.ok(a!.get("m1") && b!.get("m1") && c!.get("m1"));
    otherProcess(`require("fs").unlinkSync(${JSON.stringify(s.file("m1"))})`);
    assert.equal(b!.get("m1")?.pem, cleanKey(PUB("one")), "within 250 ms of b's last look: the copy (as with a thread's own copy)");
    assert.equal(a!.getFresh("m1"), undefined, "a sign-in in a: gone at once");
    assert.equal(b!.get("m1"), undefined, "and then for b's request path at once: a's sign-in dropped the shared record");
    s.settle(30);
    now += 300;
    assert.equal(c!.get("m1"), undefined, "c at its stamp's next look");
  } finally {
    s.cleanup();
  }
});

test("a key this master rejects (moved by one thread, which invalidates it) stops working in every thread at once", () => {
  const now = Date.now();
  const s = setup(2, { now: () => now });
  try {
    writeFileSync(s.file("m1"), PUB("one"));
    s.settle();
    const [a, b] = s.caches;
    assert.ok(b!.get("m1"));
    // a's sign-in handler rejects it: the move, then its invalidate (auth.ts applyOps)
    renameSync(s.file("m1"), path.join(s.dir, "minions_rejected", "m1"));
    s.settle(); // even with the directory's mtime as if unchanged for b's stamp
    a!.invalidate("m1");
    assert.equal(b!.get("m1"), undefined, "b reads again at once, within its stamp's 250 ms");
  } finally {
    s.cleanup();
  }
});

test("a tok verified in one thread is known verified in the others, for that key's text only", () => {
  let now = Date.now();
  const s = setup(2, { now: () => now });
  try {
    writeFileSync(s.file("m1"), PUB("one"));
    s.settle();
    const [a, b] = s.caches;
    const tok = randomBytes(256);
    const ka = a!.get("m1")!;
    assert.equal(a!.tokVerified("m1", ka, tok), false);
    a!.tokVerifiedNow("m1", ka, tok);
    const kb = b!.get("m1")!;
    assert.equal(b!.tokVerified("m1", kb, tok), true, "b: verified by a");
    assert.equal(b!.tokVerified("m1", kb, randomBytes(256)), false, "another tok");
    assert.equal(b!.tokVerified("m2", kb, tok), false, "another minion");
    otherProcess(`const fs = require("fs"); fs.writeFileSync(${JSON.stringify(s.file("m1") + ".x")}, ${JSON.stringify(PUB("two"))}); fs.renameSync(${JSON.stringify(s.file("m1") + ".x")}, ${JSON.stringify(s.file("m1"))})`);
    s.settle(30);
    now += 300;
    const rotated = b!.get("m1")!;
    assert.equal(b!.tokVerified("m1", rotated, tok), false, "the key rotated: the tok is checked again");
    assert.equal(a!.tokVerified("m1", ka, tok), false, "nor under the old key's tag");
  } finally {
    s.cleanup();
  }
});

test("past a full table each thread keeps its own copies, says so once, and they follow the same rules", () => {
  let now = Date.now();
  const s = setup(2, { minions: 1, now: () => now }); // 1,536 bytes: one record of a 2,048-bit key's size
  try {
    const pem = generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ type: "spki", format: "pem" }) as string;
    for (const id of ["m1", "m2", "m3"]) writeFileSync(s.file(id), pem);
    s.settle();
    const [a, b] = s.caches;
    for (const id of ["m1", "m2", "m3"]) assert.equal(a!.get(id)!.pem, cleanKey(pem));
    assert.equal(a!.ownCopies, 2, "one in the table, two of its own");
    assert.equal(s.warnings.length, 1, `one warning: ${s.warnings.join(" | ")}`);
    assert.match(s.warnings[0]!, /brine_key_table_minions/);
    const tok = randomBytes(256);
    const k3 = a!.get("m3")!;
    a!.tokVerifiedNow("m3", k3, tok);
    assert.equal(a!.tokVerified("m3", a!.get("m3")!, tok), true, "an own copy keeps its tok");
    assert.equal(b!.tokVerified("m3", b!.get("m3")!, tok), false, "another thread's own copy does not have it");
    otherProcess(`require("fs").unlinkSync(${JSON.stringify(s.file("m3"))})`);
    s.settle(30);
    now += 300;
    assert.equal(a!.get("m3"), undefined, "an own copy: gone at the stamp's next look");
  } finally {
    s.cleanup();
  }
});

test("five threads reading 2,000 minions' keys keep no copy per minion: the V8 heap grows by less than 100 B per minion and thread", () => {
  v8.setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const minions = 2000;
  const s = setup(5, { minions });
  try {
    const pem = generateKeyPairSync("rsa", { modulusLength: 2048 }).publicKey.export({ type: "spki", format: "pem" }) as string;
    for (let i = 0; i < minions; i++) writeFileSync(s.file(`m${i}`), pem.replace("MII", `MII${i % 10}`)); // texts of their own
    s.settle();
    const tok = randomBytes(256);
    // warm: every code path compiled, the Maps at their size (the caches' own maps stay empty)
    for (const c of s.caches) c.get("m0");
    gc();
    gc();
    const before = process.memoryUsage().heapUsed;
    const kept: unknown[] = [];
    for (const c of s.caches) {
      for (let i = 0; i < minions; i++) {
        const k = c.get(`m${i}`)!;
        if (!c.tokVerified(`m${i}`, k, tok)) c.tokVerifiedNow(`m${i}`, k, tok);
      }
      kept.push(c);
    }
    gc();
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    const perMinionThread = grown / (minions * s.caches.length);
    // a thread's own copy is ~750 B with its entry, and a verified tok ~350 B more
    assert.ok(perMinionThread < 100, `${perMinionThread.toFixed(0)} B of V8 heap per minion and thread`);
    for (const c of s.caches) assert.equal(c.ownCopies, 0);
    assert.equal(s.caches[4]!.tokVerified("m7", s.caches[4]!.get("m7")!, tok), true);
  } finally {
    s.cleanup();
  }
});

test("in a real worker thread: the key and tok the main thread read are answered from the table, and its invalidation reaches the worker", { timeout: 30_000 }, async () => {
  const s = setup(1);
  try {
    writeFileSync(s.file("m1"), PUB("one"));
    s.settle();
    const main = s.caches[0]!;
    const tok = randomBytes(256);
    const k = main.get("m1")!;
    main.tokVerifiedNow("m1", k, tok);
    // the worker's file is rewritten in place (the directory's mtime unchanged): only the table can answer "one"
    writeFileSync(s.file("m1"), PUB("two"));
    s.settle();
    const code = `
      const { workerData, parentPort } = require("node:worker_threads");
      Promise.all([import(workerData.store), import(workerData.table)]).then(([{ AcceptedKeyCache, KeyStore }, { KeyTable }]) => {
        const cache = new AcceptedKeyCache(new KeyStore(workerData.dir), 1000, 16, Date.now, undefined, new KeyTable(workerData.sab));
        parentPort.on("message", (m) => {
          const k = cache.get("m1");
          parentPort.postMessage(k ? { pem: k.pem, tag: k.tag, tok: cache.tokVerified("m1", k, Buffer.from(m.tok, "hex")) } : null);
        });
        parentPort.postMessage("ready");
      });`;
    const w = new Worker(code, {
      eval: true,
      workerData: { dir: s.dir, sab: (main as unknown as { table: KeyTable }).table.sab, store: new URL("../../src/lib/pki/key-store.js", import.meta.url).href, table: new URL("../../src/shared/key-table.js", import.meta.url).href },
    });
    try {
      const next = () => new Promise<unknown>((resolve, reject) => (w.once("message", resolve), w.once("error", reject)));
      assert.equal(await next(), "ready");
      w.postMessage({ tok: tok.toString("hex") });
      assert.deepEqual(await next(), { pem: cleanKey(PUB("one")), tag: k.tag, tok: true }, "the main thread's read and tok, from the table");
      renameSync(s.file("m1"), path.join(s.dir, "minions_rejected", "m1"));
      s.settle();
      main.invalidate("m1");
      w.postMessage({ tok: tok.toString("hex") });
      assert.equal(await next(), null, "rejected and invalidated in the main thread: gone in the worker at once");
    } finally {
      await w.terminate();
    }
  } finally {
    s.cleanup();
  }
});
