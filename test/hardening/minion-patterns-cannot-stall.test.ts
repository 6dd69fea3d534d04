/**
 * One minion cannot stall the others with a target pattern (issue 13). Four `_mine_get` with
 * `(a+)+$` (pcre, and as E@ / P@ in a compound) against an id of 28 a's and a '!' took Python's `re` and
 * V8's backtracking engine many seconds each, on the lane that serves every minion's returns (Python
 * master: the same catastrophic backtracking in its MWorkers). A minion's patterns now run on V8's
 * linear-time engine, or match nothing when they need backtracking.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { PublishClient } from "../../tools/swarm/publish-client.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys, waitForEvent } from "../helpers/minions.js";
import { pcreMatch } from "../../src/lib/targeting/pcre.js";

const VICTIM_ID = `${"a".repeat(28)}!`;

describe("minion target patterns cannot stall the others", { timeout: 300_000 }, () => {
  let tm: TestMaster;
  let k: MinionKeys[];
  let good: TestMinion;
  let victim: TestMinion;
  let evil: TestMinion;
  const raws: RawClient[] = [];
  let logFile: string;

  before(async () => {
    logFile = path.join(os.tmpdir(), `brine-patterns-${process.pid}.log`);
    tm = await startTestMaster({ auto_accept: true, worker_threads: 1 }, undefined, { logFile });
    k = await testKeys(3);
    good = fastMinion(tm, "good", k[0]!);
    victim = fastMinion(tm, VICTIM_ID, k[1]!, { grains: { id: VICTIM_ID, x: VICTIM_ID } });
    evil = fastMinion(tm, "evil", k[2]!);
    for (const m of [good, victim, evil]) await m.start();
    for (let i = 0; i < 4; i++) raws.push(new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 120_000 }));
  });
  after(async () => {
    for (const r of raws) r.close();
    for (const m of [good, victim, evil]) await m.stop();
    await tm.stop();
  });

  const fromEvil = (i: number, load: Record<string, unknown>) => raws[i]!.aes({ id: "evil", ...load }, { key: evil.creds!.session!, id: "evil", keys: k[2], timeoutMs: 120_000 });

  test("four catastrophic _mine_get patterns in flight: another minion's test.ping still answers within 3 s", async () => {
    const attacks = [
      { tgt: "(a+)+$", tgt_type: "pcre" },
      { tgt: "(a+)+$", tgt_type: "pcre" },
      { tgt: "E@(a+)+$", tgt_type: "compound" },
      { tgt: "P@x:(a+)+$", tgt_type: "compound" },
    ].map((a, i) => fromEvil(i, { cmd: "_mine_get", fun: "test.ping", ...a }));
    await new Promise((r) => setTimeout(r, 50)); // the attacks are ahead of the job
    const pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey });
    try {
      const t0 = performance.now();
      const got = waitForEvent(good, "return", (x) => x.fun === "test.ping", 60_000);
      await pc.publish({ tgt: "good", fun: "test.ping" });
      assert.equal((await got).ret, true);
      const ms = performance.now() - t0;
      assert.ok(ms < 3000, `test.ping took ${Math.round(ms)} ms`);
    } finally {
      pc.close();
    }
    for (const r of await Promise.all(attacks)) assert.deepEqual(r.decrypted, {});
  });

  test("ordinary patterns from a minion keep Salt's pcre semantics; one needing backtracking matches nothing and is logged", async () => {
    assert.equal((await fromEvil(0, { cmd: "_mine", data: { "test.ping": true } })).decrypted, true);
    const get = async (tgt: string, tgt_type: string) => (await fromEvil(0, { cmd: "_mine_get", fun: "test.ping", tgt, tgt_type })).decrypted;
    assert.deepEqual(await get("ev.*", "pcre"), { evil: true });
    assert.deepEqual(await get("evi$", "pcre"), {});
    assert.deepEqual(await get("e[v]il$", "pcre"), { evil: true });
    assert.deepEqual(await get("E@e.il and not good", "compound"), { evil: true });
    assert.deepEqual(await get("e*", "glob"), { evil: true });
    assert.deepEqual(await get("(?i)EV[H-J]L$", "pcre"), { evil: true });
    assert.deepEqual(await get("E@(?i)EVIL and not good", "compound"), { evil: true });
    assert.deepEqual(await get("(e)\\1", "pcre"), {});
    await new Promise((r) => setTimeout(r, 300));
    assert.match(readFileSync(logFile, "utf8"), /_mine_get from evil: pattern "\(e\)\\\\1" needs backtracking/);
  });

  test("an operator's target with the same pattern, against a minion-supplied grain value, falls back to the linear engine", () => {
    // CPU, not wall time (a loaded box stretches the latter): backtracking takes over ten seconds of CPU per call
    const t0 = process.cpuUsage();
    assert.equal(pcreMatch(VICTIM_ID, "(a+)+$"), false);
    assert.equal(pcreMatch(VICTIM_ID, "(?i)(A+)+$"), false);
    assert.equal(pcreMatch(`${"a".repeat(28)}`, "(a+)+$"), true);
    const cpu = process.cpuUsage(t0);
    assert.ok(cpu.user + cpu.system < 5_000_000, `${Math.round((cpu.user + cpu.system) / 1000)} ms of CPU`);
  });
});
