/**
 * Replies go out per frame (issue 14): a reply that is ready leaves before the slower frames of its batch,
 * even when they are quick enough that a batch would once have waited for them. The first frame of the batch
 * is a `_pillar` whose `cmd_json` ext_pillar takes 50 ms (a wait in the request thread, not CPU); eight
 * `_master_opts` follow it in the same batch. Before, a batch's replies went together once its slowest frame
 * was done (if within 100 ms), in frame order: the pillar's first. Now the eight leave at once, the pillar's after.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { decodeWire } from "../../src/shared/protocol/msgpack.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys, v3RequestFrame } from "../helpers/minions.js";

describe("a ready reply does not wait for the slower frames of its batch", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let m: TestMinion;
  let k: MinionKeys[];
  let raw: RawClient;
  before(async () => {
    tm = await startTestMaster({ auto_accept: true, worker_threads: 1, ext_pillar: [{ cmd_json: `sleep 0.05; echo '{"slow": true}'` }] });
    k = await testKeys(1);
    m = fastMinion(tm, "perframe", k[0]!);
    await m.start();
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 20_000 });
  });
  after(async () => {
    raw.close();
    await m.stop();
    await tm.stop();
  });

  test("eight _master_opts replies leave before the _pillar sent ahead of them in the same batch", async () => {
    const frame = (load: Record<string, unknown>) => v3RequestFrame(m, k[0]!, load);
    const pillar = frame({ cmd: "_pillar", grains: { id: "perframe" }, saltenv: null, pillarenv: null, pillar_override: {}, extra_minion_data: {}, ver: "2" });
    const opts = Array.from({ length: 8 }, () => frame({ cmd: "_master_opts" }));
    // one DEALER, sent back to back: the request port batches them on one turn
    for (const f of [pillar, ...opts]) await raw.sendOnly([Buffer.alloc(0), f]);
    const kinds: string[] = [];
    for (let i = 0; i < 9; i++) {
      const reply = await raw.receive(20_000);
      // the pillar's is a private reply ({key, pillar}); each _master_opts reply is one AES ciphertext
      const body = decodeWire(reply[reply.length - 1]!);
      kinds.push(Buffer.isBuffer(body) ? "opts" : "pillar");
    }
    assert.deepEqual(kinds, [...Array(8).fill("opts"), "pillar"]);
  });
});
