/**
 * Envelopes below v3 carry no per-minion key (issue 13): with the shared AES key any accepted minion can
 * claim any id. Salt 3007 (Python master) accepts a v2 `_return` or `_pillar` in another minion's name;
 * brine refuses one naming a minion that signs in with v3 (remembered across restarts), honours
 * `require_minion_sign_messages`, and with `brine_min_envelope_version: 3` refuses every v2 envelope.
 * A v2 (3006.8) minion keeps working with the defaults.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createPrivateKey, sign } from "node:crypto";
import os from "node:os";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { MinionKeys } from "../../src/lib/minion/keys.js";
import { RawClient } from "../../src/lib/minion/raw-client.js";
import { packSalt } from "../../src/lib/minion/wire.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import { PublishClient } from "../../tools/swarm/publish-client.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys, waitForEvent } from "../helpers/minions.js";

const jid = "20260101000000000077";
const retLoad = (id: string, ret: unknown) => ({ cmd: "_return", id, jid, fun: "test.ping", fun_args: [], return: ret, retcode: 0, success: true });

describe("envelopes below v3", { timeout: 180_000 }, () => {
  let tm: TestMaster;
  let k: MinionKeys[];
  let good: TestMinion; // v3, as 3007
  let old: TestMinion; // v2, as 3006.8
  let raw: RawClient;
  let ec: EventClient;
  const heard: string[] = [];

  before(async () => {
    tm = await startTestMaster({ auto_accept: true });
    k = await testKeys(4);
    good = fastMinion(tm, "v3-good", k[0]!);
    old = fastMinion(tm, "v2-old", k[1]!, { protocol: "v2" });
    await good.start();
    await old.start();
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 5000 });
    ec = new EventClient(tm.sockDir);
    await ec.connect();
    ec.on((e) => heard.push(e.tag));
  });
  after(async () => {
    raw.close();
    ec.close();
    await good.stop();
    await old.stop();
    await tm.stop();
  });

  const v2 = (load: Record<string, unknown>, aes: string) => raw.aes(load, { key: aes, protocol: "v2" });

  test("a v2 _return or _pillar naming a minion that signs in with v3 is refused and fires nothing (Python master: same hole)", async () => {
    const before = heard.length;
    const r = await v2(retLoad("v3-good", "FORGED"), old.creds!.aes);
    assert.equal(r.reply, "bad load");
    const p = await v2({ cmd: "_pillar", id: "v3-good", grains: { forged: true } }, old.creds!.aes);
    assert.equal(p.reply, "bad load");
    await new Promise((res) => setTimeout(res, 300));
    assert.ok(!heard.slice(before).some((t) => t.endsWith("/ret/v3-good")));
  });

  test("a v2 minion's own v2 requests work with the defaults (3006.8): its return to a job", async () => {
    const pc = new PublishClient({ host: "127.0.0.1", port: tm.retPort, key: tm.rootKey });
    try {
      const got = waitForEvent(old, "return", (x) => x.fun === "test.ping", 10_000);
      await pc.publish({ tgt: "v2-old", fun: "test.ping" });
      assert.equal((await got).ret, true);
    } finally {
      pc.close();
    }
    const own = await v2(retLoad("v2-old", true), old.creds!.aes);
    assert.equal(own.decrypted, null);
  });

  test("the refusal outlives a restart", async () => {
    await good.stop();
    await old.stop();
    tm = await tm.restart();
    const old2 = fastMinion(tm, "v2-old", k[1]!, { protocol: "v2" });
    await old2.start();
    try {
      const r = await v2(retLoad("v3-good", "FORGED"), old2.creds!.aes);
      assert.equal(r.reply, "bad load");
      const own = await v2(retLoad("v2-old", true), old2.creds!.aes);
      assert.equal(own.decrypted, null);
    } finally {
      await old2.stop();
    }
  });
});

describe("require_minion_sign_messages and brine_min_envelope_version", { timeout: 180_000 }, () => {
  let tm: TestMaster;
  let k: MinionKeys[];
  let raw: RawClient;
  before(async () => {
    tm = await startTestMaster({ auto_accept: true, require_minion_sign_messages: true, brine_min_envelope_version: 3 } as never);
    k = await testKeys(4);
    raw = new RawClient({ host: "127.0.0.1", port: tm.retPort, timeoutMs: 5000 });
  });
  after(async () => {
    raw.close();
    await tm.stop();
  });

  test("a _return without sig, or with a sig that does not verify, is refused; a signed one is stored (Salt: an invalid sig is taken unless drop_messages_signature_fail)", async () => {
    const m = fastMinion(tm, "signer", k[2]!);
    await m.start();
    try {
      const session = m.creds!.session!;
      const send = (load: Record<string, unknown>) => raw.aes(load, { key: session, id: "signer", keys: k[2] });
      const load = { ...retLoad("signer", true), jid: "20260101000000000078" };
      assert.equal((await send(load)).decrypted, false);
      const priv = createPrivateKey(k[2]!.privatePem);
      const badSig = sign("sha1", packSalt({ ...load, return: "other" }), priv);
      assert.equal((await send({ ...load, sig: badSig })).decrypted, false);
      const sig = sign("sha1", packSalt(load), priv);
      assert.equal((await send({ ...load, sig })).decrypted, null);
    } finally {
      await m.stop();
    }
  });

  test("brine_min_envelope_version 3: a v2 minion cannot sign in, and a v2 request is refused", async () => {
    const m = fastMinion(tm, "v2-refused", k[3]!, { protocol: "v2", authDeadlineMs: 1500, authTries: 1 });
    await assert.rejects(m.start());
    await m.stop();
    const v3 = fastMinion(tm, "v3-ok", k[1]!);
    await v3.start();
    try {
      const r = await raw.aes(retLoad("v3-ok", true), { key: v3.creds!.aes, protocol: "v2" });
      assert.equal(r.reply, "bad load");
    } finally {
      await v3.stop();
    }
  });
});

test("a v3 mark goes with the minion's key (keyless purge), so a new v2 minion may take a deleted id", async () => {
  const { V3Marks } = await import("../../src/lib/store/v3-marks.js");
  const { mkdtempSync, rmSync } = await import("node:fs");
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-v3marks-"));
  try {
    const marks = new V3Marks(dir);
    marks.mark("kept");
    marks.mark("deleted");
    assert.equal(new V3Marks(dir).has("deleted"), true, "a restart sees the mark");
    assert.equal(marks.purge((id) => id === "kept", 100), 1);
    assert.equal(marks.has("deleted"), false);
    assert.equal(new V3Marks(dir).has("kept"), true);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
