/**
 * The HTTP API's `local` client on a brine master of masters (order_masters), with a brine syndic and a brine
 * lower master below it, answering as salt-api does on a Python master of masters (checked against one: Python
 * MoM + salt-syndic + lower master + real minions): the call waits syndic_wait and returns the minions below the
 * syndic; a silent minion below the syndic is left out, the top's own matched keys that never return (the
 * syndic's) are false; `local_async` gives a jid even when none of the top's own minions match; the publish
 * passes the call's timeout down (`to`).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { API_SECRET, startApiMaster } from "../helpers/api.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { Syndic } from "../../src/syndic/syndic.js";
import { syndicOptions } from "../../src/syndic/options.js";

async function until(what: string, pred: () => boolean, ms = 30_000): Promise<void> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 100))) if (pred()) return;
  throw new Error(`timed out waiting for ${what}`);
}

describe("the HTTP API's local client on a brine master of masters", { timeout: 180_000 }, () => {
  let mom: TestMaster;
  let low: TestMaster;
  let base: string;
  let syndic: Syndic;
  const minions: TestMinion[] = [];
  const call = async (chunk: Record<string, unknown>) => {
    const r = await fetch(base + "/run", {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify([{ username: "alice", password: API_SECRET, eauth: "sharedsecret", ...chunk }]),
    });
    assert.equal(r.status, 200, await r.clone().text());
    return ((await r.json()) as { return: unknown[] }).return[0] as Record<string, unknown>;
  };

  before(async () => {
    ({ tm: mom, base } = await startApiMaster({ order_masters: true, syndic_wait: 2, gather_job_timeout: 1, worker_threads: 2 }));
    low = await startTestMaster({ id: "apilow", auto_accept: true, worker_threads: 2, syndic_master: `127.0.0.1:${mom.retPort}`, syndic_event_forward_timeout: 0.2 } as never);
    const k = await testKeys(2);
    for (const [i, id] of ["al1", "al2"].entries()) minions.push(fastMinion(low, id, k[i]!));
    await Promise.all(minions.map((m) => m.start()));
    syndic = new Syndic(low.cfg, syndicOptions(low.cfg), { acceptanceWaitMs: 200, busRetryMs: 100 });
    await syndic.start();
    await until("the syndic signed in", () => syndic.connected().length === 1);
  });
  after(async () => {
    await syndic?.stop();
    for (const m of minions) await m.stop();
    await low?.stop();
    await mom?.stop();
  });

  test("local waits syndic_wait and returns the minions below the syndic; the publish carries the call's timeout down", async () => {
    const bus = new EventClient(mom.sockDir);
    await bus.connect();
    const pubs: Record<string, unknown>[] = [];
    bus.on((e) => e.tag.endsWith("/publish") && pubs.push(e.data as Record<string, unknown>));
    try {
      const t0 = Date.now();
      const out = await call({ client: "local", tgt: "al*", fun: "test.ping", timeout: 7 });
      const took = Date.now() - t0;
      assert.deepEqual(out, { al1: true, al2: true });
      assert.ok(took >= 2000 && took < 7000, `waited syndic_wait, not the timeout (${took} ms)`);
      assert.equal(pubs[0]?.to, 7, JSON.stringify(pubs));
    } finally {
      bus.close();
    }
  });

  test("local_async gives the job's jid though none of the top's own minions match", async () => {
    const out = await call({ client: "local_async", tgt: "al*", fun: "test.ping" });
    assert.match(String(out.jid), /^\d{20}$/);
    assert.deepEqual(out.minions, []);
  });

  test("a silent minion below the syndic is left out and the syndic's own key is false, as salt-api on a Python master of masters answers", async () => {
    const al2 = minions.find((m) => m.id === "al2")!;
    await al2.stop();
    try {
      const out = await call({ client: "local", tgt: "*", fun: "test.ping", timeout: 2 });
      assert.deepEqual(out, { al1: true, apilow: false });
    } finally {
      await al2.start();
    }
  });
});
