/**
 * A request thread reads a job's `nocache` mark from the job cache once per second at most (context.ts isNocache),
 * not once per return: a return flood to one job pays one LMDB read transaction, not one each. A job published
 * with `nocache` is marked before anyone can return to it, so the answer never goes stale in between.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { MasterContext, nocacheMarkMsMax, nocacheMarksMax } from "../../src/workers/req-handler/context.js";
import { loadOrCreateKeyPair } from "../../src/lib/pki/master-keys.js";
import { KeyStore } from "../../src/lib/pki/key-store.js";
import { SharedSecrets } from "../../src/shared/secrets.js";
import { NonceSet } from "../../src/shared/nonce-set.js";
import { generateKeyString } from "../../src/shared/protocol/crypticle.js";

test("a job's nocache mark is read once per second per thread, whatever the number of returns", async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-nocache-"));
  const cfg = { ...masterDefaults(), id: "m", pki_dir: path.join(root, "pki"), cachedir: path.join(root, "cache"), sock_dir: path.join(root, "sock") };
  mkdirSync(cfg.cachedir, { recursive: true });
  new KeyStore(cfg.pki_dir).ensureDirs();
  loadOrCreateKeyPair(cfg.pki_dir, "master", 2048);
  const secrets = new SharedSecrets();
  secrets.setAesKey(generateKeyString());
  let now = 1_000_000;
  const ctx = new MasterContext(cfg, { secrets: secrets.sab, nonces: new NonceSet(1024).sab, jids: new SharedArrayBuffer(8) }, () => now);
  try {
    const quiet = "20261126010000000001";
    const loud = "20261126010000000002";
    await ctx.jobs.markNocache(quiet);
    let reads = 0;
    const isNocache = ctx.jobs.isNocache.bind(ctx.jobs);
    ctx.jobs.isNocache = (jid: string) => (reads++, isNocache(jid));
    for (let i = 0; i < 500; i++) {
      assert.equal(ctx.isNocache(quiet), true);
      assert.equal(ctx.isNocache(loud), false);
      now += 1;
    }
    assert.equal(reads, 2, "500 returns to each of two jobs within the second: one read each");
    now += nocacheMarkMsMax;
    assert.equal(ctx.isNocache(quiet), true);
    assert.equal(reads, 3, "read again after a second");
    // a thread keeps at most nocacheMarksMax jobs: the oldest is read again
    for (let i = 0; i < nocacheMarksMax; i++) ctx.isNocache(`2026112601000000${String(1000 + i).padStart(4, "0")}`);
    reads = 0;
    ctx.isNocache(quiet);
    assert.equal(reads, 1, "pushed out by newer jobs");
  } finally {
    await ctx.store.close();
    rmSync(root, { recursive: true, force: true });
  }
});
