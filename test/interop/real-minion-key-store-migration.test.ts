/**
 * Real salt-minions (3007.x and 3006.8) through a move of brine's keys from files to the indexed store: they
 * sign in to a `localfs_key` master (auto_accept) and answer a job; `salt-run pki.migrate_to_mmap` copies their
 * keys; the master restarts on `keys.cache_driver: mmap_key` without auto_accept, on the same ports, and the same
 * minions sign in again from the store (no key waits for approval) and answer jobs; `salt-key -L` lists them
 * from the store. Skips with a message when Salt's source is absent.
 */
import { describe, test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { KeyStore, closeKeyDbs } from "../../src/lib/pki/key-store.js";

const skip = realSaltSkipReason();

async function pingAll(conf: string, ids: string[], deadlineMs: number): Promise<string> {
  const end = Date.now() + deadlineMs;
  let last = "";
  for (;;) {
    const r = await runCli("salt", ["-c", conf, "*", "test.ping", "--out", "json", "-t", "10"]);
    last = r.stdout + r.stderr;
    if (ids.every((id) => last.includes(`"${id}": true`))) return last;
    if (Date.now() > end) return last;
    await new Promise((res) => setTimeout(res, 1000));
  }
}

describe("real salt-minions across pki.migrate_to_mmap and a restart on keys.cache_driver: mmap_key", { skip, timeout: 600_000 }, () => {
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-ks-"));
  let m: TestMaster | undefined;
  after(async () => {
    stopRealMinions(runDir);
    await closeKeyDbs();
    await m?.stop();
    rmSync(runDir, { recursive: true, force: true });
  });

  test("keys accepted as files serve the same minions from the indexed store after the migration", async () => {
    m = await startTestMaster({ auto_accept: true, worker_threads: 2 });
    await Promise.all([startRealMinion(runDir, "ks7", m.retPort, m.publishPort, "3007.x"), startRealMinion(runDir, "ks6", m.retPort, m.publishPort, "v3006.8")]);
    const before = await pingAll(writeConfigDir(m), ["ks7", "ks6"], 30_000);
    assert.match(before, /"ks7": true/, before);
    assert.match(before, /"ks6": true/, before);

    const migrated = await runCli("salt-run", ["-c", writeConfigDir(m), "pki.migrate_to_mmap"]);
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.match(migrated.stdout, /Accepted: 2\n/);

    const { root, retPort, publishPort } = m;
    await m.stop(true);
    m = await startTestMaster({ auto_accept: false, worker_threads: 2, "keys.cache_driver": "mmap_key", ret_port: retPort, publish_port: publishPort }, root);
    const conf = writeConfigDir(m);
    const after = await pingAll(conf, ["ks7", "ks6"], 90_000);
    assert.match(after, /"ks7": true/, after);
    assert.match(after, /"ks6": true/, after);
    const store = new KeyStore(m.pkiDir, "mmap_key");
    assert.deepEqual(store.list("pending"), [], "no minion had to be approved again");
    const listed = await runCli("salt-key", ["-c", conf, "-L", "--out", "json"]);
    assert.deepEqual(JSON.parse(listed.stdout).minions, ["ks6", "ks7"]);
  });
});
