/**
 * The accepted ids a publish targets come from a listing remembered while the key directory is
 * unchanged (no readdir per publish), and a key accepted or deleted is seen by the next publish.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, utimesSync, writeFileSync, unlinkSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { KeyStore, racyMs } from "../../src/lib/pki/key-store.js";

test("a listing is reused while the directory is unchanged and re-read when a key comes or goes", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-ks-"));
  try {
    const ks = new KeyStore(dir);
    ks.ensureDirs();
    const acc = path.join(dir, "minions");
    writeFileSync(path.join(acc, "a"), "k");
    const old = (Date.now() - 10 * racyMs) / 1000;
    utimesSync(acc, old, old);
    const first = ks.listCached("accepted");
    assert.deepEqual(first, ["a"]);
    assert.equal(ks.listCached("accepted"), first, "the same listing, not read again");

    writeFileSync(path.join(acc, "b"), "k"); // the directory's mtime moves
    assert.deepEqual(ks.listCached("accepted"), ["a", "b"]);
    unlinkSync(path.join(acc, "a"));
    assert.deepEqual(ks.listCached("accepted"), ["b"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a directory changed within the racy window is read again even when its mtime looks the same", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-ks-"));
  try {
    const ks = new KeyStore(dir);
    ks.ensureDirs();
    const acc = path.join(dir, "minions");
    const t = Date.now() / 1000;
    writeFileSync(path.join(acc, "a"), "k");
    utimesSync(acc, t, t);
    assert.deepEqual(ks.listCached("accepted", t * 1000 + 10), ["a"]);
    writeFileSync(path.join(acc, "b"), "k");
    utimesSync(acc, t, t); // a second change in the same clock tick: the mtime did not move
    assert.deepEqual(ks.listCached("accepted", t * 1000 + 20), ["a", "b"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
