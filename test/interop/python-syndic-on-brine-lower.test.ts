/**
 * Salt's own salt-syndic (3007.x) on a brine lower master, under a brine master of masters: the lower master's
 * `not_connected` (the matched minions it did not see connected when it published) travels up in the Python
 * syndic's forwarded `salt/job/<jid>/new`, so `salt '*'` on the top says "[Not connected]" for a stopped minion
 * below, and answers for the others. Skips with a message when Salt's source is absent.
 */
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { realSaltEnv, realSaltSkipReason, realSaltSource } from "../helpers/real-salt.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { jsonDocs, runCli, writeConfigDir } from "../helpers/cli.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";

const skip = realSaltSkipReason(["3007.x"]);

describe("a Python salt-syndic on a brine lower master, under a brine master of masters", { skip, timeout: 300_000 }, () => {
  let mom: TestMaster | undefined;
  let low: TestMaster | undefined;
  let syndic: ChildProcess | undefined;
  const minions: TestMinion[] = [];
  after(async () => {
    if (syndic?.pid) {
      try {
        process.kill(-syndic.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    for (const m of minions) await m.stop().catch(() => undefined);
    await low?.stop();
    await mom?.stop();
  });

  test("salt '*' on the top reports the stopped minion below [Not connected] and the others' returns", async () => {
    mom = await startTestMaster({ auto_accept: true, order_masters: true, syndic_wait: 3, worker_threads: 2 });
    low = await startTestMaster({ id: "pylow", auto_accept: true, worker_threads: 2 });
    const keys = await testKeys(2);
    for (const [i, id] of ["pl1", "pl2"].entries()) {
      const ip = `127.0.0.${91 + i}`;
      const m = fastMinion(low, id, keys[i]!, { sourceIp: ip, grains: { id, ipv4: [ip] } });
      minions.push(m);
      await m.start();
    }
    // the lower master's settings as Salt's syndic reads them (its master file: ports, sock_dir, cachedir for the
    // root key, the syndic_* options), and a minion file for the syndic's own id and pki_dir
    const conf = path.join(low.root, "pysyndic");
    mkdirSync(conf, { recursive: true });
    const logFile = path.join(low.root, "syndic.log");
    const c = low.cfg;
    writeFileSync(
      path.join(conf, "master"),
      stringify({
        root_dir: "/",
        user: os.userInfo().username,
        interface: "127.0.0.1",
        ret_port: c.ret_port,
        publish_port: c.publish_port,
        pki_dir: c.pki_dir,
        cachedir: c.cachedir,
        sock_dir: c.sock_dir,
        log_file: path.join(low.root, "py-master.log"),
        syndic_master: "127.0.0.1",
        syndic_master_port: mom.retPort,
        syndic_log_file: logFile,
        syndic_pidfile: path.join(low.root, "salt-syndic.pid"),
        syndic_event_forward_timeout: 0.5,
      }),
    );
    const pki = path.join(low.root, "pki", "syndic");
    mkdirSync(pki, { recursive: true });
    writeFileSync(
      path.join(conf, "minion"),
      [`id: pysyn`, `user: ${os.userInfo().username}`, `pki_dir: ${pki}`, `publish_port: ${mom.publishPort}`, `acceptance_wait_time: 1`, `random_reauth_delay: 0`, `log_level_logfile: debug`, `enable_legacy_startup_events: False`].join("\n") + "\n",
    );
    const src = realSaltSource("3007.x");
    const outFile = path.join(low.root, "syndic.out");
    const fd = openSync(outFile, "w");
    syndic = spawn("/usr/bin/python3", [path.join(src, "scripts", "salt-syndic"), "-c", conf, "-l", "warning"], { env: realSaltEnv(src), detached: true, stdio: ["ignore", fd, fd] });
    for (let i = 0; i < 240 && !(existsSync(logFile) && /Syndic successfully connected/.test(readFileSync(logFile, "utf8"))); i++) await new Promise((r) => setTimeout(r, 250));
    assert.match(existsSync(logFile) ? readFileSync(logFile, "utf8") : "", /Syndic successfully connected/, `the Python syndic signed in to the top: ${readFileSync(outFile, "utf8").slice(-1500)}`);

    await minions[1]!.stop();
    await new Promise((r) => setTimeout(r, 300));
    const r = await runCli("salt", ["-c", writeConfigDir(mom), "pl*", "test.ping", "--out", "json", "-t", "5", "--gather-job-timeout", "2"]);
    const out = jsonDocs(r.stdout);
    assert.equal(out.pl1, true, r.stdout + r.stderr);
    assert.equal(out.pl2, "Minion did not return. [Not connected]", r.stdout + r.stderr);
  });
});
