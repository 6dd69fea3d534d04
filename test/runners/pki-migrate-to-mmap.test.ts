/**
 * `salt-run pki.migrate_to_mmap` and `pki.status`: every accepted, pending, rejected and denied key file goes
 * into the indexed store with Salt's report text; entries that are not keys are counted and skipped; a second
 * run changes nothing; a dry run writes nothing. (A master restarted on the migrated store:
 * test/pki/key-changes-seen-by-publish-and-sign-in.test.ts.)
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { KeyStore, closeKeyDbs } from "../../src/lib/pki/key-store.js";
import { keyDbDir } from "../../src/lib/pki/key-db.js";
import { keyFileBytesMax, migrateReport } from "../../src/lib/pki/key-migrate.js";
import { runnerHarness } from "./helpers.js";

const PUB = (n: string) => `-----BEGIN PUBLIC KEY-----\nMIIB${n}\n-----END PUBLIC KEY-----\n`;

function layout(pki: string): void {
  const put = (dir: string, id: string, text: string) => {
    mkdirSync(path.join(pki, dir), { recursive: true });
    writeFileSync(path.join(pki, dir, id), text);
  };
  put("minions", "web1", PUB("w1"));
  put("minions", "web2", PUB("w2"));
  put("minions", ".key_cache", "not a key, not counted");
  put("minions_pre", "new1", PUB("n1"));
  put("minions_rejected", "bad1", PUB("b1"));
  put("minions_denied", "web1", PUB("other"));
  // not keys: counted as skipped
  put("minions_pre", "garbage", "hello");
  put("minions_pre", "huge", PUB("x".repeat(keyFileBytesMax)));
  mkdirSync(path.join(pki, "minions", "adir"));
  symlinkSync(path.join(pki, "minions", "web1"), path.join(pki, "minions", "alink"));
}

test("pki.migrate_to_mmap copies every state into the indexed store with Salt's report, skipping what is not a key", async () => {
  const h = runnerHarness();
  try {
    const pki = h.ctx.cfg.pki_dir;
    layout(pki);
    const dry = await h.run("pki.migrate_to_mmap", [], { dry_run: true });
    assert.equal(
      dry,
      "PKI migration dry-run (no changes written):\n  Accepted: 2\n  Pending:  1\n  Rejected: 1\n  Denied:   1\n  Total:    5\n  Skipped:  4 (not keys; see the master log)",
    );
    assert.equal(existsSync(keyDbDir(pki)), false, "a dry run makes no store");
    assert.equal(await h.run("pki.status"), dry, "pki.status is the dry run");

    const done = await h.run("pki.migrate_to_mmap");
    assert.equal(done, String(dry).replace("PKI migration dry-run (no changes written):", "PKI keys migrated to mmap_key backend successfully."));
    const store = new KeyStore(pki, "mmap_key");
    assert.deepEqual(store.list("accepted"), ["web1", "web2"]);
    assert.deepEqual(store.list("pending"), ["new1"]);
    assert.deepEqual(store.list("rejected"), ["bad1"]);
    assert.deepEqual(store.list("denied"), ["web1"]);
    assert.equal(store.read("accepted", "web1"), PUB("w1"));
    assert.equal(store.read("denied", "web1"), PUB("other"));

    const snapshot = () => (["accepted", "pending", "rejected", "denied"] as const).map((s) => store.list(s).map((id) => [s, id, store.digest(s, id)]));
    const before = snapshot();
    assert.equal(await h.run("pki.migrate_to_mmap", [false]), done, "the same report again");
    assert.deepEqual(snapshot(), before, "a second run changes no key");
    assert.equal(existsSync(path.join(pki, "minions", "web1")), true, "the files stay where they were");
  } finally {
    await closeKeyDbs();
    await h.close();
  }
});

test("the report groups thousands as Python's {:,} does and has no Skipped line when nothing was skipped", () => {
  assert.equal(
    migrateReport({ accepted: 100_000, pending: 1234, rejected: 0, denied: 12, skipped: 0 }, false),
    "PKI keys migrated to mmap_key backend successfully.\n  Accepted: 100,000\n  Pending:  1,234\n  Rejected: 0\n  Denied:   12\n  Total:    101,246",
  );
});
