/**
 * `_file_hash` never re-hashes an unchanged file: the hash cache keys by real path and validates by
 * stat signature, shares one hashing pass among concurrent requests, re-hashes after any change, keeps
 * racy (just-modified) files out of the cache, stores big files' hashes for the other worker threads,
 * and stays within its entry bound.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { statSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import { HashCache, diskHashMinBytes } from "../../src/lib/fileserver/hash-cache.js";
import { ask, minion, startFsMaster, tempRoot, writeTree } from "./helpers.js";

const sha = (b: string | Buffer) => createHash("sha256").update(b).digest("hex");
const st = (p: string) => statSync(p, { bigint: true });

describe("hash cache", () => {
  test("1000 concurrent and later requests for an unchanged file hash it once", async () => {
    const root = tempRoot();
    writeTree(root, { "f.txt": "hello" });
    const f = path.join(root, "f.txt");
    const c = new HashCache("sha256", null);
    const all = await Promise.all(Array.from({ length: 1000 }, () => c.hash(f, st(f))));
    assert.ok(all.every((h) => h === sha("hello")));
    for (let i = 0; i < 100; i++) assert.equal(await c.hash(f, st(f)), sha("hello"));
    assert.equal(c.hashed, 1);
  });

  test("a changed file is hashed again", async () => {
    const root = tempRoot();
    writeTree(root, { "f.txt": "one" });
    const f = path.join(root, "f.txt");
    const c = new HashCache("sha256", null);
    assert.equal(await c.hash(f, st(f)), sha("one"));
    writeFileSync(f, "two");
    const t = Date.now() / 1000 - 60;
    utimesSync(f, t, t);
    assert.equal(await c.hash(f, st(f)), sha("two"));
    assert.equal(c.hashed, 2);
  });

  test("a file modified within the racy window is not cached", async () => {
    const root = tempRoot();
    writeTree(root, { "fresh.txt": "new" }, false);
    const f = path.join(root, "fresh.txt");
    const c = new HashCache("sha256", null);
    await c.hash(f, st(f));
    await c.hash(f, st(f));
    assert.equal(c.hashed, 2);
    assert.equal(c.size, 0);
  });

  test("a big file's hash is shared through the cache directory with another thread's cache", async () => {
    const root = tempRoot();
    const cachedir = tempRoot();
    writeTree(root, { "big.bin": Buffer.alloc(diskHashMinBytes + 1, 7) });
    const f = path.join(root, "big.bin");
    const a = new HashCache("sha256", cachedir);
    const b = new HashCache("sha256", cachedir);
    const h = await a.hash(f, st(f));
    assert.equal(await b.hash(f, st(f)), h);
    assert.equal(a.hashed + b.hashed, 1);
  });

  test("the memory cache keeps at most its entry bound", async () => {
    const root = tempRoot();
    const files: Record<string, string> = {};
    for (let i = 0; i < 20; i++) files[`f${i}`] = String(i);
    writeTree(root, files);
    const c = new HashCache("sha256", null, Date.now, 5);
    for (let i = 0; i < 20; i++) await c.hash(path.join(root, `f${i}`), st(path.join(root, `f${i}`)));
    assert.equal(c.size, 5);
  });

  test("other hash_type values use their algorithm", async () => {
    const root = tempRoot();
    writeTree(root, { "f.txt": "abc" });
    const f = path.join(root, "f.txt");
    assert.equal(await new HashCache("md5", null).hash(f, st(f)), createHash("md5").update("abc").digest("hex"));
  });
});

describe("_file_hash on a running master", () => {
  test("hash_type is reported and the same hash comes back for repeated requests", async () => {
    const dir = tempRoot();
    writeTree(path.join(dir, "srv", "salt"), { "a.sls": "a: 1\n" });
    const tm = await startFsMaster({ hash_type: "sha512" }, dir);
    const m = await minion(tm, "hash1", 4);
    try {
      const want = { hsum: createHash("sha512").update("a: 1\n").digest("hex"), hash_type: "sha512" };
      for (let i = 0; i < 5; i++) assert.deepEqual(await ask(m, "_file_hash", { path: "a.sls", saltenv: "base" }), want);
      const hs = (await ask(m, "_file_hash_and_stat", { path: "a.sls", saltenv: "base" })) as unknown[];
      assert.deepEqual(hs[0], want);
      assert.equal((hs[1] as unknown[]).length, 10);
    } finally {
      await m.stop();
      await tm.stop();
    }
  });
});
