/**
 * What a sign-in thread keeps per minion between its sign-ins, the two OAEP ciphertexts, is held as strings in
 * the V8 heap, not as one ArrayBuffer per value (the verified tok is in the master's accepted-key table,
 * test/pki/shared-accepted-keys.test.ts): a
 * kept 256-byte Buffer costs ~820 B of RSS (its backing store and V8 objects) against ~270 B for the string, and
 * every thread keeps them for every minion it served (issue 17, memory per connected minion).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { AuthCipherCache } from "../../src/workers/req-handler/auth-cipher-cache.js";
import { generateKeyString } from "../../src/shared/protocol/crypticle.js";
import { arrayBuffersAfterGc } from "../helpers/memory.js";

test("the sign-in ciphertexts of 1,000 minions keep no ArrayBuffer per minion", () => {
  const minions = 1000;
  const { publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const c = new AuthCipherCache(minions);
  const aes = generateKeyString();
  const sessions = Array.from({ length: minions }, () => generateKeyString());
  const before = arrayBuffersAfterGc();
  for (let i = 0; i < minions; i++) c.ciphertexts(`m${i}`, i + 1, publicKey, "OAEP-SHA1", aes, sessions[i]!);
  const grown = arrayBuffersAfterGc() - before;
  // two ArrayBuffers per minion would be 1,000 × 512 B = 512 KB
  assert.ok(grown < 64 * 1024, `ArrayBuffer memory grew by ${grown} bytes for ${minions} minions' ciphertexts`);
});
