/**
 * What a request thread keeps per minion between its requests, the verified tok (request lane) and the sign-in's
 * two OAEP ciphertexts (sign-in lane), is held as strings in the V8 heap, not as one ArrayBuffer per value: a
 * kept 256-byte Buffer costs ~820 B of RSS (its backing store and V8 objects) against ~270 B for the string, and
 * every thread keeps them for every minion it served (issue 17, memory per connected minion).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import v8 from "node:v8";
import { runInNewContext } from "node:vm";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { VerifiedToks } from "../../src/workers/req-handler/verified-toks.js";
import { AuthCipherCache } from "../../src/workers/req-handler/auth-cipher-cache.js";
import { generateKeyString } from "../../src/shared/protocol/crypticle.js";

v8.setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

function arrayBuffersAfterGc(): number {
  gc();
  gc();
  return process.memoryUsage().arrayBuffers;
}

test("verified toks of 4,000 minions keep no ArrayBuffer per minion", () => {
  const minions = 4000;
  const toks = Array.from({ length: minions }, () => randomBytes(256));
  const v = new VerifiedToks();
  const before = arrayBuffersAfterGc();
  for (let i = 0; i < minions; i++) v.add(`m${i}`, "PEM", Buffer.from(toks[i]!)); // a request's own copy, dropped after
  const grown = arrayBuffersAfterGc() - before;
  // one ArrayBuffer per tok would be 4,000 × 256 B = 1 MB
  assert.ok(grown < 128 * 1024, `ArrayBuffer memory grew by ${grown} bytes for ${minions} verified toks`);
  assert.equal(v.size, minions);
  assert.equal(v.has("m7", "PEM", toks[7]!), true);
});

test("the sign-in ciphertexts of 1,000 minions keep no ArrayBuffer per minion", () => {
  const minions = 1000;
  const { publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pem = publicKey.export({ type: "spki", format: "pem" }) as string;
  const c = new AuthCipherCache(minions);
  const aes = generateKeyString();
  const sessions = Array.from({ length: minions }, () => generateKeyString());
  const before = arrayBuffersAfterGc();
  for (let i = 0; i < minions; i++) c.ciphertexts(`m${i}`, pem, publicKey, "OAEP-SHA1", aes, sessions[i]!);
  const grown = arrayBuffersAfterGc() - before;
  // two ArrayBuffers per minion would be 1,000 × 512 B = 512 KB
  assert.ok(grown < 64 * 1024, `ArrayBuffer memory grew by ${grown} bytes for ${minions} minions' ciphertexts`);
});
