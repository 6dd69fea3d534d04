/**
 * Each published job's load also lands in Salt's local_cache layout (what Salt's LocalClient and a
 * Python salt-api read before they wait for returns), and the cleanup removes what keep_jobs no longer keeps.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, utimesSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { pruneSaltJobFiles, saltJobDir, writeSaltJobLoad } from "../../src/lib/store/salt-job-files.js";

test("a job's directory is Salt's jid_dir: the jid hashed with hash_type, split after two characters", () => {
  // values computed with Python's hashlib for this jid
  assert.equal(saltJobDir("/c", "sha256", "20261125130451039000"), "/c/jobs/83/ef14d90253bd82c06d5500a9b45c82348dd3752973f74a0403f559ed343358");
  assert.equal(saltJobDir("/c", "md5", "20261125130451039000"), "/c/jobs/e2/4d8d18be6bf551ab55f203ccccc798");
});

test("the load, the jid and the minion list are written as msgpack; old job directories are pruned, recent ones kept", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-sjf-"));
  try {
    const cfg = { cachedir: dir, hash_type: "sha256" };
    writeSaltJobLoad(cfg, "20260101000000000001", { fun: "test.ping", tgt: "*", user: "root" }, ["m1", "m2"]);
    writeSaltJobLoad(cfg, "20260101000000000002", { fun: "test.echo" }, ["m1"]);
    const d1 = saltJobDir(dir, "sha256", "20260101000000000001");
    assert.equal(readFileSync(path.join(d1, "jid"), "utf8"), "20260101000000000001");
    assert.deepEqual(decodeWire(readFileSync(path.join(d1, ".load.p"))), { fun: "test.ping", tgt: "*", user: "root" });
    assert.deepEqual(decodeWire(readFileSync(path.join(d1, ".minions.p"))), ["m1", "m2"]);
    const old = Date.now() / 1000 - 7200;
    utimesSync(path.join(d1, "jid"), old, old);
    assert.equal(pruneSaltJobFiles(dir, 3600, Date.now()), 1);
    assert.equal(existsSync(d1), false);
    assert.equal(existsSync(saltJobDir(dir, "sha256", "20260101000000000002")), true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
