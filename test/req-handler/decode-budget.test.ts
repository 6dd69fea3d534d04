/**
 * A request worker's decode budget (src/workers/req-handler/decode-budget.ts): what its requests hold decoded at once
 * stays under decodedHeldBytesMax, a decode that would pass it is refused or given fewer elements, and the largest
 * request the wire limits let through is always taken when nothing else is held.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { DecodeBudget, decodedElementHeapBytesMax, decodedHeapBytes } from "../../src/workers/req-handler/decode-budget.js";
import { decodedHeldBytesMax, requestWorkerHeapMb } from "../../src/workers/req-handler/limits.js";
import { frameBytesMax, largeClearElementsMax, msgpackElementsMax } from "../../src/shared/protocol/limits.js";

test("the largest request the wire limits let through (its envelope and its load) fits the budget when nothing else is held, and the budget is a quarter of the worker's heap bound", () => {
  const envelope = decodedHeapBytes(largeClearElementsMax, frameBytesMax);
  const b = new DecodeBudget();
  assert.equal(b.elementsFor(frameBytesMax, largeClearElementsMax), largeClearElementsMax);
  b.charge(largeClearElementsMax, frameBytesMax);
  assert.equal(b.elementsFor(frameBytesMax), msgpackElementsMax, "its load may still make every element the wire allows");
  b.charge(msgpackElementsMax, frameBytesMax);
  assert.ok(b.held <= decodedHeldBytesMax, `${b.held} bytes charged`);
  assert.equal(b.held, envelope + decodedHeapBytes(msgpackElementsMax, frameBytesMax));
  assert.equal(decodedHeldBytesMax * 4, requestWorkerHeapMb * 1024 * 1024);
});

test("a decode is given only the elements left under the budget, and refused when its bytes alone pass it", () => {
  const b = new DecodeBudget(1000 * decodedElementHeapBytesMax);
  b.charge(600, 0);
  assert.equal(b.elementsFor(0), 400);
  assert.equal(b.elementsFor(100 * decodedElementHeapBytesMax), 300);
  assert.equal(b.elementsFor(0, 10), 10, "never more than the decode's own limit");
  assert.equal(b.elementsFor(400 * decodedElementHeapBytesMax), 0);
  assert.equal(b.elementsFor(400 * decodedElementHeapBytesMax + 1), -1);
});

test("a request's charge is held until given back, or freed at once when it lets go of its loads", () => {
  const b = new DecodeBudget(decodedHeldBytesMax);
  b.charge(10, 100);
  b.charge(5, 50);
  const kept = b.detach();
  assert.equal(kept, decodedHeapBytes(15, 150));
  assert.equal(b.held, kept, "detached, still held");
  b.charge(1000, 0);
  b.letGo();
  assert.equal(b.held, kept, "the second request let go: only the first's charge is held");
  assert.equal(b.detach(), 0, "nothing left to detach after letting go");
  b.give(kept);
  assert.equal(b.held, 0);
});
