/**
 * The shared nonce set: a nonce is accepted once, refused while it is remembered (one to two windows),
 * and across threads racing on the same nonces exactly one thread wins each.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { Worker } from "node:worker_threads";
import { NonceSet } from "../../src/shared/nonce-set.js";

const nonce = () => randomBytes(16).toString("hex");

test("a nonce is accepted once and refused until two rotations have passed", () => {
  const s = new NonceSet(4096);
  const n = nonce();
  assert.equal(s.checkAndInsert(n), true);
  assert.equal(s.checkAndInsert(n), false, "replay in the same window");
  assert.equal(s.checkAndInsert(n.toUpperCase()), false, "hex case does not make a new nonce");
  s.rotate();
  assert.equal(s.checkAndInsert(n), false, "still remembered one window later");
  s.rotate();
  assert.equal(s.checkAndInsert(n), true, "forgotten after the second rotation");
});

test("nonces that share their first 32 bits or land in the same slot stay distinct", () => {
  const s = new NonceSet(1024);
  const head = "deadbeef";
  // (from 2: words 0 and 1 are one value in the set, by design)
  const ids = Array.from({ length: 20 }, (_, i) => `${head}${(i + 2).toString(16).padStart(8, "0")}${"0".repeat(16)}`);
  for (const n of ids) assert.equal(s.checkAndInsert(n), true, n);
  for (const n of ids) assert.equal(s.checkAndInsert(n), false, n);
  // all-zero words are stored as 1: still remembered
  const zero = "0".repeat(32);
  assert.equal(s.checkAndInsert(zero), true);
  assert.equal(s.checkAndInsert(zero), false);
});

test("a malformed nonce is not recorded (the envelope check refuses it, not the set)", () => {
  const s = new NonceSet(1024);
  assert.equal(s.checkAndInsert("zz" + "0".repeat(30)), true);
  assert.equal(s.checkAndInsert("zz" + "0".repeat(30)), true);
  assert.equal(s.checkAndInsert("abc"), true);
});

test("threads racing on the same nonces: each nonce is accepted by exactly one of them", async () => {
  const s = new NonceSet(1 << 16);
  const nonces = Array.from({ length: 20_000 }, nonce);
  const src = `
    const { parentPort, workerData } = require("node:worker_threads");
    import(workerData.mod).then(({ NonceSet }) => {
      const s = new NonceSet(workerData.sab);
      let won = 0;
      for (const n of workerData.nonces) if (s.checkAndInsert(n)) won++;
      parentPort.postMessage(won);
    });`;
  const mod = new URL("../../src/shared/nonce-set.js", import.meta.url).href;
  const threads = 4;
  const wins = await Promise.all(
    Array.from({ length: threads }, (_, t) => {
      // every thread walks the same nonces, each from a different starting point, to collide often
      const order = nonces.slice(t * 5000).concat(nonces.slice(0, t * 5000));
      const w = new Worker(src, { eval: true, workerData: { sab: s.sab, nonces: order, mod } });
      return new Promise<number>((resolve, reject) => {
        w.once("message", resolve);
        w.once("error", reject);
      });
    }),
  );
  assert.equal(wins.reduce((a, b) => a + b, 0), nonces.length, `wins per thread: ${wins.join(", ")}`);
  assert.equal(s.overflows(), 0);
  for (const n of nonces) assert.equal(s.checkAndInsert(n), false);
});
