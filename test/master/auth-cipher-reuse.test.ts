/**
 * A returning minion's sign-in reuses the OAEP ciphertexts of unchanged keys; every change (AES key
 * rotation, new session key, new minion key, other padding) yields a ciphertext of the new value.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { AuthCipherCache, authCipherEntriesMax } from "../../src/workers/req-handler/auth-cipher-cache.js";
import { oaepDecrypt } from "../../src/shared/protocol/rsa.js";
import { generateKeyString } from "../../src/shared/protocol/crypticle.js";

let tags = 0;
/** a minion's key pair, and the tag its accepted key would have (AcceptedKey.tag) */
function minion() {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { priv: privateKey, key: publicKey, tag: ++tags };
}

test("unchanged keys reuse the ciphertexts; each change re-encrypts what changed", () => {
  const c = new AuthCipherCache(10);
  const m = minion();
  const aes1 = generateKeyString();
  const ses1 = generateKeyString();
  const a = c.ciphertexts("m1", m.tag, m.key, "OAEP-SHA1", aes1, ses1);
  assert.equal(oaepDecrypt(m.priv, a.aes, "OAEP-SHA1").toString("latin1"), aes1);
  assert.equal(oaepDecrypt(m.priv, a.session, "OAEP-SHA1").toString("latin1"), ses1);
  const again = c.ciphertexts("m1", m.tag, m.key, "OAEP-SHA1", aes1, ses1);
  // OAEP is randomised: equal bytes mean the ciphertext was reused, not made again
  assert.deepEqual(again.aes, a.aes, "same AES key: the same ciphertext");
  assert.deepEqual(again.session, a.session);

  const aes2 = generateKeyString();
  const rotated = c.ciphertexts("m1", m.tag, m.key, "OAEP-SHA1", aes2, ses1);
  assert.equal(oaepDecrypt(m.priv, rotated.aes, "OAEP-SHA1").toString("latin1"), aes2, "rotation reaches the minion");
  assert.equal(oaepDecrypt(m.priv, rotated.session, "OAEP-SHA1").toString("latin1"), ses1);

  const ses2 = generateKeyString();
  const renewed = c.ciphertexts("m1", m.tag, m.key, "OAEP-SHA1", aes2, ses2);
  assert.equal(oaepDecrypt(m.priv, renewed.session, "OAEP-SHA1").toString("latin1"), ses2);

  const sha224 = c.ciphertexts("m1", m.tag, m.key, "OAEP-SHA224", aes2, ses2);
  assert.equal(oaepDecrypt(m.priv, sha224.aes, "OAEP-SHA224").toString("latin1"), aes2, "other padding: encrypted again");

  const rekeyed = minion();
  const fresh = c.ciphertexts("m1", rekeyed.tag, rekeyed.key, "OAEP-SHA224", aes2, ses2);
  assert.equal(oaepDecrypt(rekeyed.priv, fresh.aes, "OAEP-SHA224").toString("latin1"), aes2, "new minion key: encrypted to it");
  assert.throws(() => oaepDecrypt(m.priv, fresh.aes, "OAEP-SHA224"));
});

test("the cache holds at most its bound of minions", () => {
  const c = new AuthCipherCache(2);
  const m = minion();
  const aes = generateKeyString();
  const first = c.ciphertexts("a", m.tag, m.key, "OAEP-SHA1", aes, aes);
  c.ciphertexts("b", m.tag, m.key, "OAEP-SHA1", aes, aes);
  c.ciphertexts("c", m.tag, m.key, "OAEP-SHA1", aes, aes);
  assert.notDeepEqual(c.ciphertexts("a", m.tag, m.key, "OAEP-SHA1", aes, aes).aes, first.aes, "the oldest entry was dropped: encrypted anew");
});

test("a key with no tag (its record was being written by another thread) is encrypted to and nothing is kept for it", () => {
  const c = new AuthCipherCache(10);
  const m = minion();
  const aes = generateKeyString();
  const first = c.ciphertexts("m1", 0, m.key, "OAEP-SHA1", aes, aes);
  const second = c.ciphertexts("m1", 0, m.key, "OAEP-SHA1", aes, aes);
  assert.equal(oaepDecrypt(m.priv, second.aes, "OAEP-SHA1").toString("latin1"), aes);
  assert.notDeepEqual(second.aes, first.aes, "encrypted anew each time");
});

test("a sign-in thread keeps the ciphertexts of its last 1,024 minions, not of every minion of a large fleet", () => {
  const c = new AuthCipherCache();
  const m = minion();
  const aes = generateKeyString();
  assert.equal(authCipherEntriesMax, 1_024);
  const first = c.ciphertexts("m0", m.tag, m.key, "OAEP-SHA1", aes, aes);
  for (let i = 1; i < authCipherEntriesMax; i++) c.ciphertexts(`m${i}`, m.tag, m.key, "OAEP-SHA1", aes, aes);
  assert.deepEqual(c.ciphertexts("m0", m.tag, m.key, "OAEP-SHA1", aes, aes).aes, first.aes, "within the bound: kept");
  for (let i = authCipherEntriesMax; i < authCipherEntriesMax + 10; i++) c.ciphertexts(`m${i}`, m.tag, m.key, "OAEP-SHA1", aes, aes);
  assert.deepEqual(c.ciphertexts("m0", m.tag, m.key, "OAEP-SHA1", aes, aes).aes, first.aes, "used last: kept past the bound (least recently used goes)");
  assert.notDeepEqual(c.ciphertexts("m1", m.tag, m.key, "OAEP-SHA1", aes, aes).aes, first.aes, "m1, unused since, was dropped: encrypted anew");
});
