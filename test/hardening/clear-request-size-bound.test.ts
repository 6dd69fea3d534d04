/**
 * A clear (unauthenticated) request is `_auth` or a CLI/API command, a few KiB (issue 13): one over
 * clearFrameBytesMax is refused before its containers are decoded (Python master: decodes any size), and
 * a big AES request still works.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { decodeWire, isMap } from "../../src/shared/protocol/msgpack.js";
import { clearFrameBytesMax } from "../../src/shared/protocol/limits.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { testKeys } from "../helpers/minions.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";

describe("clear request size bound", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let raw: RawClient;
  let k: MinionKeys[];
  let logFile: string;
  before(async () => {
    logFile = path.join(os.tmpdir(), `brine-clear-bound-${process.pid}.log`);
    tm = await startTestMaster({ auto_accept: true, brine_auth_stale_ms: 60_000 }, undefined, { logFile }); // raw sign-ins on a loaded box are not "stale"
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 10_000 });
    k = await testKeys(1);
  });
  after(async () => {
    raw.close();
    await tm.stop();
  });

  test("an _auth padded past clearFrameBytesMax is refused and writes no key; the same _auth without padding is accepted", async () => {
    const auth = { cmd: "_auth", id: "padded", nonce: "0".repeat(32), pub: k[0]!.pub, enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA1" };
    const r = await raw.clear({ ...auth, pad: "x".repeat(clearFrameBytesMax) });
    assert.deepEqual(r, { msg: "bad load" });
    assert.throws(() => readFileSync(path.join(tm.pkiDir, "minions", "padded")));
    const ok = await raw.clear(auth);
    assert.ok(isMap(ok));
    const load = isMap(ok.load) ? ok.load : decodeWire(ok.load as Buffer);
    assert.ok(isMap(load) && "aes" in load && "session" in load);
  });

  test("2 MB msgpack arrays in a clear envelope, or as the whole frame, are refused without walking them", async () => {
    const arr = Buffer.alloc(5 + 2_000_000);
    arr[0] = 0xdd;
    arr.writeUInt32BE(2_000_000, 1);
    // {enc: "clear", load: <array>}
    const env = Buffer.concat([Buffer.from([0x82, 0xa3, 0x65, 0x6e, 0x63, 0xa5, 0x63, 0x6c, 0x65, 0x61, 0x72, 0xa4, 0x6c, 0x6f, 0x61, 0x64]), arr]);
    for (const frame of [arr, env]) {
      assert.deepEqual(decodeWire(await raw.request(frame)), { msg: "bad load" });
    }
    const log = readFileSync(logFile, "utf8");
    assert.match(log, /over brine_clear_request_bytes_max \(1048576\) is not a flat AES envelope/);
  });

  test("a CLI publish with 200 KiB of arguments is taken (Salt takes any size); 600 KiB of tiny elements is refused at the element bound", async () => {
    const big = "y".repeat(200 * 1024);
    const r = await raw.clear({ cmd: "publish", tgt: "nobody-here", fun: "test.echo", arg: [big], tgt_type: "glob", ret: "", jid: "", user: "root", key: tm.rootKey, kwargs: {} });
    assert.ok(isMap(r) && isMap(r.load), JSON.stringify(r).slice(0, 200));
    assert.match(String(r.load.error), /could not resolve minions/, "authenticated and targeted, not refused for its size");
    const flood = await raw.clear({ cmd: "publish", tgt: "*", fun: "test.echo", arg: new Array(600 * 1024).fill(1), tgt_type: "glob", ret: "", jid: "", user: "root", key: tm.rootKey, kwargs: {} });
    assert.deepEqual(flood, { msg: "bad load" });
  });
});
