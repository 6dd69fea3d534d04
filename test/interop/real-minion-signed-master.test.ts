/**
 * Real salt-minions with `verify_master_pubkey_sign: True` against brine with `master_sign_pubkey: True`
 * (3007.x and 3006.8): each holds the master's master_sign.pub and signs in, then runs a job; a minion holding
 * another signing key refuses brine as it refuses a Python master ("signature verification failed") and never
 * becomes ready. `salt-key --gen-signature`: the file is byte-for-byte what Python's salt-key writes (over a
 * master.pub without a trailing newline, where Salt's signing bug #68930 does not show), and real minions accept
 * a brine master sending it with master_use_pubkey_signature. Skips with a message when Salt's source is absent.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { spawn, spawnSync } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { freePort, startTestMaster, type TestMaster } from "../helpers/master.js";
import { HARNESS, realSaltEnv, realSaltSkipReason, realSaltSource, startRealMinion, stopAtThisProcessEnd, stopRealMinions } from "../helpers/real-salt.js";
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

for (const [ref, mid] of [["3007.x", "fo7"], ["v3006.8", "fo6"]] as const) describe(`signed failover: a real ${ref} minion with master_type: failover between two brine masters sharing the key`, { skip, timeout: 600_000 }, () => {
  let a: TestMaster;
  let b: TestMaster;
  const runDir = mkdtempSync(path.join(os.tmpdir(), `rs-${mid}-`));

  after(async () => {
    stopRealMinions(runDir);
    await a?.stop().catch(() => undefined);
    await b?.stop();
  });

  test("the minion moves to the second master when the first dies, runs a job there, and comes back when the first returns", async () => {
    const ret = await freePort();
    const pub = await freePort();
    const common = { auto_accept: true, worker_threads: 2, master_sign_pubkey: true, ret_port: ret, publish_port: pub };
    a = await startTestMaster({ ...common, id: `${mid}_a`, interface: "127.0.0.2" });
    // the second master: same master key and signing pair (Salt's multi-master tutorial), its own everything else
    const rootB = mkdtempSync(path.join(os.tmpdir(), "brine-fo-b-"));
    const pkiB = path.join(rootB, "pki", "master");
    mkdirSync(pkiB, { recursive: true });
    for (const f of ["master.pem", "master.pub", "master_sign.pem", "master_sign.pub"]) copyFileSync(path.join(a.pkiDir, f), path.join(pkiB, f));
    b = await startTestMaster({ ...common, id: `${mid}_b`, interface: "127.0.0.3" }, rootB);
    const confA = writeConfigDir(a);
    const confB = writeConfigDir(b);

    placeSignPub(runDir, mid, readFileSync(path.join(a.pkiDir, "master_sign.pub"), "utf8"));
    // minion.d overrides the harness's own settings (a key written twice in one file is an error for Salt)
    const dropIn = path.join(runDir, "minions", mid, "conf", "minion.d");
    mkdirSync(dropIn, { recursive: true });
    writeFileSync(path.join(dropIn, "failover.conf"), "master_type: failover\nmaster_alive_interval: 2\nmaster_failback: True\nmaster_failback_interval: 5\nretry_dns: 0\nverify_master_pubkey_sign: True\nauth_tries: 1\nauth_timeout: 3\n");
    await new Promise<void>((resolve, reject) => {
      stopAtThisProcessEnd(runDir);
      const p = spawn(path.join(HARNESS, "start-minion.sh"), ["--dir", runDir, mid, "[127.0.0.2, 127.0.0.3]", String(ret), String(pub)], { env: { ...process.env, SALT_REF: ref, SALT_WAIT: "90" } });
      let out = "";
      p.stdout.on("data", (d) => (out += d));
      p.stderr.on("data", (d) => (out += d));
      p.on("close", (code) => (code === 0 ? resolve() : reject(new Error(out))));
    });
    const ping = (conf: string) => runCli("salt", ["-c", conf, mid, "test.ping", "--out", "json", "-t", "8"]);
    const answered = new RegExp(`"${mid}": true`);
    assert.match((await ping(confA)).stdout, answered, "first on the first master");

    await a.stop(true);
    let moved = false;
    for (let i = 0; i < 12 && !moved; i++) moved = answered.test((await ping(confB)).stdout);
    assert.ok(moved, "the minion failed over to the second master and answered a job there");
    const log = readFileSync(path.join(runDir, "minions", mid, "log", "minion"), "utf8");
    assert.match(log, /Received signed and verified master pubkey|Minion is ready to receive requests/);

    a = await a.restart();
    let back = false;
    for (let i = 0; i < 12 && !back; i++) back = answered.test((await ping(confA)).stdout);
    assert.ok(back, "the minion failed back to the first master");
  });
});

/** Python's salt-key (from Salt's source) on a pki directory of its own: a minimal master config for it. */
function pythonSaltKey(ref: string, pki: string, args: string[]): string {
  const conf = path.join(path.dirname(pki), "pyconf");
  mkdirSync(conf, { recursive: true });
  const root = path.dirname(pki);
  writeFileSync(
    path.join(conf, "master"),
    [`root_dir: /`, `user: ${os.userInfo().username}`, `pki_dir: ${pki}`, `cachedir: ${root}/cache`, `sock_dir: ${root}/sock`, `log_file: ${root}/key.log`, `key_logfile: ${root}/key.log`].join("\n") + "\n",
  );
  const src = realSaltSource(ref);
  const r = spawnSync("/usr/bin/python3", [path.join(src, "scripts", "salt-key"), "-c", conf, ...args], { env: realSaltEnv(src), encoding: "utf8", timeout: 120_000 });
  return r.stdout;
}

