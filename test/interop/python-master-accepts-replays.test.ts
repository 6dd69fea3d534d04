/**
 * What the Python master does with a captured or resent minion frame, beside brine (issue #13's replay items, and
 * the genuine resend): the real salt-master 3007.x from Salt's source, and one brine master, each with a
 * 3007-style (v3) and a 3006.8-style (v2) minion signed in (the in-repo protocol-exact minion).
 * - The same `_minion_event` frame sent three times: the Python master acts on every copy (it checks no request
 *   nonce, and its request_server_ttl is off by default); brine answers every copy with the first's reply and fires
 *   the event once (src/shared/nonce-replies.ts). A copy in other bytes (the nonce sealed again) brine refuses.
 * - The same `_pillar` frame twice, as Salt's crypted_transfer_decode_dictentry resends it after a timeout: the
 *   Python master renders the pillar twice (its ext_pillar command counts), brine once; both answer both copies
 *   with a pillar the minion accepts.
 * A Salt 3007 cluster shares nothing that could refuse them either, so the cluster case (one of two masters
 * accepts, test/cluster-e2e/replay-two-masters-at-once) is brine's alone. Skips when Salt's source is not configured.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { newNonce } from "../../src/lib/minion/sign-in.js";
import { openPrivateReply, packageAes } from "../../src/lib/minion/req-channel.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { TestMinion } from "../../src/lib/minion/test-minion.js";
import { freePort, startTestMaster, type TestMaster } from "../helpers/master.js";
import { testKeys } from "../helpers/minions.js";
import { HARNESS, realSaltSkipReason, stopAtThisProcessEnd, stopRealMinions } from "../helpers/real-salt.js";
import { frameAnswer, minionEventFrame } from "../../tools/local-cluster.js";

const skip = realSaltSkipReason(["3007.x"]);

describe("a captured or resent minion frame: the Python master acts on every copy, brine on the first and answers the copies", { skip, timeout: 300_000 }, () => {
  let dir: string;
  let tm: TestMaster;
  let py: { ret: number; pub: number };
  const minions: TestMinion[] = [];

  /** each master's ext_pillar command appends one line per render here */
  const renders = { python: "", brine: "" };
  /** a script that counts its runs in `file` and prints the pillar {"rendered": <minion id>} (no quoting in the configs) */
  const renderCommand = (file: string) => {
    writeFileSync(`${file}.sh`, `#!/bin/sh\necho run >> ${file}\nprintf '{"rendered": "%s"}\\n' "$1"\n`);
    return `sh ${file}.sh %s`;
  };
  const rendered = (file: string) => readFileSync(file, "utf8").split("\n").filter(Boolean).length;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "brine-pyreplay-"));
    renders.python = path.join(dir, "renders-python");
    renders.brine = path.join(dir, "renders-brine");
    writeFileSync(renders.python, "");
    writeFileSync(renders.brine, "");
    py = { ret: await freePort(), pub: await freePort() };
    stopAtThisProcessEnd(dir);
    const r = spawnSync(path.join(HARNESS, "start-master.sh"), ["--dir", dir, String(py.pub), String(py.ret)], {
      env: { ...process.env, SALT_REF: "3007.x", SALT_LOG_LEVEL: "info", SALT_MASTER_EXTRA: `ext_pillar:\n  - cmd_json: ${renderCommand(renders.python)}` },
      encoding: "utf8",
      timeout: 120_000,
    });
    assert.equal(r.status, 0, r.stdout + r.stderr);
    tm = await startTestMaster({ auto_accept: true, ext_pillar: [{ cmd_json: renderCommand(renders.brine) }] } as never);
  });
  after(async () => {
    await Promise.all(minions.map((m) => m.stop()));
    stopRealMinions(dir);
    rmSync(dir, { recursive: true, force: true });
    await tm?.stop();
  });

  const masters = () => ({ python: { ret: py.ret, pub: py.pub }, brine: { ret: tm.retPort, pub: tm.publishPort } });
  const minionOf: Record<string, TestMinion> = {};

  test("the same frame three times, then its nonce sealed again: Python acts on 4 of 4 (v3 and v2); brine answers the 3 copies, acts once, and refuses the nonce in other bytes", async () => {
    const keys = await testKeys(4);
    const got: Record<string, string[]> = {};
    const ec = new EventClient(tm.sockDir);
    await ec.connect();
    const fired: string[] = [];
    ec.on((e) => fired.push(e.tag));
    let k = 0;
    try {
      for (const [name, ports] of Object.entries(masters())) {
        for (const protocol of ["v3", "v2"] as const) {
          const m = new TestMinion({ id: `rp-${name}-${protocol}`, master: "127.0.0.1", retPort: ports.ret, publishPort: ports.pub, keys: keys[k++]!, protocol, acceptanceWaitMs: 500, randomReauthDelayMs: 0, authTimeoutMs: 10_000, requestTimeoutMs: 10_000 });
          minions.push(m);
          minionOf[`${name} ${protocol}`] = m;
          await m.start();
          const nonce = newNonce();
          const f = minionEventFrame(m, protocol, nonce, `rp/replay/${protocol}`);
          const answers: string[] = [];
          for (let i = 0; i < 3; i++) answers.push(await frameAnswer("127.0.0.1", f, ports.ret));
          answers.push(await frameAnswer("127.0.0.1", minionEventFrame(m, protocol, nonce, `rp/replay/${protocol}`), ports.ret));
          got[`${name} ${protocol}`] = answers;
        }
      }
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      ec.close();
    }
    const everyCopy = ["accepted", "accepted", "accepted", "accepted"];
    const sameBytesAnswered = ["accepted", "accepted", "accepted", '"bad load"'];
    assert.deepEqual(got, { "python v3": everyCopy, "python v2": everyCopy, "brine v3": sameBytesAnswered, "brine v2": sameBytesAnswered });
    assert.deepEqual(
      ["v3", "v2"].map((p) => fired.filter((t) => t === `rp/replay/${p}`).length),
      [1, 1],
      "brine fired each event once",
    );
  });

  test("a _pillar frame sent twice, as Salt resends it after a timeout: Python renders twice, brine once; both answer both copies", async () => {
    const got: Record<string, string> = {};
    for (const name of ["python", "brine"] as const) {
      for (const protocol of ["v3", "v2"] as const) {
        const m = minionOf[`${name} ${protocol}`]!;
        const before = rendered(renders[name]);
        const pkg = packageAes(m, { cmd: "_pillar", id: m.id, grains: {}, saltenv: null, pillarenv: null, pillar_override: {}, extra_minion_data: {}, ver: "2" });
        const pillars: unknown[] = [];
        for (let i = 0; i < 2; i++) {
          const raw = new RawClient({ host: "127.0.0.1", port: masters()[name].ret, timeoutMs: 20_000 });
          try {
            pillars.push(openPrivateReply(m, decodeWire(await raw.request(pkg.body)), pkg.nonce));
          } finally {
            raw.close();
          }
        }
        assert.deepEqual(pillars.map((p) => (p as Record<string, unknown>).rendered), [m.id, m.id], `${name} ${protocol}: ${JSON.stringify(pillars)}`);
        got[`${name} ${protocol}`] = `${rendered(renders[name]) - before} render(s)`;
      }
    }
    assert.deepEqual(got, { "python v3": "2 render(s)", "python v2": "2 render(s)", "brine v3": "1 render(s)", "brine v2": "1 render(s)" });
  });
});
