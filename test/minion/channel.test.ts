/**
 * Channel behaviour with fake transports: a "bad load" reply makes the minion sign in again and resend
 * once (and only once); a publish that does not decrypt makes it sign in again and decrypt the same
 * message; serials are checked; signed publishes are verified when asked.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { Crypticle, generateKeyString } from "../../src/shared/protocol/crypticle.js";
import { decodeWire, encodeWire, type WireValue } from "../../src/shared/protocol/msgpack.js";
import { privateKey, publicKey, rsaSign } from "../../src/shared/protocol/rsa.js";
import { BrineError, isBrineError } from "../../src/shared/errors.js";
import { MinionKeys } from "../../src/lib/minion/keys.js";
import { ReqChannel, type ChannelCrypto } from "../../src/lib/minion/req-channel.js";
import { PubDecoder } from "../../src/lib/minion/pub-channel.js";
import type { ReqTransport, RequestOptions } from "../../src/lib/zmq-req-client.js";
import { CoarseTimer } from "../../src/shared/coarse-timer.js";
import { chosen, readFixture, symmetricKeys } from "../helpers/fixtures.js";

const d = describe;
const gen = "v3-3007" as const;
const opts: RequestOptions = { timeoutMs: 1000, tries: 1 };

class FakeTransport implements ReqTransport {
  sent: Record<string, any>[] = [];
  constructor(private readonly answer: (inner: Record<string, any>, n: number) => WireValue) {}
  async request(body: Buffer): Promise<Buffer> {
    const env = decodeWire(body) as Record<string, any>;
    this.sent.push(env);
    return encodeWire(this.answer(env, this.sent.length));
  }
  close(): void {}
}

function minionCrypto(keyRef: { key: string }, onReauth: () => void): ChannelCrypto {
  const keys = new MinionKeys({ privatePem: readFixture(gen, "pki/minion/minion.pem"), publicPem: readFixture(gen, "pki/minion/minion.pub") });
  return {
    id: "m1",
    protocol: "v3",
    keys,
    encAlgo: "OAEP-SHA1",
    sigAlgo: "PKCS1v15-SHA1",
    sendAlgos: true,
    requestCrypticle: () => new Crypticle(keyRef.key),
    masterPubKey: () => publicKey(readFixture(gen, "pki/master/master.pub")),
    reauth: async () => onReauth(),
  };
}

d("request channel", () => {
  test('"bad load" → one re-auth, the same load resent with the new key, reply opened', async () => {
    const oldKey = generateKeyString();
    const newKey = generateKeyString();
    const ref = { key: oldKey };
    let reauths = 0;
    const c = minionCrypto(ref, () => {
      reauths++;
      ref.key = newKey;
    });
    const t = new FakeTransport((env, n) => {
      if (n === 1) return "bad load";
      const inner = new Crypticle(newKey).loads(env.load) as Record<string, any>;
      return new Crypticle(newKey).dumps({ echoed: inner.cmd }, inner.nonce);
    });
    let badLoads = 0;
    const ch = new ReqChannel(t, c, { onBadLoad: () => badLoads++ });
    const out = await ch.send({ cmd: "_return", jid: "1" }, opts);
    assert.deepEqual(out, { echoed: "_return" });
    assert.equal(reauths, 1);
    assert.equal(badLoads, 1);
    assert.equal(t.sent.length, 2);
    const first = new Crypticle(oldKey).loads(t.sent[0]!.load) as Record<string, any>;
    const second = new Crypticle(newKey).loads(t.sent[1]!.load) as Record<string, any>;
    assert.equal(first.jid, "1");
    assert.equal(second.jid, "1");
    assert.notEqual(first.nonce, second.nonce);
  });

  test('"bad load" twice → MINION_BAD_LOAD after exactly one re-auth', async () => {
    const ref = { key: generateKeyString() };
    let reauths = 0;
    const t = new FakeTransport(() => "bad load");
    const ch = new ReqChannel(t, minionCrypto(ref, () => reauths++));
    await assert.rejects(ch.send({ cmd: "_return" }, opts), (e: unknown) => isBrineError(e, "MINION_BAD_LOAD"));
    assert.equal(reauths, 1);
    assert.equal(t.sent.length, 2);
  });

  test("a reply with the wrong nonce is not retried", async () => {
    const ref = { key: generateKeyString() };
    let reauths = 0;
    const t = new FakeTransport(() => new Crypticle(ref.key).dumps(null, "0".repeat(32)));
    const ch = new ReqChannel(t, minionCrypto(ref, () => reauths++));
    await assert.rejects(ch.send({ cmd: "_return" }, opts), (e: unknown) => isBrineError(e, "MINION_BAD_REPLY"));
    assert.equal(reauths, 0);
  });

  test("private reply missing `key` → re-auth and resend", async () => {
    const ref = { key: generateKeyString() };
    let reauths = 0;
    const rep = chosen(gen, "pillar-reply");
    const t = new FakeTransport((_env, n) => (n === 1 ? "bad load" : { nope: 1 }));
    const ch = new ReqChannel(t, minionCrypto(ref, () => reauths++));
    await assert.rejects(ch.sendPrivate({ cmd: "_pillar" }, opts), (e: unknown) => isBrineError(e, "MINION_BAD_REPLY"));
    assert.equal(reauths, 1);
    assert.ok(rep);
    // Salt's crypted_transfer_decode_dictentry packages the resend with the same nonce, sealed again
    const nonces = t.sent.map((env) => (new Crypticle(ref.key).loads(env.load) as Record<string, any>).nonce);
    assert.equal(nonces.length, 2);
    assert.equal(nonces[0], nonces[1]);
    assert.notDeepEqual(t.sent[0]!.load, t.sent[1]!.load);
  });
});

/** A transport whose first `timeouts` requests time out; it records each body and the tries it was given. */
class TimingOutTransport implements ReqTransport {
  calls: { body: Buffer; tries: number }[] = [];
  constructor(
    private readonly timeouts: number,
    private readonly answer: (env: Record<string, any>) => WireValue,
  ) {}
  async request(body: Buffer, o: RequestOptions): Promise<Buffer> {
    this.calls.push({ body, tries: o.tries });
    if (this.calls.length <= this.timeouts) throw new BrineError("MINION_REQ_TIMEOUT", "1 × 1000 ms");
    return encodeWire(this.answer(decodeWire(body) as Record<string, any>));
  }
  close(): void {}
}