describe("salt-key --gen-signature against Python's, and real minions accepting its signature", { skip, timeout: 600_000 }, () => {
  test("over a master.pub without a trailing newline, brine's signature file is byte-for-byte Python's (3007.x and 3006.8)", async () => {
    const keys = generateRsaPem(2048);
    const sign = generateRsaPem(2048);
    for (const ref of ["3007.x", "v3006.8"]) {
      const dirs = ["py", "br"].map((w) => {
        const pki = path.join(mkdtempSync(path.join(os.tmpdir(), `gs-${w}-`)), "pki");
        mkdirSync(pki, { recursive: true });
        writeFileSync(path.join(pki, "master.pem"), keys.privatePem, { mode: 0o400 });
        writeFileSync(path.join(pki, "master.pub"), keys.publicPem.trimEnd());
        writeFileSync(path.join(pki, "master_sign.pem"), sign.privatePem, { mode: 0o400 });
        writeFileSync(path.join(pki, "master_sign.pub"), sign.publicPem);
        return pki;
      });
      assert.match(pythonSaltKey(ref, dirs[0]!, ["--gen-signature"]), /True/);
      const conf = path.join(path.dirname(dirs[1]!), "conf");
      mkdirSync(conf);
      writeFileSync(path.join(conf, "master"), `pki_dir: ${dirs[1]}\ncachedir: ${path.dirname(dirs[1]!)}/cache\nsock_dir: ${path.dirname(dirs[1]!)}/sock\n`);
      const ours = await runCli("salt-key", ["-c", conf, "--gen-signature"]);
      assert.equal(ours.stdout, "return:\n    True\n", ours.stderr);
      const py = readFileSync(path.join(dirs[0]!, "master_pubkey_signature"));
      assert.ok(py.equals(readFileSync(path.join(dirs[1]!, "master_pubkey_signature"))), `${ref}: the same bytes`);
    }
  });

  test("real 3007 and 3006.8 minions with verify_master_pubkey_sign accept brine with master_use_pubkey_signature and brine's salt-key signature", async () => {
    const first = await startTestMaster({ auto_accept: true, worker_threads: 2 });
    const conf = writeConfigDir(first);
    await first.stop(true);
    const made = await runCli("salt-key", ["-c", conf, "--gen-signature", "--auto-create"]);
    assert.equal(made.stdout, "return:\n    True\n", made.stderr);
    const m = await startTestMaster({ auto_accept: true, worker_threads: 2, master_sign_pubkey: true, master_use_pubkey_signature: true }, first.root);
    const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-gs-"));
    try {
      const signPub = readFileSync(path.join(m.pkiDir, "master_sign.pub"), "utf8");
      placeSignPub(runDir, "gs7", signPub);
      placeSignPub(runDir, "gs6", signPub);
      await Promise.all([startRealMinion(runDir, "gs7", m.retPort, m.publishPort, "3007.x", VERIFY), startRealMinion(runDir, "gs6", m.retPort, m.publishPort, "v3006.8", VERIFY)]);
      const r = await runCli("salt", ["-c", writeConfigDir(m), "*", "test.ping", "--out", "json", "-t", "20"]);
      assert.match(r.stdout, /"gs7": true/, r.stdout + r.stderr);
      assert.match(r.stdout, /"gs6": true/, r.stdout + r.stderr);
      assert.match(readFileSync(path.join(runDir, "minions", "gs7", "log", "minion"), "utf8"), /Received signed and verified master pubkey/);
    } finally {
      stopRealMinions(runDir);
      await m.stop();
    }
  });
});
