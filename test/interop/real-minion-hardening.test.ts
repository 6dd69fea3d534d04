/**
 * Issue 13 with real salt-minions (3007.x and 3006.8) as the victims and brine's test minion as the
 * attacker: a forged `_minion_event` pretag does not become a real minion's return on the CLI; a v2
 * `_return` in a 3007 minion's name is refused while the 3006.8 minion keeps working; four catastrophic
 * `_mine_get` patterns do not make the real minions' test.ping answer "[No response]". Skips without
 * Salt's source.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

const skip = realSaltSkipReason();
const json = (s: string) => Object.assign({}, ...s.trim().split(/\n(?=\{)/).filter(Boolean).map((b) => JSON.parse(b)));

describe("real salt-minions are not spoken for or stalled by another minion", { skip, timeout: 600_000 }, () => {
  let m: TestMaster;
  let conf: string;
  let k: MinionKeys[];
  let evil: TestMinion;
  let evil2: TestMinion;
  let victimId: TestMinion;
  const raws: RawClient[] = [];
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-hard-"));
  const salt = (...a: string[]) => runCli("salt", ["-c", conf, ...a]);

  before(async () => {
    m = await startTestMaster({ auto_accept: true, worker_threads: 1 });
    conf = writeConfigDir(m);
    await Promise.all([startRealMinion(runDir, "new1", m.retPort, m.publishPort, "3007.x"), startRealMinion(runDir, "old1", m.retPort, m.publishPort, "v3006.8")]);
    k = await testKeys(3);
    evil = fastMinion(m, "evil", k[0]!);
    evil2 = fastMinion(m, "evil2", k[1]!, { protocol: "v2" });
    victimId = fastMinion(m, `${"a".repeat(28)}!`, k[2]!);
    for (const t of [evil, evil2, victimId]) await t.start();
    for (let i = 0; i < 4; i++) raws.push(new RawClient({ host: "127.0.0.1", port: m.retPort, timeoutMs: 120_000 }));
    // both real minions answer before the attacks start
    const r = await salt("-L", "new1,old1", "test.ping", "--out", "json", "-t", "30");
    assert.deepEqual(json(r.stdout), { new1: true, old1: true }, r.stdout + r.stderr);
  });
  after(async () => {
    for (const r of raws) r.close();
    for (const t of [evil, evil2, victimId]) await t?.stop();
    stopRealMinions(runDir);
    await m?.stop();
  });

  test("a pretag forging new1's return is not printed as new1's (Python master: same hole)", async () => {
    const forge = (p: { load: { jid: string } }) => {
      void raws[0]!.aes(
        { cmd: "_minion_event", id: "evil", pretag: `salt/job/${p.load.jid}/ret`, events: [{ tag: "new1", data: { id: "new1", jid: p.load.jid, fun: "test.sleep", fun_args: [3], return: "FORGED", retcode: 0, success: true } }] },
        { key: evil.creds!.session!, id: "evil", keys: k[0] },
      );
    };
    evil.on("publish", forge as never);
    try {
      const r = await salt("-L", "new1,evil", "test.sleep", "3", "--out", "json", "-t", "30");
      assert.deepEqual(json(r.stdout), { new1: true, evil: true }, r.stdout);
    } finally {
      evil.off("publish", forge as never);
    }
  });

  test("a v2 _return naming the 3007 minion is refused; the 3006.8 minion keeps working (Python master: same hole)", async () => {
    const r = await raws[1]!.aes({ cmd: "_return", id: "new1", jid: "20260101000000000123", fun: "test.ping", fun_args: [], return: "FORGED", retcode: 0, success: true }, { key: evil2.creds!.aes, protocol: "v2" });
    assert.equal(r.reply, "bad load");
    const ping = await salt("old1", "test.ping", "--out", "json", "-t", "30");
    assert.deepEqual(json(ping.stdout), { old1: true }, ping.stdout);
  });

  test("four catastrophic _mine_get patterns in flight: both real minions' test.ping answers (issue: '[No response]' for ~22 s)", async () => {
    const attacks = ["(a+)+$", "(a+)+$", "E@(a+)+$", "(a|aa)+$"].map((tgt, i) =>
      raws[i]!.aes({ cmd: "_mine_get", id: "evil", fun: "test.ping", tgt, tgt_type: tgt.startsWith("E@") ? "compound" : "pcre" }, { key: evil.creds!.session!, id: "evil", keys: k[0], timeoutMs: 120_000 }),
    );
    const t0 = performance.now();
    const r = await salt("-L", "new1,old1", "test.ping", "--out", "json", "-t", "10");
    const ms = performance.now() - t0;
    assert.deepEqual(json(r.stdout), { new1: true, old1: true }, r.stdout);
    assert.ok(ms < 8000, `${Math.round(ms)} ms`);
    await Promise.all(attacks);
  });
});