d("tries, as Salt's request channel makes them", () => {
  const nonceOf = (key: string, body: Buffer) => (new Crypticle(key).loads((decodeWire(body) as Record<string, any>).load) as Record<string, any>).nonce as string;

  test("send: a try that timed out is packaged again, a new nonce in new bytes (AsyncReqChannel.send, 3006.8 and 3007.x)", async () => {
    const ref = { key: generateKeyString() };
    const t = new TimingOutTransport(2, (env) => {
      const inner = new Crypticle(ref.key).loads(env.load) as Record<string, any>;
      return new Crypticle(ref.key).dumps(true, inner.nonce);
    });
    const ch = new ReqChannel(t, minionCrypto(ref, () => undefined));
    assert.equal(await ch.send({ cmd: "_return", jid: "1" }, { timeoutMs: 1000, tries: 3 }), true);
    assert.deepEqual(t.calls.map((c) => c.tries), [1, 1, 1], "the channel makes each try itself");
    const nonces = t.calls.map((c) => nonceOf(ref.key, c.body));
    assert.equal(new Set(nonces).size, 3, `three nonces: ${nonces.join(", ")}`);
  });

  test("send: out of tries, the timeout is the caller's", async () => {
    const ref = { key: generateKeyString() };
    const t = new TimingOutTransport(5, () => null);
    const ch = new ReqChannel(t, minionCrypto(ref, () => undefined));
    await assert.rejects(ch.send({ cmd: "_return" }, { timeoutMs: 1000, tries: 2 }), (e: unknown) => isBrineError(e, "MINION_REQ_TIMEOUT"));
    assert.equal(t.calls.length, 2);
  });

  test("sendPrivate (_pillar): packaged once; the transport's tries send those very bytes again (crypted_transfer_decode_dictentry)", async () => {
    const ref = { key: generateKeyString() };
    const t = new TimingOutTransport(0, () => ({ nope: 1 }));
    const ch = new ReqChannel(t, minionCrypto(ref, () => undefined));
    await assert.rejects(ch.sendPrivate({ cmd: "_pillar" }, { timeoutMs: 1000, tries: 3 }));
    assert.equal(t.calls[0]!.tries, 3, "the transport resends the same body on a timeout");
  });

  test("v2 (3006.8): the resend after a re-auth keeps the nonce; v3 (3007.x) takes a new one", async () => {
    for (const protocol of ["v2", "v3"] as const) {
      const ref = { key: generateKeyString() };
      const t = new FakeTransport((env, n) => {
        if (n === 1) return "bad load";
        const inner = new Crypticle(ref.key).loads(env.load) as Record<string, any>;
        return new Crypticle(ref.key).dumps(true, inner.nonce);
      });
      const ch = new ReqChannel(t, { ...minionCrypto(ref, () => undefined), protocol });
      assert.equal(await ch.send({ cmd: "_return" }, opts), true);
      const [a, b] = t.sent.map((env) => (new Crypticle(ref.key).loads(env.load) as Record<string, any>).nonce);
      if (protocol === "v2") assert.equal(a, b, "3006.8: one nonce per _crypted_transfer");
      else assert.notEqual(a, b, "3007.x: one nonce per _do_transfer");
    }
  });
});

