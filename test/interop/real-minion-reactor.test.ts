/**
 * A real salt-minion (3007.x) against brine with a reactor (issue #19): `salt m1 event.send my/custom/x word=hi`
 * makes the minion fire `my/custom/x`; the reactor renders its SLS with that event's `tag` and `data` (the shape the
 * Python master gives it: `data['id']`, `data['data']['word']`) and runs `cmd.run` on the same minion, whose return
 * comes back. The same files were run against the Python master (../shared/real-salt) first. Skips with a message
 * when Salt's source is absent.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestMaster } from "../helpers/master.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";

const skip = realSaltSkipReason(["3007.x"]);

test("a real minion's event.send is answered by a reaction running cmd.run on it", { skip, timeout: 300_000 }, async () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-rreact-"));
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-"));
  mkdirSync(path.join(root, "reactor"), { recursive: true });
  const sls = path.join(root, "reactor", "answer.sls");
  writeFileSync(sls, `answer:\n  local.cmd.run:\n    - tgt: {{ data['id'] }}\n    - args:\n      - cmd: "echo {{ data['data']['word'] }} via {{ tag }}"\n`);
  const m = await startTestMaster({ auto_accept: true, worker_threads: 2, reactor: [{ "my/custom/*": [sls] }] } as never, root);
  const ec = new EventClient(m.sockDir);
  try {
    await startRealMinion(runDir, "rr1", m.retPort, m.publishPort, "3007.x");
    await ec.connect();
    const events: BusEvent[] = [];
    ec.on((e) => events.push(e));
    const conf = writeConfigDir(m);
    const r = await runCli("salt", ["-c", conf, "rr1", "event.send", "my/custom/x", "word=hi", "--out", "json", "-t", "30"]);
    assert.match(r.stdout, /"rr1": true/, r.stdout + r.stderr);
    let ret: BusEvent | undefined;
    for (let i = 0; i < 600 && !ret; i++) {
      ret = events.find((e) => /^salt\/job\/\d{20}\/ret\/rr1$/.test(e.tag) && e.data.fun === "cmd.run");
      if (!ret) await new Promise((res) => setTimeout(res, 100));
    }
    assert.ok(ret, "the reaction's cmd.run returned");
    assert.equal(ret.data.return, "hi via my/custom/x");
    const ev = events.find((e) => e.tag === "my/custom/x");
    assert.equal(ev?.data.id, "rr1");
    assert.equal(ev?.data.data.word, "hi");
  } finally {
    ec.close();
    stopRealMinions(runDir);
    await m.stop();
  }
});
