/**
 * §9 events fired by the master itself: `salt/presence/change` and `salt/presence/present` every
 * loop_interval with presence_events (a minion that connects appears in `new`, one that stops in
 * `lost`), and `salt/run/<jid>/new` / `ret` around every runner call.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { startTestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

async function until(events: BusEvent[], pred: (e: BusEvent) => boolean, ms: number): Promise<BusEvent> {
  for (let t = 0; t < ms; t += 100) {
    const e = events.find(pred);
    if (e) return e;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail("event not seen in time");
}

test("presence_events: new on connect, lost on stop, present every interval; runner calls fire salt/run", { timeout: 120_000 }, async () => {
  const tm = await startTestMaster({ auto_accept: true, presence_events: true, loop_interval: 1 });
  const ec = new EventClient(tm.sockDir);
  await ec.connect();
  const events: BusEvent[] = [];
  ec.on((e) => events.push(e));
  const [k] = await testKeys(1);
  const m = fastMinion(tm, "pres-1", k!, { sourceIp: "127.0.0.31", grains: { id: "pres-1", ipv4: ["127.0.0.31"] } });
  try {
    await m.start();
    const gained = await until(events, (e) => e.tag === "salt/presence/change" && e.data.new?.includes("pres-1"), 20_000);
    assert.deepEqual(gained.data.lost, []);
    await until(events, (e) => e.tag === "salt/presence/present" && e.data.present?.includes("pres-1"), 5_000);
    await m.stop();
    const lost = await until(events, (e) => e.tag === "salt/presence/change" && e.data.lost?.includes("pres-1"), 20_000);
    assert.deepEqual(lost.data.new, []);

    const conf = writeConfigDir(tm);
    const r = await runCli("salt-run", ["-c", conf, "jobs.list_jobs", "--out", "json"]);
    assert.equal(r.code, 0, r.stderr);
    const started = await until(events, (e) => /^salt\/run\/\d{20}\/new$/.test(e.tag), 5_000);
    assert.equal(started.data.fun, "runner.jobs.list_jobs");
    const jid = started.tag.split("/")[2];
    const ret = await until(events, (e) => e.tag === `salt/run/${jid}/ret`, 5_000);
    assert.equal(ret.data.success, true);
    assert.deepEqual(ret.data.return, JSON.parse(r.stdout));
  } finally {
    ec.close();
    await m.stop();
    await tm.stop();
  }
});
