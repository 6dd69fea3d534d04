/**
 * The raw client sends what it is told and hands back what the master answers: undecodable frames,
 * foreign envelopes, AES loads under the wrong key, a publish with a wrong root key, and a well-formed
 * v3 request from a signed-in minion's credentials (and the same with a foreign tok, or none).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import os from "node:os";
import path from "node:path";
import { generateKeyString } from "../../src/shared/protocol/crypticle.js";
import { decodeWire, isMap } from "../../src/shared/protocol/msgpack.js";
import { keyPool, type MinionKeys } from "../../src/lib/minion/keys.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { TestMinion } from "../../src/lib/minion/test-minion.js";
import { isBrineError } from "../../src/shared/errors.js";
import { freePort, startTestMaster, type TestMaster } from "../helpers/master.js";

describe("raw client ⇄ brine master", () => {
  let tm: TestMaster;
  let raw: RawClient;
  let keys: MinionKeys[];
  before(async () => {
    keys = (await keyPool(2, { dir: path.join(os.tmpdir(), "brine-test-minion-keys") })).keys;
    tm = await startTestMaster({ auto_accept: true });
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 5000 });
  });
  after(async () => {
    raw.close();
    await tm.stop();
  });

  test("garbage and foreign envelopes get Salt's refusals", async () => {
    assert.deepEqual(decodeWire(await raw.request(Buffer.from([0xc1]))), { msg: "bad load" });
    assert.equal(await raw.requestDecoded({ hello: 1 }), "bad load");
    const r = await raw.aes({ cmd: "_return", id: "nobody" }, { key: generateKeyString(), id: "nobody" });
    assert.equal(r.reply, "bad load");
    assert.ok(r.openError);
  });

  test("a publish with the wrong root key is refused; the right one is accepted", async () => {
    const load = { cmd: "publish", tgt: "*", fun: "test.ping", arg: [], tgt_type: "glob", ret: "", jid: "", kwargs: {}, user: "root" };
    const bad = await raw.clear({ ...load, key: "nope" });
    // Salt's answer to a failed authentication is a top-level {"error": ...}, not inside a clear load
    assert.ok(isMap(bad) && isMap(bad.error) && bad.load === undefined, JSON.stringify(bad));
    const good = await raw.clear({ ...load, key: tm.rootKey });
    assert.ok(isMap(good) && isMap(good.load) && "jid" in good.load, JSON.stringify(good));
  });

  test("a v3 request built from a minion's session key opens; with a forged id it is refused", async () => {
    const m = new TestMinion({ id: "raw-m1", master: "127.0.0.1", retPort: tm.retPort, keys: keys[0]!, randomReauthDelayMs: 0 });
    try {
      await m.start();
      const ok = await raw.aes({ id: "raw-m1", cmd: "_minion_event", tag: "raw/test", data: {} }, { key: m.creds!.session!, id: "raw-m1", keys: keys[0] });
      assert.equal(ok.openError, undefined, "the reply is encrypted with the session key and our nonce");
      const forged = await raw.aes({ id: "raw-m1", cmd: "_minion_event", tag: "raw/test", data: {} }, { key: m.creds!.session!, id: "raw-m1", keys: keys[1] });
      assert.equal(forged.reply, "bad load", "a tok from another key must not verify");
      const noTok = await raw.aes({ id: "raw-m1", cmd: "_minion_event", tag: "raw/test", data: {} }, { key: m.creds!.session!, id: "raw-m1" });
      assert.equal(noTok.reply, "bad load", "v3 requires tok");
    } finally {
      await m.stop();
    }
  });

  test("no reply → MINION_REQ_TIMEOUT", async () => {
    const c = new RawClient({ host: "127.0.0.1", port: await freePort(), timeoutMs: 300 });
    try {
      await assert.rejects(c.request({ enc: "clear", load: {} }), (e: unknown) => isBrineError(e, "MINION_REQ_TIMEOUT"));
    } finally {
      c.close();
    }
  });
});
