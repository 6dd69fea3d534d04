/**
 * Hostile and malformed requests (reference-points E1/E2). Each gets exactly one reply — Salt's
 * wording where Salt has one — and a log line; nothing is written for it; and afterwards the master
 * still answers real minions. A flood of a few hundred mixed bad requests in parallel does not stop
 * it either (CVE-2023-20897: bad packets once parked Salt's workers).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { decodeWire, encodeWire, isMap } from "../../src/shared/protocol/msgpack.js";
import { frameBytesMax } from "../../src/shared/protocol/limits.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys, waitForEvent } from "../helpers/minions.js";
import { PublishClient } from "../../tools/swarm/publish-client.js";

describe("bad input", { timeout: 300_000 }, () => {
  let tm: TestMaster;
  let good: TestMinion;
  let other: TestMinion;
  let k: MinionKeys[];
  let raw: RawClient;
  let logFile: string;
  /** Log lines are written by the worker threads' file transports asynchronously: poll briefly. */
  async function assertLogged(re: RegExp): Promise<void> {
    for (let i = 0; i < 40; i++) {
      if (re.test(readFileSync(logFile, "utf8"))) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail(`no log line matching ${re}`);
  }
  const jobsWritten = () => readdirSync(path.join(tm.cachedir, "brine-lmdb")).length;

  before(async () => {
    logFile = path.join((await import("node:os")).tmpdir(), `brine-bad-input-${process.pid}.log`);
    tm = await startTestMaster({ auto_accept: true, request_server_ttl: 60, worker_threads: 2 }, undefined, { logFile });
    k = await testKeys(2);
    good = fastMinion(tm, "bi-good", k[0]!);
    other = fastMinion(tm, "bi-other", k[1]!);
    await good.start();
    await other.start();
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 5000 });
  });
  after(async () => {
    raw.close();
    await good.stop();
    await other.stop();
    await tm.stop();
  });

  const session = () => good.creds!.session!;
  const retLoad = (over: Record<string, unknown> = {}) => ({ cmd: "_return", id: "bi-good", jid: "20260101000000000001", fun: "test.ping", fun_args: [], return: true, retcode: 0, success: true, ...over });

  async function stillServes(): Promise<void> {
    const pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey });
    try {
      const got = waitForEvent(good, "return", (r) => r.fun === "test.ping", 10_000);
      await pc.publish({ tgt: "bi-good", fun: "test.ping" });
      assert.equal((await got).ret, true);
    } finally {
      pc.close();
    }
  }

  test("garbage and truncated msgpack get {msg: 'bad load'}", async () => {
    for (const body of [Buffer.from("not msgpack at all"), encodeWire({ enc: "aes", load: Buffer.alloc(64) }).subarray(0, 10), Buffer.from([0xc1])]) {
      assert.deepEqual(decodeWire(await raw.request(body)), { msg: "bad load" });
    }
    await assertLogged(/bad load received on socket/);
  });

  test("a frame over frameBytesMax is refused without decoding it", async () => {
    const big = Buffer.alloc(frameBytesMax + 1, 0x90);
    assert.deepEqual(decodeWire(await raw.request(big, 20_000)), { msg: "bad load" });
    await assertLogged(/exceeds frameBytesMax/);
  });

  test("deep nesting and unknown ext types are refused", async () => {
    assert.deepEqual(decodeWire(await raw.request(Buffer.alloc(50_000, 0x91))), { msg: "bad load" });
    assert.deepEqual(decodeWire(await raw.request(Buffer.from([0x81, 0xa3, 0x65, 0x6e, 0x63, 0xd4, 0x42, 0x00]))), { msg: "bad load" });
    await assertLogged(/nesting exceeds|extension type/);
  });

  test("envelopes that are not maps with enc and load get 'bad load'; a non-map load gets Salt's wording", async () => {
    assert.equal(await raw.requestDecoded([1, 2, 3]), "bad load");
    assert.equal(await raw.requestDecoded({ enc: "clear" }), "bad load");
    assert.equal(await raw.requestDecoded({ enc: "clear", load: "x" }), "payload and load must be a dict");
    assert.equal(await raw.requestDecoded({ enc: "clear", load: { cmd: "_auth", id: "a\0b" } }), "bad load: id contains a null byte");
  });

  test("clear commands Salt does not expose get {} (no other ClearFuncs method is reachable)", async () => {
    for (const cmd of ["_prep_auth_info", "__init__", "_send_pub", "_prep_jid", "ping_all", 42]) {
      assert.deepEqual(await raw.clear({ cmd }), {}, String(cmd));
    }
    await assertLogged(/not an allowed clear command/);
  });

  test("the exposed clear commands without credentials are refused as Salt refuses them", async () => {
    assert.equal(await raw.clear({ cmd: "get_token" }), false);
    assert.equal(await raw.clear({ cmd: "mk_token" }), "");
    for (const cmd of ["wheel", "runner"]) {
      const r = await raw.clear({ cmd, fun: "key.list_all" });
      assert.ok(isMap(r) && isMap(r.error), cmd);
      assert.equal(r.error.name, "UserAuthenticationError", cmd);
    }
  });

  test("AES commands outside the allow-list, or starting with __, get an encrypted {}", async () => {
    for (const cmd of ["_ext_nodes", "__init__", "__class__", "run_func", "_file_recv_evil", "destroy"]) {
      const r = await raw.aes({ cmd, id: "bi-good" }, { key: session(), id: "bi-good", keys: k[0] });
      assert.deepEqual(r.decrypted, {}, cmd);
    }
    await assertLogged(/is not allowed/);
  });

  test("ids with '/', '\\\\', NUL or '..' are refused at _auth and never become files", async () => {
    for (const id of ["../evil", "a/b", "a\\b", "..", "."]) {
      const r = await raw.clear({ cmd: "_auth", id, nonce: "0".repeat(32), pub: k[1]!.pub });
      assert.ok(isMap(r));
      const load = isMap(r.load) ? r.load : decodeWire(r.load as Buffer);
      assert.ok(isMap(load) && load.ret === false, id);
    }
    const names = readdirSync(path.join(tm.pkiDir, "minions")).concat(readdirSync(path.join(tm.pkiDir, "minions_pre")));
    assert.deepEqual(names.sort(), ["bi-good", "bi-other"]);
    assert.deepEqual(readdirSync(path.dirname(tm.pkiDir)).sort(), ["master"]);
  });

  test("a v3 envelope id that is not a valid id is 'bad load'", async () => {
    const r = await raw.aes(retLoad(), { key: session(), id: "../x", keys: k[0], envelope: { id: "../x" } });
    assert.equal(r.reply, "bad load");
  });

  test("a _return whose jid is not 20 digits is refused and not stored", async () => {
    const before = jobsWritten();
    for (const jid of ["../../etc/passwd", "2026", "/proc/self/fd/0", "20260101000000000001/x"]) {
      const r = await raw.aes(retLoad({ jid }), { key: session(), id: "bi-good", keys: k[0] });
      assert.equal(r.decrypted, false, jid);
    }
    assert.equal(jobsWritten(), before);
    await assertLogged(/invalid return\/jid\/id/);
  });

  test("minion A claiming to be B: envelope/load id mismatch, or B's id with A's token, is 'bad load'", async () => {
    const mismatch = await raw.aes(retLoad({ id: "bi-other" }), { key: session(), id: "bi-good", keys: k[0] });
    assert.equal(mismatch.reply, "bad load");
    // B's session key is unknown to A; even with B's id everywhere, A's tok does not verify as B
    const asB = await raw.aes(retLoad({ id: "bi-other" }), { key: other.creds!.session!, id: "bi-other", keys: k[0] });
    assert.equal(asB.reply, "bad load");
    await assertLogged(/Request id mismatch|Minion token did not validate/);
  });

  test("a request without tok, or with a forged tok, is 'bad load'", async () => {
    assert.equal((await raw.aes(retLoad(), { key: session(), id: "bi-good" })).reply, "bad load");
    const forged = { ...k[0]!, tok: Buffer.alloc(256, 7) } as unknown as MinionKeys;
    assert.equal((await raw.aes(retLoad(), { key: session(), id: "bi-good", keys: forged })).reply, "bad load");
  });

  test("a replayed nonce and a stale ts (request_server_ttl) are 'bad load'", async () => {
    const nonce = "ab".repeat(16);
    const first = await raw.aes({ cmd: "_minion_event", id: "bi-good", tag: "bi/x", data: {} }, { key: session(), id: "bi-good", keys: k[0], nonce });
    assert.equal(first.decrypted, null, "accepted (Salt answers None)");
    const again = await raw.aes({ cmd: "_minion_event", id: "bi-good", tag: "bi/x", data: {} }, { key: session(), id: "bi-good", keys: k[0], nonce });
    assert.equal(again.reply, "bad load");
    const stale = await raw.aes({ cmd: "_minion_event", id: "bi-good", tag: "bi/x", data: {} }, { key: session(), id: "bi-good", keys: k[0], ts: Math.floor(Date.now() / 1000) - 3600 });
    assert.equal(stale.reply, "bad load");
    await assertLogged(/Replayed request refused/);
    await assertLogged(/expired ttl/);
  });

  test("publish without a key, or with a wrong one, is an AuthenticationError", async () => {
    for (const key of [undefined, "wrong", tm.rootKey + "x", ""]) {
      const r = await raw.clear({ cmd: "publish", tgt: "*", fun: "test.ping", arg: [], tgt_type: "glob", ret: "", jid: "", user: "root", kwargs: {}, ...(key === undefined ? {} : { key }) });
      // Salt's ClearFuncs.publish answers a failed authentication with a top-level {"error": ...} (LocalClient pops it)
      assert.ok(isMap(r));
      assert.deepEqual(r.error, { name: "AuthenticationError", message: "Authentication error occurred." });
    }
    await assertLogged(/Authentication failure/);
  });

  test("a minion may not fire another minion's return or a salt/key event", async () => {
    const r1 = await raw.aes({ cmd: "_minion_event", id: "bi-good", tag: "salt/job/20260101000000000009/ret/bi-other", data: { return: "fake" } }, { key: session(), id: "bi-good", keys: k[0] });
    assert.equal(r1.decrypted, false);
    const r2 = await raw.aes({ cmd: "_minion_event", id: "bi-good", tag: "salt/key", data: {} }, { key: session(), id: "bi-good", keys: k[0] });
    assert.equal(r2.decrypted, false);
    await assertLogged(/Filtering blacklisted event tag/);
  });

  test("after all of the above the master still answers a real minion", async () => {
    await stillServes();
  });

  test("a flood of 400 mixed bad requests in parallel leaves the master answering at once", async () => {
    const clients = Array.from({ length: 8 }, () => new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 30_000 }));
    const bodies = [Buffer.from("garbage"), Buffer.alloc(20_000, 0x91), encodeWire({ enc: "aes", load: Buffer.alloc(96, 3), version: 3, id: "bi-good" }), encodeWire({ enc: "clear", load: { cmd: "wheel" } }), encodeWire({ enc: "aes", load: Buffer.alloc(96, 3), version: 2 })];
    let answered = 0;
    await Promise.all(
      clients.map(async (c, ci) => {
        for (let i = 0; i < 50; i++) {
          await c.request(bodies[(ci + i) % bodies.length]!);
          answered++;
        }
      }),
    );
    for (const c of clients) c.close();
    assert.equal(answered, 400, "every bad request got its reply");
    const t0 = Date.now();
    await stillServes();
    assert.ok(Date.now() - t0 < 10_000);
  });
});
