import { test } from "node:test";
import assert from "node:assert/strict";
import { hashBytes, hashString, hrwScore, nodeHash } from "../../src/shared/sab-ring/hash.js";
import { prng } from "./minion-keys.js";

test("hashString is standard murmur3_x86_32 over UTF-8 (published vectors)", () => {
  assert.equal(hashString("", 0), 0);
  assert.equal(hashString("", 1), 0x514e28b7);
  assert.equal(hashString("", 0xffffffff), 0x81f16f39);
  assert.equal(hashString("hello", 0), 0x248bfa47);
  assert.equal(hashString("The quick brown fox jumps over the lazy dog", 0), 0x2e4ff723);
  assert.equal(hashBytes(new Uint8Array([0x21, 0x43, 0x65, 0x87]), 0), 0xf55b516b);
});

test("hashString equals murmur3 of TextEncoder's bytes for any string, surrogates included", () => {
  const rnd = prng(9);
  const te = new TextEncoder();
  const specials = ["é", "€", "😀", "\ud800", "a\udc00b", "\ud83d", "ab\ud83d\ude00cd", "minion-01.example.com"];
  for (const s of specials) assert.equal(hashString(s, 3), hashBytes(te.encode(s), 3), JSON.stringify(s));
  for (let t = 0; t < 20_000; t++) {
    let s = "";
    const len = Math.floor(rnd() * 14);
    for (let j = 0; j < len; j++) {
      const r = rnd();
      if (r < 0.6) s += String.fromCharCode(0x20 + Math.floor(rnd() * 0x5f));
      else if (r < 0.85) s += String.fromCharCode(Math.floor(rnd() * 0x10000));
      else s += String.fromCodePoint(0x10000 + Math.floor(rnd() * 0xfffff));
    }
    assert.equal(hashString(s, t), hashBytes(te.encode(s), t), JSON.stringify(s));
  }
});

test("slot indexes of numbered minion ids are uniform (low bits mix well)", () => {
  const counts = new Array<number>(4096).fill(0);
  const K = 409_600;
  for (let i = 0; i < K; i++) counts[hashString(`web-${i}`) & 4095]!++;
  // chi-square with 4095 degrees of freedom: mean 4095, sd ~90.5; 5 sd is a generous bound
  const chi2 = counts.reduce((acc, c) => acc + (c - 100) ** 2 / 100, 0);
  assert.ok(chi2 < 4095 + 5 * 90.5, `chi2 ${chi2.toFixed(0)}`);
});

test("HRW scores are unsigned 32-bit and differ between nodes and slots", () => {
  const a = nodeHash("master-01");
  const b = nodeHash("master-02");
  assert.notEqual(a, b);
  let aWins = 0;
  for (let s = 0; s < 4096; s++) {
    const sa = hrwScore(a, s);
    assert.ok(Number.isInteger(sa) && sa >= 0 && sa < 2 ** 32);
    if (sa > hrwScore(b, s)) aWins++;
  }
  assert.ok(aWins > 1800 && aWins < 2300, `${aWins}`);
});
