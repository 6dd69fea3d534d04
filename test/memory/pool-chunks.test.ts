/**
 * What a request thread keeps per minion must not be a slice of Buffer's shared 8 KiB allocation pool: a kept
 * slice keeps its whole pool chunk alive, so a 10-byte id or a 56-byte key cost up to 8 KiB per minion and thread
 * (issue 17, memory per connected minion). Each case keeps one small thing per "minion" with other pooled
 * allocations in between (a request's own buffers), and the ArrayBuffer memory left after a full collection is
 * compared with what the kept bytes need.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeWire, encodeWire } from "../../src/shared/protocol/msgpack.js";
import { Crypticle, generateKeyString } from "../../src/shared/protocol/crypticle.js";
import { arrayBuffersAfterGc } from "../helpers/memory.js";

/** Pooled allocations a request makes between two minions' (Buffer.from of a few KiB: the pool moves on). */
let churn: Buffer[] = [];
function requestChurn(): void {
  churn.push(Buffer.from("x".repeat(3000), "latin1"), Buffer.from("y".repeat(3000), "latin1"));
  if (churn.length > 64) churn = [];
}

test("minion ids the wire decoder caches as strings keep no pooled Buffer chunk alive", () => {
  const minions = 4096;
  const frames = Array.from({ length: minions }, (_, i) => encodeWire({ id: `pool-${String(i).padStart(5, "0")}`, cmd: "_return" }));
  const before = arrayBuffersAfterGc();
  for (const f of frames) {
    requestChurn();
    assert.equal(typeof (decodeWire(Buffer.from(f)) as { id: string }).id, "string");
  }
  churn = [];
  const grown = arrayBuffersAfterGc() - before;
  // 4,096 cached ids of 10 bytes: ~40 KB of bytes; one pool chunk pinned per id would be ~32 MB
  assert.ok(grown < 4 * 1024 * 1024, `ArrayBuffer memory grew by ${grown} bytes for ${minions} cached ids`);
});

test("a session Crypticle's key is an allocation of its own, not a slice of the pool", () => {
  const minions = 2000;
  const keys = Array.from({ length: minions }, () => generateKeyString());
  const before = arrayBuffersAfterGc();
  const kept: Crypticle[] = [];
  for (const k of keys) {
    requestChurn();
    kept.push(new Crypticle(k));
  }
  churn = [];
  const grown = arrayBuffersAfterGc() - before;
  // 2,000 keys of 56 bytes: ~112 KB; one pool chunk pinned per key would be ~16 MB
  assert.ok(grown < 2 * 1024 * 1024, `ArrayBuffer memory grew by ${grown} bytes for ${kept.length} Crypticles`);
  const c = kept[0]!;
  assert.deepEqual(new Crypticle(keys[0]!).loads(c.dumps({ a: 1 })), { a: 1 }, "the key still works");
});
