/**
 * The test minion against the golden captures: the requests it builds are the real 3007 (v3) and 3006.8
 * (v2) minions' requests — the clear `_auth` byte for byte, and the AES requests' decrypted plaintext
 * byte for byte (their `tok` is deterministic) — and it verifies the captured master replies exactly as
 * Salt's AsyncAuth / AsyncReqChannel do, refusing tampered ones.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { Crypticle } from "../../src/shared/protocol/crypticle.js";
import { decodeWire, encodeWire, isMap, type WireValue } from "../../src/shared/protocol/msgpack.js";
import { oaepDecrypt, oaepEncrypt, privateKey, publicKey, rsaSign } from "../../src/shared/protocol/rsa.js";
import { x931Recover, x931Sign } from "../../src/shared/protocol/x931.js";
import { MinionKeys } from "../../src/lib/minion/keys.js";
import { buildAuthRequest, handleAuthReply, newSignInState, type SignInConfig } from "../../src/lib/minion/sign-in.js";
import { openAesReply, openPrivateReply, packageAes, type ChannelCrypto } from "../../src/lib/minion/req-channel.js";
import { packSalt } from "../../src/lib/minion/wire.js";
import { isBrineError } from "../../src/shared/errors.js";
import { GENERATIONS, chosen, fromView, readFixture, symmetricKeys, type Gen } from "../helpers/fixtures.js";

const d = describe;

function b64(s: string): Buffer {
  return Buffer.from(s, "base64");
}

function protocolOf(gen: Gen) {
  return gen === "v3-3007" ? ("v3" as const) : ("v2" as const);
}

function minionKeys(gen: Gen): MinionKeys {
  return new MinionKeys({ privatePem: readFixture(gen, "pki/minion/minion.pem"), publicPem: readFixture(gen, "pki/minion/minion.pub") });
}

function cfgOf(gen: Gen): SignInConfig {
  return { id: "m1", keys: minionKeys(gen), protocol: protocolOf(gen), encAlgo: "OAEP-SHA1", sigAlgo: "PKCS1v15-SHA1", sendAlgos: gen === "v3-3007" };
}

/** A ChannelCrypto over fixed keys. */
function crypto(gen: Gen, key: string, masterPub: string): ChannelCrypto {
  const c = new Crypticle(key);
  const cfg = cfgOf(gen);
  return {
    id: "m1",
    protocol: cfg.protocol,
    keys: cfg.keys,
    encAlgo: cfg.encAlgo,
    sigAlgo: cfg.sigAlgo,
    sendAlgos: cfg.sendAlgos,
    requestCrypticle: () => c,
    masterPubKey: () => publicKey(masterPub),
    reauth: async () => {},
  };
}

/** Re-sign a modified auth reply load with the fixture's master key. */
function signedReply(gen: Gen, inner: Record<string, unknown>): WireValue {
  const load = encodeWire(inner);
  const sig = rsaSign(privateKey(readFixture(gen, "pki/master/master.pem")), load);
  return { enc: "clear", load, sig };
}

function expectCode(fn: () => unknown, code: string): void {
  assert.throws(fn, (e: unknown) => isBrineError(e) && e.code === code);
}

