/**
 * Real salt-minions of both protocol generations (3007.x / envelope v3, 3006.8 / envelope v2) against
 * brine: sign-in, test.ping, test.echo, cmd.run, grain targeting, key deletion → AES rotation →
 * re-auth, master restart → re-auth. Skips with a message when Salt's source is absent.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

const skip = realSaltSkipReason();

describe("real salt-minions (3007.x and 3006.8) against brine", { skip, timeout: 600_000 }, () => {
  let m: TestMaster;
  let conf: string;
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-"));
  const salt = (...a: string[]) => runCli("salt", ["-c", conf, ...a]);

  before(async () => {
    m = await startTestMaster({ auto_accept: true, worker_threads: 2 });
    conf = writeConfigDir(m);
    await Promise.all([startRealMinion(runDir, "new1", m.retPort, m.publishPort, "3007.x"), startRealMinion(runDir, "old1", m.retPort, m.publishPort, "v3006.8")]);
  });
  after(async () => {
    stopRealMinions(runDir);
    await m?.stop();
  });

  test("test.ping returns True from both generations", async () => {
    const r = await salt("*", "test.ping", "--out", "json", "-t", "20");
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /"new1": true/);
    assert.match(r.stdout, /"old1": true/);
  });

  test("test.echo and cmd.run carry arguments and output", async () => {
    const e = await salt("*", "test.echo", "brine says hi", "--out", "json");
    assert.equal((e.stdout.match(/"brine says hi"/g) ?? []).length, 2, e.stdout);
    const c = await salt("old1", "cmd.run", "echo $((6*7))", "--out", "json");
    assert.match(c.stdout, /"old1": "42"/);
  });

  test("grain and compound targeting reach the right generation", async () => {
    const r = await salt("-C", "G@saltversion:3006* or nosuch*", "test.version", "--out", "json");
    assert.match(r.stdout, /"old1": "3006\.8"/);
    assert.doesNotMatch(r.stdout, /new1/);
  });

  test("deleting a key rotates the AES key; the other minion keeps answering; the deleted one re-authenticates", async () => {
    const d = await runCli("salt-key", ["-c", conf, "-d", "new1", "-y"]);
    assert.equal(d.code, 0, d.stderr);
    // rotation happens within the maintenance tick; the old minion must re-auth to follow it
    const r = await salt("old1", "test.ping", "--out", "json", "-t", "30");
    assert.match(r.stdout, /"old1": true/, r.stdout + r.stderr);
    // new1 re-signs in on its next request (auto_accept) — a publish to everyone reaches it again
    let ok = false;
    for (let i = 0; i < 6 && !ok; i++) {
      const all = await salt("*", "test.ping", "--out", "json", "-t", "15");
      ok = /"new1": true/.test(all.stdout);
    }
    assert.ok(ok, "new1 re-authenticated after its key was deleted");
  });

  test("a restarted master (new AES key, same pki and job cache) is followed by both minions", async () => {
    m = await m.restart();
    const r = await salt("*", "test.ping", "--out", "json", "-t", "30");
    assert.match(r.stdout, /"new1": true/);
    assert.match(r.stdout, /"old1": true/);
    const jobs = await runCli("salt-run", ["-c", conf, "jobs.list_jobs", "--out", "json"]);
    assert.ok(Object.keys(JSON.parse(jobs.stdout)).length >= 5, "jobs from before the restart are still listed");
  });
});
