/**
 * A minion's `_mine_get` follows Salt's RemoteFuncs._mine_get (salt/daemons/masterapi.py, 3007.x): an entry a
 * minion stored with a minion-side ACL (`mine_functions` with `allow_tgt`) is unwrapped for the minions its
 * allow_tgt selects and withheld from the others; the master's `mine_get` ACL limits the functions a minion
 * reads; `fun` names with repeats count once; `expr_form` stands in for a missing tgt_type. Before, brine
 * answered the stored wrapper (data and ACL) to every minion, and ignored `mine_get`.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

/** what salt.utils.mine.wrap_acl_structure stores for a mine function with allow_tgt */
const wrapped = (data: unknown, allowTgt: string, allowTgtType = "glob") => ({ __data__: data, __saltmine_acl__: 1, allow_tgt: allowTgt, allow_tgt_type: allowTgtType });

async function withMaster(cfg: Record<string, unknown>, body: (ms: Record<string, TestMinion>) => Promise<void>): Promise<void> {
  const tm: TestMaster = await startTestMaster({ auto_accept: true, worker_threads: 1, ...cfg });
  const keys = await testKeys(3);
  const ms = { web1: fastMinion(tm, "web1", keys[0]!), db1: fastMinion(tm, "db1", keys[1]!), other: fastMinion(tm, "other", keys[2]!) };
  try {
    for (const m of Object.values(ms)) await m.start();
    const stored = await ms.web1.channel.send(
      { id: "web1", cmd: "_mine", tok: ms.web1.keys.tok, data: { "network.ip_addrs": wrapped(["10.0.0.1"], "db*"), "test.ping": true, "grains.items": { os: "Linux" } } },
      ms.web1.requestOptions,
    );
    assert.equal(stored, true);
    await body(ms);
  } finally {
    for (const m of Object.values(ms)) await m.stop();
    await tm.stop();
  }
}

const mineGet = (m: TestMinion, load: Record<string, unknown>) => m.channel.send({ id: m.id, cmd: "_mine_get", tok: m.keys.tok, ...load }, m.requestOptions);

describe("a minion's mine.get", () => {
  test("an entry stored with allow_tgt is unwrapped for the minions it allows and withheld from the others", async () => {
    await withMaster({}, async (ms) => {
      assert.deepEqual(await mineGet(ms.db1, { tgt: "web1", fun: "network.ip_addrs", tgt_type: "glob" }), { web1: ["10.0.0.1"] });
      assert.deepEqual(await mineGet(ms.other, { tgt: "web1", fun: "network.ip_addrs", tgt_type: "glob" }), {});
      // the dict form: the withheld function is left out, the others answered
      assert.deepEqual(await mineGet(ms.other, { tgt: "web*", fun: "network.ip_addrs,test.ping", tgt_type: "glob" }), { "test.ping": { web1: true } });
      assert.deepEqual(await mineGet(ms.db1, { tgt: "web*", fun: ["network.ip_addrs", "test.ping"], tgt_type: "glob" }), { "network.ip_addrs": { web1: ["10.0.0.1"] }, "test.ping": { web1: true } });
    });
  });

  test("repeated function names count once (one function: the flat form); expr_form stands in for tgt_type", async () => {
    await withMaster({}, async (ms) => {
      assert.deepEqual(await mineGet(ms.other, { tgt: "web1", fun: "test.ping,test.ping" }), { web1: true });
      assert.deepEqual(await mineGet(ms.other, { tgt: "web1,db1", fun: "test.ping", expr_form: "list" }), { web1: true });
      assert.deepEqual(await mineGet(ms.other, { tgt: "web1", fun: "test.ping", tgt_type: 7 }), {});
    });
  });

  test("the master's mine_get ACL limits the functions each minion reads (a minion no rule names reads none)", async () => {
    await withMaster({ mine_get: { "db.*": ["network\\..*"], "other": ["test\\.ping"] } } as Record<string, unknown>, async (ms) => {
      assert.deepEqual(await mineGet(ms.db1, { tgt: "web1", fun: "network.ip_addrs,test.ping" }), { "network.ip_addrs": { web1: ["10.0.0.1"] } });
      assert.deepEqual(await mineGet(ms.other, { tgt: "web1", fun: "grains.items" }), {});
      assert.deepEqual(await mineGet(ms.other, { tgt: "web1", fun: "test.ping" }), { web1: true });
      assert.deepEqual(await mineGet(ms.web1, { tgt: "web1", fun: "test.ping" }), {});
    });
  });
});