d("publish decoder", () => {
  const keys = symmetricKeys(gen);
  const frame = (name: string) => Buffer.from(chosen(gen, name).payload_msgpack_b64, "base64");
  const masterPub = () => publicKey(readFixture(gen, "pki/master/master.pub"));

  test("captured publish decrypts; the same serial again is dropped", async () => {
    const aes = new Crypticle(keys.get("aes-1")!);
    const dec = new PubDecoder({ aesCrypticle: () => aes, masterPubKey: masterPub, reauth: async () => assert.fail("no re-auth") });
    const out = await dec.decode(frame("publish"));
    assert.equal(out.kind, "load");
    if (out.kind === "load") {
      assert.equal(out.load.fun, "test.ping");
      assert.equal("serial" in out.load, false);
    }
    const again = await dec.decode(frame("publish"));
    assert.deepEqual(again, { kind: "drop", reason: "stale-serial" });
  });

  test("sign_pub_messages: the captured signature verifies, a broken one is dropped", async () => {
    const aes = new Crypticle(keys.get("aes-1")!);
    const dec = new PubDecoder({ aesCrypticle: () => aes, masterPubKey: masterPub, reauth: async () => {} }, { signPubMessages: true });
    assert.equal((await dec.decode(frame("publish"))).kind, "load");
    const env = decodeWire(frame("rotation-publish")) as Record<string, any>;
    env.sig = Buffer.from(env.sig);
    env.sig[0] ^= 0xff;
    const out = await dec.decode(encodeWire(env));
    assert.equal(out.kind === "drop" && out.reason, "bad-sig");
    const unsigned = { ...env };
    delete unsigned.sig;
    const out2 = await dec.decode(encodeWire(unsigned));
    assert.equal(out2.kind === "drop" && out2.reason, "bad-sig");
  });

  test("a publish under a new AES key → random delay, re-auth, the same message decrypted", async () => {
    let current = new Crypticle(keys.get("aes-1")!);
    let reauths = 0;
    const timer = new CoarseTimer(5);
    const dec = new PubDecoder(
      {
        aesCrypticle: () => current,
        masterPubKey: masterPub,
        reauth: async () => {
          reauths++;
          current = new Crypticle(keys.get("aes-3")!);
        },
      },
      { randomReauthDelayMs: 20, timer, random: () => 0.5 },
    );
    const out = await dec.decode(frame("master-restart-publish"));
    assert.equal(reauths, 1);
    assert.equal(out.kind, "load");
    if (out.kind === "load") assert.equal(out.reauthed, true);
    assert.equal(timer.pending, 0);
  });

  test("non-aes envelopes are ignored, garbage is dropped", async () => {
    const dec = new PubDecoder({ aesCrypticle: () => undefined, masterPubKey: () => undefined, reauth: async () => {} });
    assert.deepEqual(await dec.decode(encodeWire({ enc: "clear", load: {} })), { kind: "drop", reason: "not-aes" });
    assert.equal((await dec.decode(Buffer.from([0xc1]))).kind, "drop");
    const sig = rsaSign(privateKey(readFixture(gen, "pki/master/master.pem")), Buffer.from("x"));
    assert.equal(sig.length, 256);
  });
});
