/**
 * Per-minion bounds with Salt-style option names (issue 13): `mine_max_size` (MiB of mine data one
 * minion keeps; one minion once stored 240 MB) and `max_pending_keys` (keys waiting in minions_pre).
 * Python master: neither bound exists. Each refusal is logged.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { decodeWire, isMap, type WireValue } from "../../src/shared/protocol/msgpack.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

async function logged(file: string, re: RegExp): Promise<void> {
  for (let i = 0; i < 40; i++) {
    if (existsSync(file) && re.test(readFileSync(file, "utf8"))) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`no log line matching ${re}`);
}

describe("mine_max_size", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let m: TestMinion;
  let k: MinionKeys[];
  let raw: RawClient;
  let logFile: string;
  before(async () => {
    logFile = path.join(os.tmpdir(), `brine-mine-bound-${process.pid}.log`);
    tm = await startTestMaster({ auto_accept: true, mine_max_size: 1 } as never, undefined, { logFile });
    k = await testKeys(1);
    m = fastMinion(tm, "miner", k[0]!);
    await m.start();
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 10_000 });
  });
  after(async () => {
    raw.close();
    await m.stop();
    await tm.stop();
  });
  const send = async (load: Record<string, unknown>) => (await raw.aes({ id: "miner", ...load }, { key: m.creds!.session!, id: "miner", keys: k[0] })).decrypted;

  test("a _mine that would take one minion's mine data over mine_max_size is refused and logged; what it had stays", async () => {
    const chunk = "x".repeat(600 * 1024);
    assert.equal(await send({ cmd: "_mine", data: { "f.one": chunk } }), true);
    assert.equal(await send({ cmd: "_mine", data: { "f.two": chunk } }), false);
    assert.equal(await send({ cmd: "_mine", data: { "f.big": "y".repeat(2 * 1024 * 1024) } }), false);
    const got = (await send({ cmd: "_mine_get", tgt: "miner", fun: "f.one,f.two,f.big" })) as Record<string, Record<string, unknown>>;
    assert.equal(got["f.one"]!.miner, chunk);
    // nothing of the refused ones was stored: as in Salt's _mine_get, a function no targeted minion has is left out
    assert.deepEqual(Object.keys(got), ["f.one"]);
    // replacing (clear) within the bound works
    assert.equal(await send({ cmd: "_mine", clear: true, data: { "f.two": chunk } }), true);
    await logged(logFile, /_mine from miner refused: its mine data would be \d+ bytes, over mine_max_size \(1048576 bytes\)/);
  });
});

describe("max_pending_keys", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let raw: RawClient;
  let k: MinionKeys[];
  let logFile: string;
  before(async () => {
    logFile = path.join(os.tmpdir(), `brine-pending-bound-${process.pid}.log`);
    tm = await startTestMaster({ max_pending_keys: 2, brine_auth_stale_ms: 60_000 } as never, undefined, { logFile });
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 10_000 });
    k = await testKeys(3);
  });
  after(async () => {
    raw.close();
    await tm.stop();
  });
  const ret = (r: WireValue): unknown => {
    assert.ok(isMap(r));
    const load = isMap(r.load) ? r.load : decodeWire(r.load as Buffer);
    return isMap(load) ? load.ret : undefined;
  };
  const auth = (id: string, i: number) => raw.clear({ cmd: "_auth", id, nonce: "0".repeat(32), pub: k[i]!.pub, enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA1" });

  test("past max_pending_keys a new minion's key is answered 'full' and not written; known pending minions still get their answer", async () => {
    assert.equal(ret(await auth("p1", 0)), true);
    assert.equal(ret(await auth("p2", 1)), true);
    assert.equal(ret(await auth("p3", 2)), "full");
    assert.deepEqual(readdirSync(path.join(tm.pkiDir, "minions_pre")).sort(), ["p1", "p2"]);
    assert.equal(ret(await auth("p1", 0)), true);
    await logged(logFile, /Authentication of p3 refused: max_pending_keys \(2\)/);
  });
});
