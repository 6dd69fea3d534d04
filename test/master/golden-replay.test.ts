/**
 * Replay the real minions' captured requests (3007/v3 and 3006.8/v2) to a brine master that holds the
 * captured master key, session key and AES key, and check every reply the way the real minion checks
 * it, with the captured minion key: auth replies (signature, nonce, AES key + its X9.31 digest
 * signature, session key, token round trip), AES replies (decrypt with the right key and the
 * request's nonce), the private pillar reply (one-time key, signature, nonce).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Request } from "zeromq";
import { decodeWire, isMap } from "../../src/shared/protocol/msgpack.js";
import { Crypticle } from "../../src/shared/protocol/crypticle.js";
import { oaepDecrypt, privateKey, publicKey, rsaVerify } from "../../src/shared/protocol/rsa.js";
import { x931Recover } from "../../src/shared/protocol/x931.js";
import { GENERATIONS, chosen, fixturePath, readFixture, symmetricKeys, type Gen } from "../helpers/fixtures.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";

async function ask(port: number, body: Buffer): Promise<Buffer> {
  const s = new Request({ receiveTimeout: 10_000, linger: 0 });
  s.connect(`tcp://127.0.0.1:${port}`);
  try {
    await s.send(body);
    const [r] = await s.receive();
    return r!;
  } finally {
    s.close();
  }
}

const frameOf = (gen: Gen, name: string) => Buffer.from(chosen(gen, name).payload_msgpack_b64, "base64");

for (const gen of GENERATIONS) {
  describe(`captured ${gen} requests against brine`, () => {
    let m: TestMaster;
    const keys = symmetricKeys(gen);
    const minionPriv = privateKey(readFixture(gen, "pki/minion/minion.pem"));
    const masterPub = publicKey(readFixture(gen, "pki/master/master.pub"));

    before(async () => {
      const root = path.join((await import("node:os")).tmpdir(), `brine-golden-${gen}-${process.pid}`);
      const pki = path.join(root, "pki", "master");
      mkdirSync(path.join(pki, "minions"), { recursive: true });
      for (const f of ["master.pem", "master.pub"]) copyFileSync(fixturePath(gen, "pki/master", f), path.join(pki, f));
      copyFileSync(fixturePath(gen, "pki/master/minions/m1"), path.join(pki, "minions", "m1"));
      mkdirSync(path.join(root, "cache", "sessions"), { recursive: true });
      writeFileSync(path.join(root, "cache", "sessions", "m1"), readFixture(gen, "keys/sessions/m1"));
      // the captured frames carry the capture's `ts`: the request time window is off (src/workers/req-handler/replay-window.ts)
      m = await startTestMaster({ pki_dir: pki, cachedir: path.join(root, "cache"), brine_request_ts_window_s: 0 } as Parameters<typeof startTestMaster>[0], root);
      m.server.secrets.setAesKey(keys.get("aes-1")!);
    });
    after(async () => m?.stop());

    for (const name of ["auth-request", "auth-with-token-request"]) {
      test(`${name}: the reply is one the captured minion accepts`, async () => {
        const req = decodeWire(frameOf(gen, name));
        assert.ok(isMap(req) && isMap(req.load));
        const env = decodeWire(await ask(m.retPort, frameOf(gen, name)));
        assert.ok(isMap(env) && env.enc === "clear" && Buffer.isBuffer(env.load) && Buffer.isBuffer(env.sig));
        assert.ok(rsaVerify(masterPub, env.load, env.sig), "outer signature with the captured master key");
        const r = decodeWire(env.load);
        assert.ok(isMap(r));
        assert.equal(r.enc, "pub");
        assert.equal(r.nonce, req.load.nonce);
        assert.equal(r.publish_port, m.publishPort);
        assert.equal(r.pub_key, readFixture(gen, "pki/minion/minion_master.pub").trim());
        const aes = oaepDecrypt(minionPriv, r.aes as Buffer).toString("latin1");
        assert.equal(aes, keys.get("aes-1"));
        const digest = createHash("sha256").update(aes, "latin1").digest("hex");
        assert.equal(x931Recover(masterPub, r.sig as Buffer).toString("latin1"), digest);
        assert.equal(oaepDecrypt(minionPriv, r.session as Buffer).toString("latin1"), readFixture(gen, "keys/sessions/m1").trim());
        if (req.load.token) {
          const sent = oaepDecrypt(privateKey(readFixture(gen, "pki/master/master.pem")), req.load.token as Buffer);
          assert.deepEqual(oaepDecrypt(minionPriv, r.token as Buffer), sent, "token round trip");
        } else assert.equal(r.token, undefined);
      });
    }

    test("return request: stored, and the reply decrypts with the request's key and nonce", async () => {
      const name = "return-request";
      const c = chosen(gen, name);
      const key = keys.get(c.key_used!)!;
      const env = decodeWire(frameOf(gen, name));
      assert.ok(isMap(env));
      const plain = new Crypticle(key).loads(env.load as Buffer) as Record<string, unknown>;
      const bytes = await ask(m.retPort, frameOf(gen, name));
      const reply = decodeWire(bytes);
      assert.ok(Buffer.isBuffer(reply));
      assert.equal(new Crypticle(key).loads(reply, { nonce: plain.nonce as string }), null);
      // the same frame again is a resend (or a replay of the capture): it gets the first's reply, and is not acted
      // on again (src/shared/nonce-replies.ts; test/req-handler/resent-request counts the effects)
      assert.deepEqual(await ask(m.retPort, frameOf(gen, name)), bytes);
    });

    test("pillar request: private reply opens with the minion key and verifies", async () => {
      const name = "pillar-request";
      const env = decodeWire(frameOf(gen, name));
      assert.ok(isMap(env));
      const key = keys.get(chosen(gen, name).key_used!)!;
      const plain = new Crypticle(key).loads(env.load as Buffer) as Record<string, unknown>;
      const reply = decodeWire(await ask(m.retPort, frameOf(gen, name)));
      assert.ok(isMap(reply));
      const oneTime = oaepDecrypt(minionPriv, reply.key as Buffer).toString("latin1");
      const outer = new Crypticle(oneTime).loads(reply.pillar as Buffer);
      assert.ok(isMap(outer));
      assert.ok(rsaVerify(masterPub, outer.data as Buffer, outer.sig as Buffer));
      const data = decodeWire(outer.data as Buffer);
      assert.ok(isMap(data));
      assert.equal(data.nonce, plain.nonce);
      assert.deepEqual(data.key, reply.key);
    });
  });
}
