/**
 * A publish to a whole fleet of 20,000 minions (issue 17's fleet) names the ones not connected when it was published
 * (`not_connected` in `salt/job/<jid>/new`): the request threads looked the presence up for at most 10,000 matched
 * minions and said nothing of a larger job, silently (the CLI then reported a minion that connected after the publish
 * and never returned "[No response]" instead of "[Not connected]"). The bound is now 100,000
 * (publish.ts notConnectedMinionsMax), and a job past it is logged.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { startTestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import { PublishClient } from "../../tools/swarm/publish-client.js";

const FLEET = 20_000;

test("a publish to 20,000 minions names the 19,999 not connected in its salt/job/<jid>/new", { timeout: 180_000 }, async () => {
  const tm = await startTestMaster({ auto_accept: true });
  const [k] = await testKeys(1);
  const here = fastMinion(tm, "fleet-00000", k!, { sourceIp: "127.0.0.93", grains: { id: "fleet-00000", ipv4: ["127.0.0.93"] } });
  const bus = new EventClient(tm.sockDir);
  const pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey, timeoutMs: 60_000, tries: 1 });
  try {
    await here.start();
    // the rest of the fleet: accepted keys (the connected minion's key under other ids), never connected
    for (let i = 1; i < FLEET; i++) writeFileSync(path.join(tm.pkiDir, "minions", `fleet-${String(i).padStart(5, "0")}`), k!.publicPem);
    await bus.connect();
    const news = new Map<string, Record<string, unknown>>();
    bus.on((e) => {
      const m = /^salt\/job\/(\d+)\/new$/.exec(e.tag);
      if (m) news.set(m[1]!, e.data as Record<string, unknown>);
    });
    const r = await pc.publish({ tgt: "fleet-*", fun: "test.ping" });
    assert.equal(r.minions.length, FLEET);
    for (const end = Date.now() + 30_000; !news.has(r.jid) && Date.now() < end; ) await new Promise((res) => setTimeout(res, 50));
    const nc = news.get(r.jid)?.not_connected;
    assert.ok(Array.isArray(nc), `salt/job/${r.jid}/new names the minions not connected: ${JSON.stringify(Object.keys(news.get(r.jid) ?? {}))}`);
    assert.equal(nc.length, FLEET - 1);
    assert.ok(!nc.includes("fleet-00000"), "the connected minion is not named");
  } finally {
    pc.close();
    bus.close();
    await here.stop();
    await tm.stop();
  }
});
