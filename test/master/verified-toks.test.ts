/**
 * A request thread skips the RSA check of a minion's tok only when it is the very tok it verified last for that
 * minion while its accepted key was the same.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { VerifiedToks } from "../../src/workers/req-handler/verified-toks.js";

test("a tok is known verified only for its minion, its key and its exact bytes", () => {
  const v = new VerifiedToks();
  const tok = randomBytes(256);
  assert.equal(v.has("m1", "PEM-1", tok), false, "nothing verified yet");
  v.add("m1", "PEM-1", tok);
  assert.equal(v.has("m1", "PEM-1", Buffer.from(tok)), true, "the same bytes in another Buffer");
  const inFrame = Buffer.concat([Buffer.from("head"), tok, Buffer.from("tail")]);
  assert.equal(v.has("m1", "PEM-1", inFrame.subarray(4, 4 + 256)), true, "the same bytes as a view into a request frame");
  assert.equal(v.has("m2", "PEM-1", tok), false, "another minion");
  assert.equal(v.has("m1", "PEM-2", tok), false, "the minion's key changed since");
  const other = Buffer.from(tok);
  other[255] ^= 1;
  assert.equal(v.has("m1", "PEM-1", other), false, "one bit differs");
  assert.equal(v.has("m1", "PEM-1", tok.subarray(0, 255)), false, "a prefix");
  v.add("m1", "PEM-1", other);
  assert.equal(v.has("m1", "PEM-1", tok), false, "only the tok verified last is kept");
  assert.equal(v.has("m1", "PEM-1", other), true);
});

test("bytes above 0x7f survive the round trip (every byte value)", () => {
  const v = new VerifiedToks();
  const tok = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  v.add("m", "P", tok);
  assert.equal(v.has("m", "P", Buffer.from(tok)), true);
});
