/**
 * A genuine resend is answered, not refused as a replay (src/shared/nonce-replies.ts): the same request bytes sent
 * again, on a new connection as Salt 3007's REQ client does after a timeout, get the reply the first copy got and are
 * acted on once; the same nonce in other bytes is still refused. v3 (3007) and v2 (3006.8) minions, one master.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { openAesReply, openPrivateReply, packageAes } from "../../src/lib/minion/req-channel.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import type { BusEvent } from "../../src/shared/event-frame.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

/** One request on a connection of its own (a resend after a timeout comes on a new socket in Salt 3007). */
async function ask(tm: TestMaster, body: Buffer): Promise<Buffer> {
  const raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 20_000 });
  try {
    return await raw.request(body);
  } finally {
    raw.close();
  }
}

describe("a resent request", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let ec: EventClient;
  const events: BusEvent[] = [];
  const minions: Record<"v3" | "v2", TestMinion> = {} as Record<"v3" | "v2", TestMinion>;
  let runs: string;
  let logFile: string;

  before(async () => {
    runs = path.join(os.tmpdir(), `brine-resend-runs-${process.pid}`);
    writeFileSync(runs, "");
    logFile = path.join(os.tmpdir(), `brine-resend-${process.pid}.log`);
    // a pillar that takes a second to render and counts its renders: a resend comes while the first is in flight
    const slow = `sh -c 'echo run >> ${runs}; sleep 1; echo "{\\"slow\\": \\"%s\\"}"'`;
    tm = await startTestMaster({ auto_accept: true, worker_threads: 4, ext_pillar: [{ cmd_json: slow }] } as never, undefined, { logFile });
    ec = new EventClient(tm.sockDir);
    await ec.connect();
    ec.on((e) => events.push(e));
    const k = await testKeys(2);
    minions.v3 = fastMinion(tm, "rs-v3", k[0]!, { protocol: "v3" });
    minions.v2 = fastMinion(tm, "rs-v2", k[1]!, { protocol: "v2" });
    await minions.v3.start();
    await minions.v2.start();
  });
  after(async () => {
    ec?.close();
    await minions.v3?.stop();
    await minions.v2?.stop();
    await tm?.stop();
  });

  for (const protocol of ["v3", "v2"] as const) {
    test(`${protocol}: a _return sent twice is stored once, fires one event, and both copies get the same reply`, async () => {
      const m = minions[protocol];
      const jid = protocol === "v3" ? "20260101000000000101" : "20260101000000000102";
      const pkg = packageAes(m, { cmd: "_return", id: m.id, jid, fun: "test.ping", fun_args: [], return: true, retcode: 0, success: true });
      const first = await ask(tm, pkg.body);
      const second = await ask(tm, pkg.body);
      assert.deepEqual(second, first, "the copy gets the first's reply, byte for byte");
      assert.equal(openAesReply(m.requestCrypticle()!, decodeWire(second), pkg.nonce), null, "and it opens with the request's key and nonce");
      await new Promise((r) => setTimeout(r, 300));
      const rets = events.filter((e) => e.tag === `salt/job/${jid}/ret/${m.id}`);
      assert.equal(rets.length, 1, "one return event, not two");
      // the same nonce sealed again (other bytes: a new IV) is a replay, refused as before
      const resealed = packageAes(m, { cmd: "_return", id: m.id, jid, fun: "test.ping", fun_args: [], return: true, retcode: 0, success: true }, { nonce: pkg.nonce, ...(pkg.inner.ts !== undefined ? { ts: pkg.inner.ts as number } : {}) });
      assert.notDeepEqual(resealed.body, pkg.body);
      assert.equal(decodeWire(await ask(tm, resealed.body)), "bad load");
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(events.filter((e) => e.tag === `salt/job/${jid}/ret/${m.id}`).length, 1);
      assert.match(readFileSync(logFile, "utf8"), /Replayed request refused: "_return" from rs-v[23] reused nonce [0-9a-f]{32} in other bytes/);
    });

    test(`${protocol}: a _pillar resent while the first is still rendering waits for it: one render, the same signed reply for both`, async () => {
      const m = minions[protocol];
      const before = readFileSync(runs, "utf8").split("\n").filter(Boolean).length;
      const pkg = packageAes(m, { cmd: "_pillar", id: m.id, grains: {}, saltenv: null, pillarenv: null, pillar_override: {}, extra_minion_data: {}, ver: "2" });
      const first = ask(tm, pkg.body);
      await new Promise((r) => setTimeout(r, 300)); // the first is rendering (its ext_pillar sleeps 1 s)
      const second = ask(tm, pkg.body);
      const [a, b] = await Promise.all([first, second]);
      assert.deepEqual(b, a, "the copy gets the first's reply");
      const pillar = openPrivateReply(m, decodeWire(b), pkg.nonce) as Record<string, unknown>;
      assert.equal(pillar.slow, m.id);
      const renders = readFileSync(runs, "utf8").split("\n").filter(Boolean).length - before;
      assert.equal(renders, 1, "rendered once");
    });
  }

  test("a copy of a request answered before the master restarted is refused promptly (nothing remembered)", async () => {
    const m = minions.v3;
    const pkg = packageAes(m, { cmd: "_minion_event", id: m.id, tag: "rs/before-restart", data: {} });
    assert.deepEqual(await ask(tm, pkg.body), await ask(tm, pkg.body));
    await m.stop();
    await minions.v2.stop();
    ec.close();
    tm = await tm.restart();
    const t0 = Date.now();
    assert.equal(decodeWire(await ask(tm, pkg.body)), "bad load");
    assert.ok(Date.now() - t0 < 5000, `answered in ${Date.now() - t0} ms`);
  });
});
