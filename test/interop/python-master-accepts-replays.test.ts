/**
 * What the Python master does with a captured minion frame, beside brine (issue #13's replay items): the real
 * salt-master 3007.x from Salt's source, and one brine master, each with a 3007-style (v3) and a 3006.8-style
 * (v2) minion signed in (the in-repo protocol-exact minion). The same captured `_minion_event` frame is sent
 * three times to each: the Python master accepts every copy (it checks no request nonce, and its
 * request_server_ttl is off by default), brine accepts the first and refuses the others. A Salt 3007 cluster
 * shares nothing that could refuse them either, so the cluster case (one of two masters accepts,
 * test/cluster-e2e/replay-two-masters-at-once) is brine's alone. Skips when Salt's source is not configured.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { TestMinion } from "../../src/lib/minion/test-minion.js";
import { freePort, startTestMaster, type TestMaster } from "../helpers/master.js";
import { testKeys } from "../helpers/minions.js";
import { HARNESS, realSaltSkipReason } from "../helpers/real-salt.js";
import { frameAnswer, minionEventFrame } from "../../tools/local-cluster.js";

const skip = realSaltSkipReason(["3007.x"]);

describe("a captured minion frame: the Python master accepts every copy, brine only the first", { skip, timeout: 300_000 }, () => {
  let dir: string;
  let tm: TestMaster;
  let py: { ret: number; pub: number };
  const minions: TestMinion[] = [];

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "brine-pyreplay-"));
    py = { ret: await freePort(), pub: await freePort() };
    const r = spawnSync(path.join(HARNESS, "start-master.sh"), ["--dir", dir, String(py.pub), String(py.ret)], {
      env: { ...process.env, SALT_REF: "3007.x", SALT_LOG_LEVEL: "info" },
      encoding: "utf8",
      timeout: 120_000,
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    tm = await startTestMaster({ auto_accept: true });
  });
  after(async () => {
    await Promise.all(minions.map((m) => m.stop()));
    spawnSync(path.join(HARNESS, "stop-all.sh"), ["--dir", dir], { env: { ...process.env, SALT_STOP_WAIT: "0" }, timeout: 60_000 });
    rmSync(dir, { recursive: true, force: true });
    await tm?.stop();
  });

  test("the same frame three times: Python accepts 3 of 3 (v3 and v2), brine 1 of 3", async () => {
    const keys = await testKeys(4);
    const masters = { python: { ret: py.ret, pub: py.pub }, brine: { ret: tm.retPort, pub: tm.publishPort } };
    const got: Record<string, string[]> = {};
    let k = 0;
    for (const [name, ports] of Object.entries(masters)) {
      for (const protocol of ["v3", "v2"] as const) {
        const m = new TestMinion({ id: `rp-${name}-${protocol}`, master: "127.0.0.1", retPort: ports.ret, publishPort: ports.pub, keys: keys[k++]!, protocol, acceptanceWaitMs: 500, randomReauthDelayMs: 0, authTimeoutMs: 10_000, requestTimeoutMs: 10_000 });
        minions.push(m);
        await m.start();
        const f = minionEventFrame(m, protocol, newNonce(), "rp/replay");
        const answers: string[] = [];
        for (let i = 0; i < 3; i++) answers.push(await frameAnswer("127.0.0.1", f, ports.ret));
        got[`${name} ${protocol}`] = answers;
      }
    }
    const accepted = ["accepted", "accepted", "accepted"];
    const once = ["accepted", '"bad load"', '"bad load"'];
    assert.deepEqual(got, { "python v3": accepted, "python v2": accepted, "brine v3": once, "brine v2": once });
  });
});
