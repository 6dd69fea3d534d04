/**
 * brine's syndic under Salt's own master of masters: Python salt-master (3007.x, order_masters: True) <- brine
 * salt-syndic <- brine lower master <- a real 3007 salt-minion. Salt's `salt '*'` on the Python master of
 * masters gets the real minion's return through brine, and Salt's job cache has it. Skips with a message when
 * Salt's source is absent.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort, startTestMaster, type TestMaster } from "../helpers/master.js";
import { HARNESS, realSaltSkipReason, startRealMinion, stopAtThisProcessEnd, stopRealMinions } from "../helpers/real-salt.js";
import { Syndic } from "../../src/syndic/syndic.js";
import { syndicOptions } from "../../src/syndic/options.js";

const skip = realSaltSkipReason(["3007.x"]);

/** A harness script, run without blocking this process's event loop (brine's syndic and lower master run in it). */
function harness(script: string, args: string[], env: Record<string, string> = {}): Promise<{ out: string; code: number | null }> {
  return new Promise((resolve) => {
    const p = spawn(path.join(HARNESS, script), args, { env: { ...process.env, SALT_REF: "3007.x", ...env } });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    p.on("close", (code) => resolve({ out, code }));
  });
}

describe("brine syndic under a Python master of masters, with a real minion below brine", { skip, timeout: 600_000 }, () => {
  let low: TestMaster;
  let syndic: Syndic;
  const momDir = mkdtempSync(path.join(os.tmpdir(), "rs-pymom-"));
  const minionDir = mkdtempSync(path.join(os.tmpdir(), "rs-low-"));

  before(async () => {
    const pub = await freePort();
    const ret = await freePort();
    stopAtThisProcessEnd(momDir);
    const started = await harness("start-master.sh", ["--dir", momDir, String(pub), String(ret)], { SALT_MASTER_EXTRA: "order_masters: True\nsyndic_wait: 3" });
    assert.equal(started.code, 0, started.out);
    low = await startTestMaster({ id: "brinelow", auto_accept: true, worker_threads: 2, syndic_master: `127.0.0.1:${ret}`, syndic_event_forward_timeout: 0.2 } as never);
    await startRealMinion(minionDir, "real1", low.retPort, low.publishPort, "3007.x");
    syndic = new Syndic(low.cfg, syndicOptions(low.cfg), { acceptanceWaitMs: 500 });
    await syndic.start();
    for (let i = 0; i < 120 && syndic.connected().length === 0; i++) await new Promise((r) => setTimeout(r, 250));
    assert.equal(syndic.connected().length, 1, "brine's syndic signed in to the Python master of masters");

  });
  after(async () => {
    await syndic?.stop();
    stopRealMinions(minionDir);
    stopRealMinions(momDir);
    await low?.stop();
  });

  test("Salt's salt '*' on the master of masters prints the real minion's return, and Salt's job cache keeps it", async () => {
    const r = await harness("salt.sh", ["--dir", momDir, "real1", "test.ping", "--out", "json", "-t", "20", "--show-jid"]);
    assert.match(r.out, /"real1": true/, r.out);
    const jid = /jid: (\d+)/.exec(r.out)?.[1];
    assert.ok(jid, r.out);
    const look = await harness("salt-run.sh", ["--dir", momDir, "jobs.lookup_jid", jid, "--out", "json"]);
    assert.match(look.out, /"real1": true/, look.out);
  });
});