for (const gen of GENERATIONS) {
  d(`test minion vs capture ${gen}`, () => {
    const keys = symmetricKeys(gen);
    const masterPubText = readFixture(gen, "pki/master/master.pub");
    const pinned = readFixture(gen, "pki/minion/minion_master.pub");

    test("first-contact _auth request is byte-identical to the captured one", () => {
      const cap = chosen(gen, "auth-request");
      const capLoad = (cap.payload as { load: { nonce: string } }).load;
      const req = buildAuthRequest(cfgOf(gen), newSignInState(), { nonce: capLoad.nonce });
      assert.equal(req.tokenSent, false);
      assert.deepEqual(packSalt(req.envelope), b64(cap.payload_msgpack_b64));
    });

    test("_auth with a pinned master key: same fields in the same order, token readable by the master", () => {
      const cap = chosen(gen, "auth-with-token-request");
      const capEnv = decodeWire(b64(cap.payload_msgpack_b64)) as Record<string, any>;
      const state = newSignInState(pinned);
      const req = buildAuthRequest(cfgOf(gen), state, { nonce: capEnv.load.nonce });
      const ours = decodeWire(packSalt(req.envelope)) as Record<string, any>;
      assert.deepEqual(Object.keys(ours), Object.keys(capEnv));
      assert.deepEqual(Object.keys(ours.load), Object.keys(capEnv.load));
      const tok = oaepDecrypt(privateKey(readFixture(gen, "pki/master/master.pem")), ours.load.token).toString("latin1");
      assert.equal(tok, state.token);
      assert.equal(tok.length, 76);
      assert.equal(ours.load.pub, capEnv.load.pub);
    });

    test("captured first-contact auth reply is accepted and pins the master key", () => {
      const reqCap = chosen(gen, "auth-request");
      const repCap = chosen(gen, "auth-reply");
      const state = newSignInState();
      const req = buildAuthRequest(cfgOf(gen), state, { nonce: (reqCap.payload as any).load.nonce });
      const out = handleAuthReply(cfgOf(gen), state, req, decodeWire(b64(repCap.payload_msgpack_b64)));
      assert.equal(out.result, "accepted");
      if (out.result !== "accepted") return;
      assert.equal(out.creds.aes, keys.get("aes-1"));
      // a 3006.8 (v2) minion never opens the session key the 3007 master sends
      assert.equal(out.creds.session, gen === "v3-3007" ? keys.get("session-1") : undefined);
      assert.equal(out.creds.publishPort, 4505);
      assert.equal(state.masterPub!.replace(/\n/g, ""), masterPubText.replace(/\n/g, ""));
    });

    const tokenCase = () => {
      const reqCap = chosen(gen, "auth-with-token-request");
      const repCap = chosen(gen, "auth-with-token-reply");
      const capLoad = (decodeWire(b64(reqCap.payload_msgpack_b64)) as any).load;
      const token = oaepDecrypt(privateKey(readFixture(gen, "pki/master/master.pem")), capLoad.token).toString("latin1");
      const state = { masterPub: pinned, token };
      const req = buildAuthRequest(cfgOf(gen), state, { nonce: capLoad.nonce });
      const reply = decodeWire(b64(repCap.payload_msgpack_b64)) as Record<string, any>;
      const inner = decodeWire(reply.load) as Record<string, any>;
      return { state, req, reply, inner };
    };

    test("captured auth reply to a token-bearing sign-in: token round trip verified", () => {
      const { state, req, reply } = tokenCase();
      const out = handleAuthReply(cfgOf(gen), state, req, reply);
      assert.equal(out.result, "accepted");
    });

    test("tampered or foreign replies are refused", () => {
      const cfg = cfgOf(gen);
      // wrong nonce
      {
        const { state, reply } = tokenCase();
        const req = buildAuthRequest(cfg, state, { nonce: "0".repeat(32) });
        expectCode(() => handleAuthReply(cfg, state, req, reply), "MINION_AUTH_INVALID");
      }
      // wrong token (the minion forgot what it sent)
      {
        const { state, req, reply } = tokenCase();
        expectCode(() => handleAuthReply(cfg, { ...state, token: "y".repeat(76) }, req, reply), "MINION_AUTH_INVALID");
      }
      // outer signature broken
      {
        const { state, req, reply } = tokenCase();
        const sig = Buffer.from(reply.sig as Buffer);
        sig[10] ^= 1;
        expectCode(() => handleAuthReply(cfg, state, req, { ...reply, sig }), "MINION_AUTH_INVALID");
      }
      // inner X9.31 sig over another AES key (re-signed outside, so only the digest check can catch it)
      {
        const { state, req, inner } = tokenCase();
        const priv = privateKey(readFixture(gen, "pki/master/master.pem"));
        const forged = { ...inner, sig: x931Sign(priv, Buffer.from("0".repeat(64))) };
        expectCode(() => handleAuthReply(cfg, state, req, signedReply(gen, forged)), "MINION_AUTH_INVALID");
      }
      // the master key changed
      {
        const { req, reply } = tokenCase();
        const other = generateKeyPairSync("rsa", { modulusLength: 2048, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs1", format: "pem" } });
        const state = { masterPub: other.publicKey, token: tokenCase().state.token };
        expectCode(() => handleAuthReply(cfg, state, req, reply), "MINION_MASTER_KEY_CHANGED");
      }
      // not a sign-in reply at all (a busy master): a failed attempt, to be retried, not a verdict
      {
        const { state, req } = tokenCase();
        const out = handleAuthReply(cfg, state, req, { error: "request queue is full, retry later" });
        assert.equal(out.result, "failed");
        assert.equal(handleAuthReply(cfg, state, req, "bad load").result, "failed");
      }
      // an unsigned algorithm refusal
      {
        const { state, req } = tokenCase();
        expectCode(() => handleAuthReply(cfg, state, req, { enc: "clear", load: { ret: "bad enc algo" } }), "MINION_BAD_ALGO");
      }
    });

    test("signed refusals: ret True → pending, False → rejected, \"full\" → full; unsigned refusal from a pinned master is refused", () => {
      const cfg = cfgOf(gen);
      for (const [ret, result] of [
        [true, "pending"],
        [false, "rejected"],
        ["full", "full"],
      ] as const) {
        const { state, req } = tokenCase();
        const out = handleAuthReply(cfg, state, req, signedReply(gen, { ret, nonce: req.nonce }));
        assert.equal(out.result, result);
      }
      const { state, req } = tokenCase();
      expectCode(() => handleAuthReply(cfg, state, req, { enc: "clear", load: encodeWire({ ret: true, nonce: req.nonce }) }), "MINION_AUTH_INVALID");
    });

    for (const name of ["pillar-request", "minion-event-request", "return-request"]) {
      test(`${name}: our AES request's plaintext equals the captured one byte for byte`, () => {
        const cap = chosen(gen, name);
        const key = keys.get(cap.key_used!)!;
        const capEnv = decodeWire(b64(cap.payload_msgpack_b64)) as Record<string, any>;
        const capInner = new Crypticle(key).loads(capEnv.load) as Record<string, any>;
        const load: Record<string, unknown> = { ...capInner };
        delete load.nonce;
        delete load.ts;
        if (gen === "v3-3007") delete load.tok; // the channel adds it (events carry their own, in place)
        if (name === "minion-event-request") load.tok = capInner.tok; // _fire_master puts tok in the event itself
        const ordered: Record<string, unknown> = {};
        for (const k of Object.keys(capInner)) if (k in load) ordered[k] = load[k];
        const pkg = packageAes(crypto(gen, key, masterPubText), ordered, { nonce: capInner.nonce, ts: capInner.ts });
        const ours = decodeWire(pkg.body) as Record<string, any>;
        assert.deepEqual(Object.keys(ours), Object.keys(capEnv), "envelope fields");
        for (const k of Object.keys(capEnv)) if (k !== "load") assert.deepEqual(ours[k], capEnv[k], k);
        const plain = new Crypticle(key).decrypt(ours.load);
        const capPlain = new Crypticle(key).decrypt(capEnv.load);
        assert.deepEqual(plain, capPlain, "plaintext bytes");
        if (gen === "v3-3007") assert.equal(x931Recover(minionKeys(gen).publicKey, (decodeWire(plain.subarray(8)) as any).tok).toString(), "salt");
      });
    }

    test("captured AES reply opens with the request's nonce, and not with another", () => {
      const req = chosen(gen, "return-request");
      const rep = chosen(gen, "return-reply");
      const key = keys.get(rep.key_used!)!;
      const nonce = (new Crypticle(key).loads((decodeWire(b64(req.payload_msgpack_b64)) as any).load) as any).nonce;
      const reply = decodeWire(b64(rep.payload_msgpack_b64));
      assert.equal(openAesReply(new Crypticle(key), reply, nonce), null);
      assert.throws(() => openAesReply(new Crypticle(key), reply, "f".repeat(32)), (e: unknown) => isBrineError(e, "CRYPTICLE_NONCE"));
      assert.throws(() => openAesReply(new Crypticle(key), "bad load", nonce), (e: unknown) => isBrineError(e, "CRYPTICLE_FORMAT"));
    });

    test("captured private _pillar reply: signature, key and nonce verified; pillar opened", () => {
      const req = chosen(gen, "pillar-request");
      const rep = chosen(gen, "pillar-reply");
      const key = keys.get(req.key_used!)!;
      const nonce = (new Crypticle(key).loads((decodeWire(b64(req.payload_msgpack_b64)) as any).load) as any).nonce;
      const c = crypto(gen, key, pinned);
      const reply = decodeWire(b64(rep.payload_msgpack_b64)) as Record<string, any>;
      assert.deepEqual(openPrivateReply(c, reply, nonce), { demo: { greeting: "Hello" } });
      assert.throws(() => openPrivateReply(c, reply, "0".repeat(32)), (e: unknown) => isBrineError(e, "CRYPTICLE_AUTH"));
      // a reply whose inner signature is not the master's
      const oneTime = oaepDecrypt(minionKeys(gen).privateKey, reply.key).toString("latin1");
      const signed = new Crypticle(oneTime).loads(reply.pillar) as Record<string, any>;
      const bad = { ...signed, sig: Buffer.alloc(256, 1) };
      const forged = { key: reply.key, pillar: new Crypticle(oneTime).dumps(bad) };
      assert.throws(() => openPrivateReply(c, forged, nonce), (e: unknown) => isBrineError(e, "CRYPTICLE_AUTH"));
      // a one-time key the minion cannot open
      const wrongKey = { ...reply, key: oaepEncrypt(publicKey(masterPubText), Buffer.from(oneTime)) };
      assert.throws(() => openPrivateReply(c, wrongKey, nonce));
      assert.ok(isMap(fromView((rep.payload as any))));
    });
  });
}
