/**
 * Crypticle keeps one AES-CBC context per key and direction across messages. Every message must still
 * be byte for byte the CBC of a fresh context under its own IV, in any interleaving of encryptions,
 * decryptions, refused ciphertexts and sizes, and both directions must interoperate with one-shot
 * node:crypto (what any other Salt implementation does).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createCipheriv, createDecipheriv, createHmac, randomBytes } from "node:crypto";
import { cipherContextHolders, cipherContextHoldersMax, Crypticle, generateKeyString, PICKLE_PREFIX } from "../../src/shared/protocol/crypticle.js";
import { isBrineError } from "../../src/shared/errors.js";
import { decodeWire, wireLimits } from "../../src/shared/protocol/msgpack.js";

function keys(keyString: string): { aes: Buffer; hmac: Buffer } {
  const raw = Buffer.from(keyString, "base64");
  return { aes: raw.subarray(0, 24), hmac: raw.subarray(24) };
}

/** Salt's encrypt with a fresh context: IV ‖ AES-192-CBC(PKCS#7) ‖ HMAC-SHA256(IV ‖ ct). */
function oneShotEncrypt(keyString: string, plain: Buffer): Buffer {
  const { aes, hmac } = keys(keyString);
  const iv = randomBytes(16);
  const c = createCipheriv("aes-192-cbc", aes, iv);
  const body = Buffer.concat([iv, c.update(plain), c.final()]);
  return Buffer.concat([body, createHmac("sha256", hmac).update(body).digest()]);
}

function oneShotDecrypt(keyString: string, data: Buffer): Buffer {
  const { aes, hmac } = keys(keyString);
  const body = data.subarray(0, data.length - 32);
  assert.deepEqual(createHmac("sha256", hmac).update(body).digest(), data.subarray(data.length - 32), "HMAC over IV ‖ ciphertext");
  const d = createDecipheriv("aes-192-cbc", aes, body.subarray(0, 16));
  return Buffer.concat([d.update(body.subarray(16)), d.final()]); // final() checks the PKCS#7 padding
}

test("interleaved encryptions and decryptions of every length match fresh-context CBC", () => {
  const k = generateKeyString();
  const c = new Crypticle(k);
  for (let n = 0; n < 200; n++) {
    const plain = randomBytes(n * 7);
    const mine = c.encrypt(plain);
    assert.deepEqual(oneShotDecrypt(k, mine), plain, `our ciphertext of ${plain.length} bytes`);
    const theirs = oneShotEncrypt(k, plain);
    assert.deepEqual(c.decrypt(theirs), plain, `their ciphertext of ${plain.length} bytes`);
    if (n % 3 === 0) assert.deepEqual(c.decrypt(mine), plain, "our own ciphertext, out of order");
  }
});

test("a refused or malformed ciphertext leaves later messages correct", () => {
  const k = generateKeyString();
  const c = new Crypticle(k);
  const good = oneShotEncrypt(k, Buffer.from("first"));
  assert.deepEqual(c.decrypt(good), Buffer.from("first"));
  const forged = Buffer.from(good);
  forged[20]! ^= 1;
  assert.throws(() => c.decrypt(forged), (e) => isBrineError(e, "CRYPTICLE_AUTH"));
  assert.throws(() => c.decrypt(Buffer.alloc(50)), (e) => isBrineError(e, "CRYPTICLE_FORMAT"));
  const next = oneShotEncrypt(k, Buffer.from("second message, longer than one block"));
  assert.deepEqual(c.decrypt(next), Buffer.from("second message, longer than one block"));
});

test("dumps writes pickle:: ‖ nonce ‖ msgpack and two instances of one key read each other", () => {
  const k = generateKeyString();
  const a = new Crypticle(k);
  const b = new Crypticle(k);
  const nonce = "0123456789abcdef0123456789abcdef";
  for (let i = 0; i < 50; i++) {
    const obj = { i, text: "x".repeat(i * 5) };
    const sealed = a.dumps(obj, nonce);
    const plain = oneShotDecrypt(k, sealed);
    assert.deepEqual(plain.subarray(0, 8), PICKLE_PREFIX);
    assert.equal(plain.subarray(8, 40).toString("latin1"), nonce);
    assert.deepEqual(b.loads(sealed, { nonce }), obj);
    assert.deepEqual(a.loads(b.dumps(obj)), obj);
  }
});

test("two messages with the same plaintext differ (fresh IV each time)", () => {
  const c = new Crypticle(generateKeyString());
  const p = Buffer.alloc(64, 7);
  const x = c.encrypt(p);
  const y = c.encrypt(p);
  assert.notDeepEqual(x.subarray(0, 16), y.subarray(0, 16));
  assert.notDeepEqual(x.subarray(16, 80), y.subarray(16, 80));
});

test("a framed dumps is the msgpack bin of the sealed bytes, across the bin 8/16/32 sizes", () => {
  const k = generateKeyString();
  const a = new Crypticle(k);
  const b = new Crypticle(k);
  const nonce = "fedcba9876543210fedcba9876543210";
  for (const size of [0, 100, 200, 300, 70_000]) {
    const obj = { data: "y".repeat(size) };
    const framed = a.dumps(obj, nonce, true);
    const inner = decodeWire(framed, wireLimits, false);
    assert.ok(Buffer.isBuffer(inner), `size ${size}: a bin`);
    assert.deepEqual(b.loads(inner, { nonce }), obj);
    assert.equal(framed[0], size < 150 ? 0xc4 : size < 65_000 ? 0xc5 : 0xc6, `size ${size}: header`);
  }
});

test("a thread keeps cipher contexts for a bounded number of crypticles; one whose contexts were dropped still encrypts and decrypts as a fresh context does", () => {
  const first = generateKeyString();
  const c = new Crypticle(first);
  // c holds contexts mid-chain: its next messages must not depend on them
  for (let i = 0; i < 3; i++) assert.deepEqual(oneShotDecrypt(first, c.encrypt(Buffer.from(`before ${i}`))), Buffer.from(`before ${i}`));
  assert.deepEqual(c.decrypt(oneShotEncrypt(first, Buffer.from("in"))), Buffer.from("in"));
  const others: Crypticle[] = [];
  for (let i = 0; i < cipherContextHoldersMax + 10; i++) {
    const k = generateKeyString();
    const o = new Crypticle(k);
    assert.deepEqual(o.decrypt(o.encrypt(Buffer.from("x"))), Buffer.from("x"));
    others.push(o);
  }
  assert.equal(cipherContextHolders(), cipherContextHoldersMax, "the bound holds after more crypticles than it");
  for (let i = 0; i < 3; i++) {
    const plain = randomBytes(40 + i * 17);
    assert.deepEqual(oneShotDecrypt(first, c.encrypt(plain)), plain, "encryption after the contexts were dropped");
    assert.deepEqual(c.decrypt(oneShotEncrypt(first, plain)), plain, "decryption after the contexts were dropped");
  }
  assert.equal(cipherContextHolders(), cipherContextHoldersMax);
});
