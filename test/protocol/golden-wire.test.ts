/**
 * Golden vectors: every message a real Salt 3007 master exchanged with a 3007 (v3) and a 3006.8 (v2)
 * minion decodes with our codec exactly as the capture's own decoding says, and every signature,
 * ciphertext and X9.31 token in it verifies / decrypts with our crypto.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { decodeWire, isMap } from "../../src/shared/protocol/msgpack.js";
import { Crypticle } from "../../src/shared/protocol/crypticle.js";
import { oaepDecrypt, privateKey, publicKey, rsaVerify } from "../../src/shared/protocol/rsa.js";
import { x931Recover } from "../../src/shared/protocol/x931.js";
import { GENERATIONS, allMessages, chosen, fromView, readFixture, symmetricKeys } from "../helpers/fixtures.js";

const d = describe;

for (const gen of GENERATIONS) {
  d(`golden wire ${gen}`, () => {
    const msgs = allMessages(gen);
    const keys = symmetricKeys(gen);
    const masterPub = publicKey(readFixture(gen, "pki/master/master.pub"));
    const masterPriv = privateKey(readFixture(gen, "pki/master/master.pem"));
    const minionPub = publicKey(readFixture(gen, "pki/minion/minion.pub"));
    const minionPriv = privateKey(readFixture(gen, "pki/minion/minion.pem"));

    test("every captured frame decodes to the capture's own view", () => {
      assert.ok(msgs.length > 100);
      for (const m of msgs) {
        const got = decodeWire(Buffer.from(m.payload_msgpack_b64, "base64"));
        assert.deepEqual(got, fromView(m.payload), `message ${m.n} (${m.kind})`);
      }
    });

    test("every encrypted request and reply decrypts, with nonces and tok as captured", () => {
      let requests = 0;
      let replies = 0;
      let toks = 0;
      const nonceOf = new Map<number, string>();
      for (const m of msgs) {
        const key = m.key_used ? keys.get(m.key_used) : undefined;
        const payload = decodeWire(Buffer.from(m.payload_msgpack_b64, "base64"));
        if (m.kind.startsWith("aes_request")) {
          assert.ok(key, `key for ${m.n}`);
          assert.ok(isMap(payload) && Buffer.isBuffer(payload.load));
          const c = new Crypticle(key);
          const inner = c.loads(payload.load as Buffer);
          const want = fromView(m.decoded![`load_decrypted(${m.key_used})`]);
          assert.deepEqual(inner, want, `request ${m.n}`);
          assert.ok(isMap(inner));
          nonceOf.set(m.n, inner.nonce as string);
          if (Buffer.isBuffer(inner.tok)) {
            assert.equal(x931Recover(minionPub, inner.tok).toString(), "salt", `tok of ${m.n}`);
            toks++;
          }
          requests++;
        } else if (m.kind === "aes_reply") {
          assert.ok(key && Buffer.isBuffer(payload));
          const nonce = m.decoded!.crypticle.nonce_prefix as string;
          assert.equal(nonce, nonceOf.get(m.reply_to_n!), `reply ${m.n} carries its request's nonce`);
          const got = new Crypticle(key).loads(payload as Buffer, { nonce });
          assert.deepEqual(got, fromView(m.decoded![`decrypted(${m.key_used})`]), `reply ${m.n}`);
          replies++;
        }
      }
      assert.ok(requests >= 50 && replies >= 45, `${requests} requests, ${replies} replies`);
      assert.ok(toks >= 7);
    });

    test("auth replies: outer signature, OAEP aes/session, X9.31 digest signature", () => {
      const replies = msgs.filter((m) => m.kind === "auth_reply");
      assert.equal(replies.length, 4);
      for (const m of replies) {
        const env = decodeWire(Buffer.from(m.payload_msgpack_b64, "base64"));
        assert.ok(isMap(env) && Buffer.isBuffer(env.load) && Buffer.isBuffer(env.sig));
        assert.ok(rsaVerify(masterPub, env.load as Buffer, env.sig as Buffer), `outer sig ${m.n}`);
        const r = decodeWire(env.load as Buffer);
        assert.ok(isMap(r));
        const aes = oaepDecrypt(minionPriv, r.aes as Buffer).toString("latin1");
        assert.equal(aes, keys.get(m.decoded!.aes_key_name));
        const session = oaepDecrypt(minionPriv, r.session as Buffer).toString("latin1");
        assert.equal(session, keys.get(m.decoded!.session_key_name));
        const digest = createHash("sha256").update(aes, "latin1").digest("hex");
        assert.equal(x931Recover(masterPub, r.sig as Buffer).toString("latin1"), digest);
      }
    });

    test("auth request tokens decrypt with master.pem and come back under minion.pub", () => {
      const req = chosen(gen, "auth-with-token-request");
      const env = decodeWire(Buffer.from(req.payload_msgpack_b64, "base64"));
      assert.ok(isMap(env) && isMap(env.load));
      const token = oaepDecrypt(masterPriv, env.load.token as Buffer);
      assert.equal(token.length, 76);
      const rep = chosen(gen, "auth-with-token-reply");
      const renv = decodeWire(Buffer.from(rep.payload_msgpack_b64, "base64"));
      assert.ok(isMap(renv));
      const r = decodeWire(renv.load as Buffer);
      assert.ok(isMap(r));
      assert.deepEqual(oaepDecrypt(minionPriv, r.token as Buffer), token);
      assert.equal(r.nonce, env.load.nonce);
    });

    test("publishes: signature over the encrypted load, serial inside", () => {
      const pubs = msgs.filter((m) => m.kind === "publish");
      assert.ok(pubs.length >= 9);
      for (const m of pubs) {
        const env = decodeWire(Buffer.from(m.payload_msgpack_b64, "base64"));
        assert.ok(isMap(env));
        assert.equal(env.sig_algo, "PKCS1v15-SHA1");
        assert.ok(rsaVerify(masterPub, env.load as Buffer, env.sig as Buffer));
        const c = new Crypticle(keys.get(m.key_used!)!);
        const load = c.loads(env.load as Buffer, { checkSerial: true });
        const want = fromView(m.decoded![`load_decrypted(${m.key_used})`]) as Record<string, unknown>;
        const { serial, ...rest } = want;
        assert.deepEqual(load, rest);
        assert.equal(c.serial, serial);
        // the same publish again is a replay: refused by the serial check
        assert.deepEqual(c.loads(env.load as Buffer, { checkSerial: true }), {});
      }
    });

    test("private (pillar) replies: one-time key, signed data, nonce", () => {
      const m = chosen(gen, "pillar-reply");
      const env = decodeWire(Buffer.from(m.payload_msgpack_b64, "base64"));
      assert.ok(isMap(env));
      const oneTime = oaepDecrypt(minionPriv, env.key as Buffer).toString("latin1");
      const outer = new Crypticle(oneTime).loads(env.pillar as Buffer);
      assert.ok(isMap(outer));
      assert.ok(rsaVerify(masterPub, outer.data as Buffer, outer.sig as Buffer));
      const data = decodeWire(outer.data as Buffer);
      assert.ok(isMap(data));
      assert.deepEqual(data.key, env.key);
      assert.deepEqual(data.pillar, { demo: { greeting: "Hello" } });
    });

    test("re-encryption: our Crypticle output under a captured key opens to the same plaintext", () => {
      const m = chosen(gen, "return-reply");
      const key = keys.get(m.key_used!)!;
      const nonce = m.decoded!.crypticle.nonce_prefix as string;
      const c = new Crypticle(key);
      const ours = c.dumps(null, nonce);
      assert.equal(ours.length, 96, "same ciphertext size as Salt's reply to _return");
      assert.equal(new Crypticle(key).loads(ours, { nonce }), null);
    });
  });
}
