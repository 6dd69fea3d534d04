/**
 * Key changes made outside the master's threads are seen by its next publish and sign-in, with either
 * `keys.cache_driver`:
 * - localfs_key: another process adds a key file to `minions/` and later deletes it (a human's `mv`, another
 *   master's salt-key, the state-sync thread installing a file): the accepted-id listing the publish path keeps
 *   is never stale.
 * - mmap_key: a minion's key waits in the indexed store, `salt-key -a` (another process) accepts it there, the
 *   next publish targets it and the minion signs in; `salt-key -d` removes it; no key directory is used.
 * - migration: keys a localfs_key master accepted, copied by `salt-run pki.migrate_to_mmap`, are the keys of
 *   the same master restarted with mmap_key (its minion signs in as accepted, a publish targets it).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { LocalClient } from "../../src/lib/client/local-client.js";
import { KeyStore, closeKeyDbs } from "../../src/lib/pki/key-store.js";
import { isBrineError } from "../../src/shared/errors.js";
import { startTestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

const NOT_RESOLVED = "Master could not resolve minions for target ks-*";

/** Another process writes or removes a file (the master's threads learn of it only from the disk). */
function otherProcess(code: string): void {
  execFileSync(process.execPath, ["-e", code]);
}

test("localfs_key: a key file another process adds or deletes is seen by the next publish and sign-in", { timeout: 120_000 }, async () => {
  const [keys] = await testKeys(1);
  const tm = await startTestMaster();
  const client = new LocalClient(tm.cfg);
  try {
    assert.equal((await client.pub({ tgt: "ks-*", fun: "test.ping" })).error, NOT_RESOLVED, "no key yet (and the listing is now remembered)");
    const file = path.join(tm.pkiDir, "minions", "ks-a");
    otherProcess(`require("fs").writeFileSync(${JSON.stringify(file)}, ${JSON.stringify(keys!.pub)})`);
    assert.deepEqual((await client.pub({ tgt: "ks-*", fun: "test.ping" })).minions, ["ks-a"]);
    const m = fastMinion(tm, "ks-a", keys!);
    try {
      await m.start();
      assert.ok(m.running, "the minion signed in with the key another process accepted");
    } finally {
      await m.stop();
    }
    otherProcess(`require("fs").unlinkSync(${JSON.stringify(file)})`);
    assert.equal((await client.pub({ tgt: "ks-*", fun: "test.ping" })).error, NOT_RESOLVED);
    const again = fastMinion(tm, "ks-a", keys!, { authDeadlineMs: 500 });
    try {
      await assert.rejects(again.start(), (e) => isBrineError(e, "MINION_AUTH_PENDING"), "its key is gone: it waits as a new one");
    } finally {
      await again.stop();
    }
  } finally {
    await tm.stop();
  }
});

test("mmap_key: sign-in, salt-key -a and -d go through the indexed store and the next publish follows them", { timeout: 120_000 }, async () => {
  const [keys] = await testKeys(1);
  const tm = await startTestMaster({ "keys.cache_driver": "mmap_key" } as never);
  const client = new LocalClient(tm.cfg);
  const conf = writeConfigDir(tm);
  try {
    const m = fastMinion(tm, "ks-b", keys!, { authDeadlineMs: 500 });
    await assert.rejects(m.start(), (e) => isBrineError(e, "MINION_AUTH_PENDING"));
    await m.stop();
    const store = new KeyStore(tm.pkiDir, "mmap_key");
    assert.equal(store.read("pending", "ks-b"), keys!.pub, "the pending key is in the store");
    assert.equal(existsSync(path.join(tm.pkiDir, "minions_pre")), false, "no key directory");
    const listed = await runCli("salt-key", ["-c", conf, "-l", "un"]);
    assert.match(listed.stdout, /Unaccepted Keys:\nks-b/);

    const acc = await runCli("salt-key", ["-c", conf, "-a", "ks-b", "-y"]);
    assert.equal(acc.code, 0, acc.stderr);
    assert.deepEqual((await client.pub({ tgt: "ks-*", fun: "test.ping" })).minions, ["ks-b"]);
    const m2 = fastMinion(tm, "ks-b", keys!);
    try {
      await m2.start();
      assert.ok(m2.running);
    } finally {
      await m2.stop();
    }

    const del = await runCli("salt-key", ["-c", conf, "-d", "ks-b", "-y"]);
    assert.equal(del.code, 0, del.stderr);
    assert.equal((await client.pub({ tgt: "ks-*", fun: "test.ping" })).error, NOT_RESOLVED);
    assert.deepEqual(readdirSync(tm.pkiDir).filter((n) => n.startsWith("minions") && n !== "minions_autosign"), [], "the key directories were never made");
  } finally {
    await closeKeyDbs();
    await tm.stop();
  }
});

test("migration: a localfs_key master's keys, migrated with salt-run pki.migrate_to_mmap, serve its minions after a restart on mmap_key", { timeout: 120_000 }, async () => {
  const [keys] = await testKeys(1);
  const tm = await startTestMaster({ auto_accept: true });
  let after: Awaited<ReturnType<typeof startTestMaster>> | undefined;
  try {
    const m = fastMinion(tm, "ks-mig", keys!);
    await m.start();
    await m.stop();
    const r = await runCli("salt-run", ["-c", writeConfigDir(tm), "pki.migrate_to_mmap"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /PKI keys migrated to mmap_key backend successfully\.\n\s+Accepted: 1\n/);
    await tm.stop(true);
    after = await startTestMaster({ auto_accept: false, "keys.cache_driver": "mmap_key", ret_port: tm.retPort, publish_port: tm.publishPort }, tm.root);
    assert.deepEqual((await new LocalClient(after.cfg).pub({ tgt: "ks-*", fun: "test.ping" })).minions, ["ks-mig"]);
    const back = fastMinion(after, "ks-mig", keys!, { authDeadlineMs: 2000 });
    try {
      await back.start();
      assert.ok(back.running, "accepted from the store: no pending key, no new sign-in to approve");
    } finally {
      await back.stop();
    }
  } finally {
    await closeKeyDbs();
    if (after) await after.stop();
    else await tm.stop();
  }
});
