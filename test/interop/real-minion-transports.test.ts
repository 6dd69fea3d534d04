/**
 * Real salt-minions of both generations (3007.x over pyzmq's libzmq 4.3.4; 3006.8) against a brine master on each
 * minion-facing transport, named here explicitly: brine's own ZMTP server (`brine_minion_transport: native`, the
 * default) and libzmq (the rest of the interop suite runs on libzmq with BRINE_TEST_MINION_TRANSPORT=libzmq):
 * sign-in, publishes and returns, frames long enough for ZMTP's 8-byte sizes both ways, AES rotation and
 * re-auth, a master restart followed. Skips with a message when Salt's source is absent. (On one host every
 * minion's address is 127.0.0.1, so "[Not connected]" cannot be told apart here.)
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

for (const transport of ["native", "libzmq"] as const)
describe(`real salt-minions (3007.x and 3006.8) against brine's ${transport} transport`, { skip, timeout: 600_000 }, () => {
  let m: TestMaster;
  let conf: string;
  const runDir = mkdtempSync(path.join(os.tmpdir(), `rsn-${transport}-`));
  const salt = (...a: string[]) => runCli("salt", ["-c", conf, ...a]);

  before(async () => {
    m = await startTestMaster({ auto_accept: true, worker_threads: 2, brine_minion_transport: transport });
    conf = writeConfigDir(m);
    await Promise.all([
      startRealMinion(runDir, "nat-new", m.retPort, m.publishPort, "3007.x"),
      startRealMinion(runDir, "nat-old", m.retPort, m.publishPort, "v3006.8"),
    ]);
  });
  after(async () => {
    stopRealMinions(runDir);
    await m?.stop();
  });

  test("both generations sign in and answer test.ping", async () => {
    const r = await salt("*", "test.ping", "--out", "json", "-t", "20");
    assert.equal(r.code, 0, r.stderr);
    for (const id of ["nat-new", "nat-old"]) assert.match(r.stdout, new RegExp(`"${id}": true`));
  });

  test("a 100 KB argument goes out in the publish and comes back in the return (long ZMTP frames both ways, over several reads)", async () => {
    // (one command-line argument may be at most 128 KiB)
    const big = "z".repeat(100_000);
    const r = await salt("nat-*", "test.echo", big, "--out", "json", "-t", "30");
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout.split("\n").filter(Boolean).join("").replace(/}\s*{/g, ",")) as Record<string, string>;
    assert.equal(out["nat-new"], big);
    assert.equal(out["nat-old"], big);
    const c = await salt("nat-old", "cmd.run", "head -c 300000 /dev/zero | tr '\\0' a", "--out", "json", "-t", "30");
    assert.ok(c.stdout.includes("a".repeat(300_000)), "a 300 KB return from 3006.8");
  });

  test("deleting a key rotates the AES key; the other minion follows; the deleted one signs in again", async () => {
    const d = await runCli("salt-key", ["-c", conf, "-d", "nat-new", "-y"]);
    assert.equal(d.code, 0, d.stderr);
    const r = await salt("nat-old", "test.ping", "--out", "json", "-t", "30");
    assert.match(r.stdout, /"nat-old": true/, r.stdout + r.stderr);
    let ok = false;
    for (let i = 0; i < 6 && !ok; i++) ok = /"nat-new": true/.test((await salt("nat-*", "test.ping", "--out", "json", "-t", "15")).stdout);
    assert.ok(ok, "nat-new signed in again after its key was deleted");
  });

  test("a restarted master (its ports closed and opened again) is followed by both minions", async () => {
    m = await m.restart();
    assert.equal(m.cfg.brine_minion_transport, transport);
    let out = "";
    for (let i = 0; i < 4 && !(/"nat-new": true/.test(out) && /"nat-old": true/.test(out)); i++) out = (await salt("nat-*", "test.ping", "--out", "json", "-t", "20")).stdout;
    assert.match(out, /"nat-new": true/);
    assert.match(out, /"nat-old": true/);
  });
});
