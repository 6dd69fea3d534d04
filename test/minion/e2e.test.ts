/**
 * The test minion against a brine master running in this process: v3 and v2 minions start (auth, SUB,
 * _pillar, start events), answer publishes from a root-key publish client, are refused with the right coded
 * reason when pending or rejected, sign in again when the master restarts with a new AES key, and resend
 * after "bad load" when their key was deleted.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import { isBrineError } from "../../src/shared/errors.js";
import { keyPool, type MinionKeys } from "../../src/lib/minion/keys.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { PublishClient } from "../../tools/swarm/publish-client.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { TEST_KEY_DIR, fastMinion, waitForEvent } from "../helpers/minions.js";

const KEY_DIR = TEST_KEY_DIR;

describe("test minion ⇄ brine master", () => {
  let keys: MinionKeys[] = [];
  before(async () => {
    keys = (await keyPool(6, { dir: KEY_DIR })).keys;
  });

  describe("auto_accept master", () => {
    let tm: TestMaster;
    let pc: PublishClient;
    const minions: TestMinion[] = [];
    before(async () => {
      tm = await startTestMaster({ auto_accept: true });
      pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey });
    });
    after(async () => {
      for (const m of minions) await m.stop();
      pc.close();
      await tm.stop();
    });

    test("v3 and v2 minions start and answer test.ping / test.echo / saltutil.find_job", async () => {
      const v3 = fastMinion(tm, "e2e-v3", keys[0]!, { protocol: "v3" });
      const v2 = fastMinion(tm, "e2e-v2", keys[1]!, { protocol: "v2", sourceIp: "127.0.0.2" });
      minions.push(v3, v2);
      await Promise.all([v3.start(), v2.start()]);
      assert.ok(v3.creds?.session, "v3 got a session key");
      assert.ok(existsSync(path.join(tm.pkiDir, "minions", "e2e-v3")));

      const pings = [waitForEvent(v3, "return", (r) => r.fun === "test.ping"), waitForEvent(v2, "return", (r) => r.fun === "test.ping")];
      const pub = await pc.publish({ tgt: "e2e-*", fun: "test.ping" });
      assert.deepEqual(pub.minions.sort(), ["e2e-v2", "e2e-v3"]);
      const rets = await Promise.all(pings);
      for (const r of rets as any[]) assert.equal(r.jid, pub.jid);

      const echo = waitForEvent(v2, "return", (r) => r.fun === "test.echo");
      await pc.publish({ tgt: ["e2e-v2"], tgt_type: "list", fun: "test.echo", arg: ["hi"] });
      assert.equal((await echo).ret, "hi");

      const slept = waitForEvent(v3, "return", (r) => r.fun === "test.sleep");
      const sleepJob = await pc.publish({ tgt: "e2e-v3", fun: "test.sleep", arg: ["1"] });
      const found = waitForEvent(v3, "return", (r) => r.fun === "saltutil.find_job");
      await pc.publish({ tgt: ["e2e-v3"], tgt_type: "list", fun: "saltutil.find_job", arg: [sleepJob.jid] });
      const rec = (await found).ret;
      assert.equal(rec.jid, sleepJob.jid);
      assert.equal(rec.fun, "test.sleep");
      assert.equal((await slept).ret, true);
      assert.equal(v3.stats.returnFailures + v2.stats.returnFailures, 0);
    });

    test("grain and compound targets are matched by the minion itself", async () => {
      const m = fastMinion(tm, "e2e-grain", keys[2]!, { grains: { id: "e2e-grain", os: "Debian", roles: ["db"] } });
      minions.push(m);
      await m.start();
      const got = waitForEvent(m, "return", (r) => r.fun === "test.arg");
      await pc.publish({ tgt: "G@roles:db and e2e-g*", tgt_type: "compound", fun: "test.arg", arg: ["a", "k=1"] });
      assert.deepEqual((await got).ret, { args: ["a"], kwargs: { k: 1 } });
    });
  });

  test("pending key: start() rejects MINION_AUTH_PENDING, then succeeds once the key is accepted", async () => {
    const tm = await startTestMaster({ auto_accept: false });
    const m = fastMinion(tm, "e2e-pend", keys[3]!, { authDeadlineMs: 400 });
    try {
      const seen: string[] = [];
      m.on("auth", (a) => seen.push(a.result));
      await assert.rejects(m.start(), (e: unknown) => isBrineError(e, "MINION_AUTH_PENDING"));
      assert.ok(seen.length >= 1 && seen.every((r) => r === "pending"), seen.join());
      const pre = path.join(tm.pkiDir, "minions_pre", "e2e-pend");
      assert.ok(existsSync(pre));
      mkdirSync(path.join(tm.pkiDir, "minions"), { recursive: true });
      writeFileSync(path.join(tm.pkiDir, "minions", "e2e-pend"), keys[3]!.pub);
      rmSync(pre);
      await m.start();
      assert.ok(m.running);
    } finally {
      await m.stop();
      await tm.stop();
    }
  });

  test("rejected key: start() rejects MINION_AUTH_REJECTED", async () => {
    const tm = await startTestMaster({ auto_accept: true });
    mkdirSync(path.join(tm.pkiDir, "minions_rejected"), { recursive: true });
    writeFileSync(path.join(tm.pkiDir, "minions_rejected", "e2e-rej"), keys[2]!.pub);
    const m = fastMinion(tm, "e2e-rej", keys[2]!);
    try {
      await assert.rejects(m.start(), (e: unknown) => isBrineError(e, "MINION_AUTH_REJECTED"));
      assert.equal(m.running, false);
    } finally {
      await m.stop();
      await tm.stop();
    }
  });

  async function publishUntil(tm: TestMaster, m: TestMinion, fun: string): Promise<any> {
    const pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey });
    try {
      const ret = waitForEvent(m, "return", (r) => r.fun === fun, 20_000);
      // the SUB socket reconnects by itself after a restart; publish until this minion has seen one
      for (let i = 0; i < 60; i++) {
        await pc.publish({ tgt: m.id, fun });
        const got = await Promise.race([ret, new Promise((r) => setTimeout(r, 250))]);
        if (got) return got;
      }
      return ret;
    } finally {
      pc.close();
    }
  }

  test("master restart (new AES key): a publish that does not decrypt → re-auth → the same publish answered", async () => {
    let tm = await startTestMaster({ auto_accept: true });
    const m = fastMinion(tm, "e2e-rot", keys[5]!);
    try {
      await m.start();
      const aesBefore = m.creds!.aes;
      const reauths: string[] = [];
      m.on("reauth", (r) => reauths.push(r.reason));
      tm = await tm.restart();
      const got = await publishUntil(tm, m, "test.ping");
      assert.equal(got.ret, true);
      assert.notEqual(m.creds!.aes, aesBefore, "the re-auth brought the new AES key");
      assert.ok(reauths.includes("publish did not decrypt"), reauths.join());
      assert.equal(m.stats.returnFailures, 0);
    } finally {
      await m.stop();
      await tm.stop();
    }
  });

  test('key deleted while the master was down: a request gets "bad load" → re-auth → resend succeeds', async () => {
    let tm = await startTestMaster({ auto_accept: true });
    const m = fastMinion(tm, "e2e-del", keys[4]!);
    try {
      await m.start();
      await tm.stop(true);
      rmSync(path.join(tm.pkiDir, "minions", "e2e-del")); // salt-key -d while the master is down
      tm = await startTestMaster({ auto_accept: true, ret_port: tm.retPort, publish_port: tm.publishPort }, tm.root);
      const bad = waitForEvent(m, "badLoad", () => true);
      await m.fireEvent("e2e/custom", { x: 1 }); // resolves only if the resend after re-auth got a good reply
      await bad;
      assert.equal(m.stats.badLoads, 1);
      assert.ok(existsSync(path.join(tm.pkiDir, "minions", "e2e-del")), "the re-auth registered the key again");
    } finally {
      await m.stop();
      await tm.stop();
    }
  });
});
