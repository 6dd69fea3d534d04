/**
 * A pillar slower than the minion's request timeout, with real salt-minions (3007.x and 3006.8) against brine: Salt's
 * crypted_transfer_decode_dictentry sends the same `_pillar` bytes again when a try times out (3007.x at once on a new
 * socket, while brine is still rendering the first; 3006.8 once the first reply came back on its socket). brine
 * answers the copy with the first's reply (src/shared/nonce-replies.ts) and renders once; before, it refused the copy
 * as a replay and `pillar.items` failed ("Exception getting pillar"). The minions run with request_channel_timeout 2 s
 * and the ext_pillar takes 4 s. Skips with a message when Salt's source is absent.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

const skip = realSaltSkipReason();
const RENDER_S = 4;
const MINION_TIMEOUT_S = 2;

describe("a pillar slower than the minion's request timeout, real salt-minions against brine", { skip, timeout: 600_000 }, () => {
  let m: TestMaster;
  let conf: string;
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rsp-"));
  const renders = path.join(runDir, "renders");
  const rendered = () => readFileSync(renders, "utf8").split("\n").filter(Boolean);

  before(async () => {
    writeFileSync(renders, "");
    writeFileSync(path.join(runDir, "slow.sh"), `#!/bin/sh\necho "$1" >> ${renders}\nsleep ${RENDER_S}\nprintf '{"slow": "%s"}\\n' "$1"\n`);
    m = await startTestMaster({ auto_accept: true, worker_threads: 4, ext_pillar: [{ cmd_json: `sh ${path.join(runDir, "slow.sh")} %s` }] } as never);
    conf = writeConfigDir(m);
    const extra = `request_channel_timeout: ${MINION_TIMEOUT_S}`;
    await Promise.all([startRealMinion(runDir, "sp-new", m.retPort, m.publishPort, "3007.x", extra), startRealMinion(runDir, "sp-old", m.retPort, m.publishPort, "v3006.8", extra)]);
  });
  after(async () => {
    stopRealMinions(runDir);
    await m?.stop();
  });

  test("pillar.items gets the pillar from both generations, each rendered once per request though the minion sent it twice", async () => {
    const before = rendered().length;
    const r = await runCli("salt", ["-c", conf, "*", "pillar.items", "--out", "json", "-t", "60"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const out = JSON.parse(r.stdout.replace(/}\s*{/g, ",")) as Record<string, Record<string, unknown>>;
    assert.equal(out["sp-new"]?.slow, "sp-new", r.stdout);
    assert.equal(out["sp-old"]?.slow, "sp-old", r.stdout);
    const now = rendered().slice(before);
    assert.deepEqual(now.sort(), ["sp-new", "sp-old"], "one render per minion");
    for (const id of ["sp-new", "sp-old"]) {
      const log = readFileSync(path.join(runDir, "minions", id, "log", "minion"), "utf8");
      assert.doesNotMatch(log, /Exception getting pillar|Pillar timed out/, `${id}'s log`);
    }
  });
});
