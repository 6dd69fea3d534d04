/**
 * Real salt-minions with `verify_master_pubkey_sign: True` against brine with `master_sign_pubkey: True`
 * (3007.x and 3006.8): each holds the master's master_sign.pub and signs in, then runs a job; a minion holding
 * another signing key refuses brine as it refuses a Python master ("signature verification failed") and never
 * becomes ready. Skips with a message when Salt's source is absent.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { spawn } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { HARNESS, realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { generateRsaPem } from "../../src/lib/pki/master-keys.js";

const skip = realSaltSkipReason();
const VERIFY = "verify_master_pubkey_sign: True";

function placeSignPub(runDir: string, id: string, pubPem: string): void {
  const pki = path.join(runDir, "minions", id, "pki", "minion");
  mkdirSync(pki, { recursive: true });
  writeFileSync(path.join(pki, "master_sign.pub"), pubPem);
}

describe("real salt-minions verifying brine's signed master key", { skip, timeout: 600_000 }, () => {
  let m: TestMaster;
  let conf: string;
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-sg-"));

  before(async () => {
    m = await startTestMaster({ auto_accept: true, worker_threads: 2, master_sign_pubkey: true });
    conf = writeConfigDir(m);
    const signPub = readFileSync(path.join(m.pkiDir, "master_sign.pub"), "utf8");
    placeSignPub(runDir, "sig7", signPub);
    placeSignPub(runDir, "sig6", signPub);
    await Promise.all([startRealMinion(runDir, "sig7", m.retPort, m.publishPort, "3007.x", VERIFY), startRealMinion(runDir, "sig6", m.retPort, m.publishPort, "v3006.8", VERIFY)]);
  });
  after(async () => {
    stopRealMinions(runDir);
    await m?.stop();
  });

  test("both generations accept the signed key and answer a job", async () => {
    const r = await runCli("salt", ["-c", conf, "*", "test.ping", "--out", "json", "-t", "20"]);
    assert.match(r.stdout, /"sig7": true/, r.stdout + r.stderr);
    assert.match(r.stdout, /"sig6": true/, r.stdout + r.stderr);
    assert.match(readFileSync(path.join(runDir, "minions", "sig7", "log", "minion"), "utf8"), /Received signed and verified master pubkey/);
  });

  test("a minion holding another signing key refuses brine and never becomes ready", async () => {
    placeSignPub(runDir, "wrong7", generateRsaPem(2048).publicPem);
    const p = spawn(path.join(HARNESS, "start-minion.sh"), ["--dir", runDir, "wrong7", "127.0.0.1", String(m.retPort), String(m.publishPort)], {
      env: { ...process.env, SALT_REF: "3007.x", SALT_WAIT: "0", SALT_MINION_EXTRA: VERIFY },
      stdio: "ignore",
    });
    await new Promise((r) => p.on("close", r));
    const log = path.join(runDir, "minions", "wrong7", "log", "minion");
    let text = "";
    for (let i = 0; i < 60 && !/signature verification failed/.test(text); i++) {
      await new Promise((r) => setTimeout(r, 500));
      text = existsSync(log) ? readFileSync(log, "utf8") : "";
    }
    assert.match(text, /Received signed public-key from master \S+ but signature verification failed/);
    assert.doesNotMatch(text, /Minion is ready to receive requests/);
    assert.ok(!existsSync(path.join(runDir, "minions", "wrong7", "pki", "minion", "minion_master.pub")), "the master key is not pinned");
  });
});
