/**
 * `_serve_file` chunking as Salt's fileclient uses it: a 50 MB file fetched by offset in
 * `file_buffer_size` (1 MiB) chunks re-assembles bit-exact, its `_file_hash` is the sha256 of those
 * bytes, gzip'ed chunks (the minion's `gzip` option) unpack to the same bytes, and the edge sizes work
 * (empty file: one empty chunk with a dest; exactly one buffer; a custom file_buffer_size).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { closeSync, openSync, utimesSync, writeSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { TestMaster } from "../helpers/master.js";
import { ask, fetchFile, minion, startFsMaster, tempRoot, writeTree } from "./helpers.js";

const MiB = 1024 * 1024;
const BIG = 50 * MiB;

describe("fileserver: _serve_file in chunks", () => {
  let tm: TestMaster;
  let m: TestMinion;
  const bigHash = createHash("sha256");

  before(async () => {
    const dir = tempRoot();
    const root = path.join(dir, "srv", "salt");
    writeTree(root, { "empty.bin": Buffer.alloc(0), "one-mib.bin": randomBytes(MiB), "text.txt": "x".repeat(3 * MiB + 5) });
    const big = path.join(root, "big", "fifty.bin");
    writeTree(root, { "big/fifty.bin": "" });
    const fd = openSync(big, "w");
    for (let off = 0; off < BIG; off += 4 * MiB) {
      const b = randomBytes(Math.min(4 * MiB, BIG - off));
      bigHash.update(b);
      writeSync(fd, b);
    }
    closeSync(fd);
    const past = Date.now() / 1000 - 3600;
    utimesSync(big, past, past);
    tm = await startFsMaster({ worker_threads: 2 }, dir);
    m = await minion(tm, "chunks1", 1);
  });
  after(async () => {
    await m?.stop();
    await tm?.stop();
  });

  test("a 50 MB file comes back bit-exact in 1 MiB chunks", async () => {
    const got = await fetchFile(m, "big/fifty.bin");
    assert.ok(got);
    assert.equal(got.data.length, BIG);
    assert.equal(got.chunks, 50);
    assert.equal(got.dest, "big/fifty.bin");
    assert.equal(createHash("sha256").update(got.data).digest("hex"), bigHash.copy().digest("hex"));
  });

  test("_file_hash of the 50 MB file is the sha256 of its bytes", async () => {
    const h = await ask(m, "_file_hash", { path: "big/fifty.bin", saltenv: "base" });
    assert.deepEqual(h, { hsum: bigHash.copy().digest("hex"), hash_type: "sha256" });
  });

  test("gzip'ed chunks carry the level and unpack to the same bytes", async () => {
    const first = (await ask(m, "_serve_file", { path: "text.txt", saltenv: "base", loc: 0, gzip: 6 })) as Record<string, unknown>;
    assert.equal(first.gzip, 6);
    assert.ok(Buffer.isBuffer(first.data) && first.data.length < MiB / 10, "text compresses");
    const got = await fetchFile(m, "text.txt", "base", 1);
    assert.ok(got);
    assert.equal(got.data.toString(), "x".repeat(3 * MiB + 5));
    assert.equal(got.chunks, 4);
  });

  test("an empty file is one empty chunk that still names its dest", async () => {
    const r = await ask(m, "_serve_file", { path: "empty.bin", saltenv: "base", loc: 0 });
    assert.deepEqual(r, { data: "", dest: "empty.bin" });
  });

  test("a file of exactly one buffer takes one data chunk and one empty chunk", async () => {
    const got = await fetchFile(m, "one-mib.bin");
    assert.ok(got);
    assert.equal(got.chunks, 1);
    assert.equal(got.data.length, MiB);
  });

  test("a loc past the end serves an empty chunk", async () => {
    const r = await ask(m, "_serve_file", { path: "one-mib.bin", saltenv: "base", loc: 5 * MiB });
    assert.deepEqual(r, { data: "", dest: "one-mib.bin" });
  });
});

describe("fileserver: file_buffer_size sets the chunk size", () => {
  test("a 64 KiB buffer serves a 200 KiB file in 4 chunks", async () => {
    const dir = tempRoot();
    const body = randomBytes(200 * 1024);
    writeTree(path.join(dir, "srv", "salt"), { "f.bin": body });
    const tm = await startFsMaster({ file_buffer_size: 64 * 1024 }, dir);
    const m = await minion(tm, "chunks2", 2);
    try {
      const got = await fetchFile(m, "f.bin");
      assert.ok(got);
      assert.equal(got.chunks, 4);
      assert.ok(got.data.equals(body));
    } finally {
      await m.stop();
      await tm.stop();
    }
  });
});
