/**
 * brine as the master of masters over Salt's own syndic: brine MoM (order_masters: True) <- Python
 * salt-syndic on a Python lower master <- a real salt-minion, for 3007.x (v3 requests) and 3006.8 (v2). `salt '*'` on brine gets the real
 * minion's return through the syndic, the return is in brine's job cache, and a job published on the lower
 * master comes up too. Skips with a message when Salt's source is absent.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort, startTestMaster, type TestMaster } from "../helpers/master.js";
import { HARNESS, realSaltEnv, realSaltSkipReason, realSaltSource, startRealMinion, stopAtThisProcessEnd, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

const skip = realSaltSkipReason(["3007.x", "v3006.8"]);

function harness(script: string, args: string[], env: Record<string, string> = {}): string {
  const r = spawnSync(path.join(HARNESS, script), args, { env: { ...process.env, ...env }, encoding: "utf8", timeout: 180_000 });
  if (r.status !== 0) throw new Error(`${script} failed: ${(r.stdout + r.stderr).slice(-600)}`);
  return r.stdout;
}

/** Wait until `file` holds `re` (polling; the daemons write their logs as they go). */
async function waitForLog(file: string, re: RegExp, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 250))) {
    if (existsSync(file) && re.test(readFileSync(file, "utf8"))) return true;
  }
  return false;
}

for (const ref of ["3007.x", "v3006.8"]) describe(`brine master of masters over a Python ${ref} salt-syndic and master, with a real minion`, { skip, timeout: 600_000 }, () => {
  let mom: TestMaster;
  let conf: string;
  let syndic: ChildProcess | undefined;
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-mom-"));
  const lowerConf = path.join(runDir, "master", "conf");
  let lowPub = 0;
  let lowRet = 0;

  before(async () => {
    mom = await startTestMaster({ auto_accept: true, order_masters: true, syndic_wait: 5, worker_threads: 2 });
    conf = writeConfigDir(mom);
    lowPub = await freePort();
    lowRet = await freePort();
    stopAtThisProcessEnd(runDir);
    harness("start-master.sh", ["--dir", runDir, String(lowPub), String(lowRet)], {
      SALT_REF: ref,
      SALT_MASTER_EXTRA: `syndic_master: 127.0.0.1\nsyndic_master_port: ${mom.retPort}\nsyndic_log_file: ${runDir}/master/log/syndic\nsyndic_pidfile: ${runDir}/master/run/salt-syndic.pid\nsyndic_event_forward_timeout: 0.5`,
    });
    await startRealMinion(runDir, "low1", lowRet, lowPub, ref);
    // the syndic's own identity (id, pki_dir) comes from a minion file beside the lower master's (salt/config syndic_config)
    mkdirSync(path.join(runDir, "master", "pki", "syndic"), { recursive: true });
    writeFileSync(
      path.join(lowerConf, "minion"),
      [`id: syn1`, `user: ${os.userInfo().username}`, `pki_dir: ${runDir}/master/pki/syndic`, `publish_port: ${mom.publishPort}`, `acceptance_wait_time: 1`, `random_reauth_delay: 0`, `log_level_logfile: debug`, `enable_legacy_startup_events: False`].join("\n") + "\n",
    );
    const src = realSaltSource(ref);
    syndic = spawn("/usr/bin/python3", [path.join(src, "scripts", "salt-syndic"), "-c", lowerConf, "-l", "quiet"], { env: realSaltEnv(src), detached: true, stdio: "ignore" });
    assert.ok(await waitForLog(path.join(runDir, "master", "log", "syndic"), /Syndic successfully connected/, 60_000), "the Python syndic signed in to brine");
  });
  after(async () => {
    if (syndic?.pid) {
      try {
        process.kill(-syndic.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    stopRealMinions(runDir);
    await mom?.stop();
  });

  test("salt '*' on brine gets the real minion's return through the Python syndic, and keeps it in the job cache", async () => {
    const t0 = Date.now();
    const r = await runCli("salt", ["-c", conf, "*", "test.ping", "--out", "json", "-t", "20", "--show-jid"]);
    const took = Date.now() - t0;
    assert.match(r.stdout, /"low1": true/, r.stdout + r.stderr);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(took >= 5000 && took < 15_000, `ends after syndic_wait once every minion reported answered, not at the timeout (${took} ms)`);
    assert.doesNotMatch(r.stdout, /"syn1"/, "the syndic is not reported as a minion that did not answer");
    const jid = /jid: (\d+)/.exec(r.stdout)?.[1];
    assert.ok(jid, r.stdout);
    const look = await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", jid, "--out", "json"]);
    assert.deepEqual(JSON.parse(look.stdout), { low1: true });
  });

  test("a job published on the lower master comes up to brine with its load", async () => {
    const r = harness("salt.sh", ["--dir", runDir, "low1", "test.echo", "from-below", "--out", "json", "--show-jid"], { SALT_REF: ref });
    const jid = /jid: (\d+)/.exec(r)?.[1];
    assert.ok(jid, r);
    let job: { Function?: string; Result?: Record<string, { return: unknown }> } = {};
    for (let i = 0; i < 40 && !job.Result?.low1; i++) {
      await new Promise((res) => setTimeout(res, 500));
      const j = await runCli("salt-run", ["-c", conf, "jobs.list_job", jid, "--out", "json"]);
      job = JSON.parse(j.stdout || "{}");
    }
    assert.equal(job.Function, "test.echo");
    assert.equal(job.Result?.low1?.return, "from-below");
  });
});
