/**
 * No request, event or runner result can take the master down. A salt-master process runs with a preload
 * (test/helpers/fault-hook.ts) that, on demand, makes every minion request handler throw or reject, the key
 * store and the root key throw (so `_auth` and `publish` fail), and adds runners that throw, reject, return a
 * value msgpack cannot encode, or end their thread. Every request is answered, every runner call ends with an
 * error, the process stays alive, and once the faults stop the same minion runs a job through `salt`.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { CLI_DIR, runCli, writeConfigDir } from "../helpers/cli.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { formatJid } from "../../src/shared/protocol/jid.js";

const HOOK = new URL("../helpers/fault-hook.js", import.meta.url).pathname;
const AES_CMDS = ["_return", "_pillar", "_minion_event", "_master_opts", "_mine", "_mine_get", "_mine_delete", "_mine_flush", "_file_envs", "_file_find", "_file_hash", "_file_hash_and_stat", "_serve_file", "_file_list", "_dir_list", "_file_list_emptydirs", "_symlink_list", "_master_tops"];

describe("nothing a minion, a client or a runner does takes the master down", { timeout: 300_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  let master: ChildProcess;
  let minion: TestMinion;
  let faults: string;
  let minionKeys: MinionKeys;
  let out = "";

  before(async () => {
    // a master's directories and config, then the same master as its own process, with the preload
    tm = await startTestMaster({ auto_accept: true });
    await tm.stop(true);
    conf = writeConfigDir(tm);
    faults = path.join(tm.root, "faults-on");
    master = spawn(process.execPath, ["--import", HOOK, new URL("salt-master.js", CLI_DIR).pathname, "-c", conf, "-l", "critical"], { env: { ...process.env, BRINE_FAULT_FILE: faults }, stdio: ["ignore", "pipe", "pipe"] });
    master.stdout!.on("data", (d) => (out += d));
    master.stderr!.on("data", (d) => (out += d));
    await new Promise<void>((resolve, reject) => {
      const t = setInterval(() => {
        if (out.includes("ready")) resolve(clearInterval(t));
        else if (master.exitCode !== null) reject(new Error(`master exited: ${out}`));
      }, 100);
    });
    const [k] = await testKeys(1);
    minionKeys = k!;
    minion = fastMinion(tm, "fault-minion", k!);
    await minion.start();
  });
  after(async () => {
    await minion?.stop();
    master?.kill("SIGTERM");
    await new Promise((r) => (master.exitCode !== null ? r(null) : master.once("exit", r)));
    rmSync(tm.root, { recursive: true, force: true });
  });

  test("with every handler failing, every minion request is answered and the process lives", async () => {
    writeFileSync(faults, "");
    const raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 15_000 });
    try {
      for (const cmd of AES_CMDS) {
        const load = { cmd, id: minion.id, tgt: "*", fun: "x", path: "top.sls", saltenv: "base", tag: "t", data: {}, jid: "20260101000000000000", return: true };
        // the master answers (any reply: the refusal or the exception text); no answer would be a timeout here
        const r = await raw.aes(load, { key: minion.creds!.session!, id: minion.id, keys: minionKeys });
        assert.ok(r.reply !== undefined, cmd);
        assert.equal(master.exitCode, null, `${cmd} took the master down: ${out}`);
      }
      const auth = await raw.clear({ cmd: "_auth", id: "someone-else", pub: "x", token: "y" });
      assert.ok(auth !== undefined);
    } finally {
      raw.close();
    }
    const pub = await runCli("salt", ["-c", conf, "*", "test.ping", "-t", "5"]);
    assert.notEqual(pub.code, null, "salt got an answer");
    assert.equal(master.exitCode, null, out);
  });

  for (const fun of ["test.throws", "test.rejects", "test.unencodable", "test.exits"]) {
    test(`a runner ${fun.slice(5)}: salt-run gets an error and the master serves on`, async () => {
      const r = await runCli("salt-run", ["-c", conf, fun], { timeoutMs: 60_000 });
      assert.equal(r.code, 1, r.stdout + r.stderr);
      assert.ok(r.stderr.trim().length > 0);
      assert.equal(master.exitCode, null, out);
    });
  }

  test("request worker threads failing outside any task: the master logs it and serves on", async () => {
    writeFileSync(`${faults}.idle-crash`, "");
    await new Promise((r) => setTimeout(r, 1500));
    rmSync(`${faults}.idle-crash`, { force: true });
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(master.exitCode, null, out);
  });

  test("a publish the publisher thread cannot seal is dropped and logged; the master serves on", async () => {
    rmSync(faults, { force: true }); // the handlers work again: only the publisher fails
    writeFileSync(`${faults}.publisher`, "");
    try {
      const r = await runCli("salt", ["-c", conf, "fault-minion", "test.ping", "-t", "2", "--gather-job-timeout", "2"]);
      assert.match(r.stdout, /did not return/, r.stdout + r.stderr);
      assert.equal(master.exitCode, null, out);
    } finally {
      rmSync(`${faults}.publisher`, { force: true });
    }
  });

  test("a request worker that ends in the middle of a batch: its request is answered with Salt's error and the death logged, a return acknowledged before is still stored, and another worker serves the lane", async () => {
    rmSync(faults, { force: true });
    const raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 30_000 });
    const as = { key: minion.creds!.session!, id: minion.id, keys: minionKeys };
    const ret = (jid: string) => raw.aes({ cmd: "_return", id: minion.id, jid, fun: "test.ping", fun_args: [], return: true, retcode: 0, success: true }, as);
    const first = formatJid(Date.now() - 2000, 0);
    const second = formatJid(Date.now() - 1000, 0);
    try {
      assert.equal((await ret(first)).decrypted, null, "the first return acknowledged (stored)");
      writeFileSync(`${faults}.worker-exit`, "");
      const dying = await raw.aes({ cmd: "_minion_event", id: minion.id, tag: "fault/exit", data: {} }, as);
      assert.equal(dying.reply, "Some exception handling minion payload");
      rmSync(`${faults}.worker-exit`, { force: true });
      assert.equal((await ret(second)).decrypted, null, "a worker took the lane again and stored the second return");
    } finally {
      rmSync(`${faults}.worker-exit`, { force: true });
      raw.close();
    }
    for (const jid of [first, second]) {
      const r = await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", jid, "--out", "json"]);
      assert.deepEqual(JSON.parse(r.stdout), { "fault-minion": true }, `${jid}: ${r.stdout}${r.stderr}`);
    }
    assert.match(readFileSync(tm.cfg.log_file, "utf8"), /req lane batch failed: .*exit/i);
    assert.equal(master.exitCode, null, out);
  });

  test("once the faults stop, the same minion runs a job and salt-run answers", async () => {
    rmSync(faults, { force: true });
    const r = await runCli("salt", ["-c", conf, "fault-minion", "test.ping", "--out", "json", "-t", "20"]);
    assert.deepEqual(JSON.parse(r.stdout), { "fault-minion": true }, r.stdout + r.stderr);
    const jobs = await runCli("salt-run", ["-c", conf, "jobs.list_jobs", "--out", "json"]);
    assert.equal(jobs.code, 0, jobs.stderr);
    assert.equal(master.exitCode, null, out);
  });
});
