/**
 * A sign-in's reply as the request thread frames it (auth.ts): packed exactly as encodeWire packs the same value, for a
 * minion without a protocol version (an unsigned `{enc: "clear", load}`, which no other test sends) and with one
 * (Salt's `_clear_signed`, whose signature covers the load's bytes), accepted and refused; the accepted load opens
 * with the minion's key (token, AES key, session key) and carries the request's nonce. A change to how the reply is
 * packed (session 18 measured one that writes the accept load into one buffer) must keep every byte of it.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { requestContext, type RequestContext } from "../helpers/request-context.js";
import { handleRequest } from "../../src/workers/req-handler/request.js";
import { newEffects } from "../../src/workers/req-handler/context.js";
import { decodeWire, encodeWire } from "../../src/shared/protocol/msgpack.js";
import { oaepDecrypt, oaepEncrypt, publicKey, rsaVerify } from "../../src/shared/protocol/rsa.js";
import { testKeys } from "../helpers/minions.js";

type Reply = { enc: string; load: Buffer | Record<string, unknown>; sig?: Buffer };

describe("a sign-in's reply framing", { timeout: 60_000 }, () => {
  let rc: RequestContext;
  before(async () => {
    rc = await requestContext("brine-sign-in-framing-", "m1");
  });
  after(async () => {
    await rc?.close();
  });

  const signIn = async (version: number | undefined, pub: string, nonce?: string) => {
    const token = randomBytes(32);
    const load: Record<string, unknown> = { cmd: "_auth", id: "m1", pub, token: oaepEncrypt(publicKey(rc.ctx.masterPubClean), token), enc_algo: "OAEP-SHA1", sig_algo: "PKCS1v15-SHA1" };
    if (nonce !== undefined) load.nonce = nonce;
    const frame = encodeWire(version === undefined ? { enc: "clear", load } : { enc: "clear", load, version });
    const bytes = await handleRequest(rc.ctx, frame, newEffects());
    return { bytes, reply: decodeWire(bytes) as unknown as Reply, token };
  };

  test("a minion without a protocol version gets its accept reply unsigned, as encodeWire packs it", async () => {
    const { bytes, reply, token } = await signIn(undefined, rc.keys.pub, "ab".repeat(16));
    assert.equal(Buffer.compare(bytes, encodeWire(reply)), 0);
    assert.equal(reply.enc, "clear");
    assert.equal(reply.sig, undefined);
    const load = reply.load as Record<string, unknown>;
    assert.deepEqual(Object.keys(load), ["enc", "pub_key", "publish_port", "token", "aes", "session", "sig", "nonce"]);
    assert.equal(load.nonce, "ab".repeat(16));
    assert.equal(Buffer.compare(oaepDecrypt(rc.keys.privateKey, load.token as Buffer), token), 0);
    assert.equal(oaepDecrypt(rc.keys.privateKey, load.aes as Buffer).toString("latin1"), rc.aesKey);
  });

  test("a protocol 2 and 3 minion gets its accept reply signed over the load's bytes, with and without a nonce", async () => {
    for (const version of [2, 3]) {
      for (const nonce of ["cd".repeat(16), undefined]) {
        const { bytes, reply, token } = await signIn(version, rc.keys.pub, nonce);
        assert.equal(Buffer.compare(bytes, encodeWire(reply)), 0);
        assert.ok(Buffer.isBuffer(reply.load));
        assert.equal(rsaVerify(publicKey(rc.ctx.masterPubClean), reply.load as Buffer, reply.sig!, "PKCS1v15-SHA1"), true);
        const load = decodeWire(reply.load as Buffer) as Record<string, unknown>;
        assert.equal(Buffer.compare(reply.load as Buffer, encodeWire(load)), 0);
        assert.equal(load.nonce, nonce);
        assert.equal(load.pub_key, rc.ctx.masterPubClean);
        assert.equal(Buffer.compare(oaepDecrypt(rc.keys.privateKey, load.token as Buffer), token), 0);
        assert.equal(oaepDecrypt(rc.keys.privateKey, load.session as Buffer).length > 0, true);
      }
    }
  });

  test("a refusal is framed the same way: unsigned without a version, signed with one", async () => {
    const other = (await testKeys(2))[1]!.pub; // not the accepted key: denied
    const v1 = await signIn(undefined, other, "ef".repeat(16));
    assert.equal(Buffer.compare(v1.bytes, encodeWire(v1.reply)), 0);
    assert.deepEqual(v1.reply.load, { ret: false, nonce: "ef".repeat(16) });
    const v3 = await signIn(3, other, "ef".repeat(16));
    assert.equal(Buffer.compare(v3.bytes, encodeWire(v3.reply)), 0);
    assert.deepEqual(decodeWire(v3.reply.load as Buffer), { ret: false, nonce: "ef".repeat(16) });
  });
});
