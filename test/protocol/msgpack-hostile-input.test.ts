/**
 * The wire decoder against hostile input (reference-points E2): every malformed frame is a coded
 * error, quickly, with bounded memory — never a crash, a hang or a silent wrong value.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeWire, encodeWire } from "../../src/shared/protocol/msgpack.js";
import { BrineError } from "../../src/shared/errors.js";

const code = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof BrineError, `not a BrineError: ${e}`);
    return e.code;
  }
  assert.fail("no error");
};

test("truncated frames at every cut point fail with a coded error", () => {
  const full = encodeWire({ enc: "aes", load: Buffer.alloc(300, 7), version: 3, id: "m1", list: [1, 2, { a: "b" }] });
  for (let cut = 0; cut < full.length; cut++) assert.ok(["MSGPACK_TRUNCATED", "MSGPACK_INVALID"].includes(code(() => decodeWire(full.subarray(0, cut)))!));
});

test("trailing bytes after the value are refused", () => {
  assert.equal(code(() => decodeWire(Buffer.concat([encodeWire({ a: 1 }), Buffer.from([0xc0])]))), "MSGPACK_INVALID");
});

test("100k nested arrays: refused by depth, no stack overflow", () => {
  const deep = Buffer.alloc(100_000, 0x91);
  assert.equal(code(() => decodeWire(deep)), "MSGPACK_TOO_DEEP");
});

test("a 32-bit length prefix with no data behind it is refused before allocating", () => {
  // an allocation of 2^32 elements would be a RangeError or an out-of-memory end, not this code
  assert.equal(code(() => decodeWire(Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff]))), "MSGPACK_TRUNCATED");
  assert.equal(code(() => decodeWire(Buffer.from([0xdf, 0x7f, 0xff, 0xff, 0xff]))), "MSGPACK_TRUNCATED");
  assert.equal(code(() => decodeWire(Buffer.from([0xdb, 0xff, 0xff, 0xff, 0xff]))), "MSGPACK_TRUNCATED");
});

test("chained array16 memory bomb is bounded by the element budget", () => {
  // each level claims 65535 elements; without counting, a few KB would expand enormously
  const bomb = Buffer.concat(Array.from({ length: 50 }, () => Buffer.from([0xdc, 0xff, 0xff])));
  assert.ok(["MSGPACK_TRUNCATED", "MSGPACK_TOO_MANY"].includes(code(() => decodeWire(bomb))!));
});

test("unknown ext types are refused; Salt's 78 (datetime) and 79 (constant) are decoded", () => {
  assert.equal(code(() => decodeWire(Buffer.from([0xd4, 0x42, 0x00]))), "MSGPACK_EXT");
  const dt = Buffer.concat([Buffer.from([0xc7, 26, 78]), Buffer.from("20261121T15:54:04.342049")]);
  assert.equal(code(() => decodeWire(dt)), "MSGPACK_TRUNCATED"); // declared 26, has 24
  const dt2 = Buffer.concat([Buffer.from([0xc7, 24, 78]), Buffer.from("20261121T15:54:04.342049")]);
  assert.equal(decodeWire(dt2), "20261121T15:54:04.342049");
  const inner = encodeWire(["__NONE__", null]);
  const c = Buffer.concat([Buffer.from([0xc7, inner.length, 79]), inner]);
  assert.equal(decodeWire(c), null);
});

test("the containers inside Salt's constant ext (79) count toward the frame's element limit, and a tally counts every element decoded", () => {
  // an array of 4 constants, each [name, an array of 100 nils]: 4 + 4 × (2 + 100) elements in all
  const inner = Buffer.concat([Buffer.from([0x92, 0xa1, 0x78, 0xdc, 0x00, 100]), Buffer.alloc(100, 0xc0)]);
  const one = Buffer.concat([Buffer.from([0xc7, inner.length, 79]), inner]);
  const frame = Buffer.concat([Buffer.from([0x94]), one, one, one, one]);
  const limits = { bytesMax: 1 << 20, depthMax: 10, elementsMax: 4 + 4 * 102 };
  const tally = { elements: 0 };
  const v = decodeWire(frame, limits, false, undefined, tally) as unknown[];
  assert.equal(v.length, 4);
  assert.equal((v[3] as unknown[]).length, 100);
  assert.equal(tally.elements, 4 + 4 * 102);
  // one fewer: refused, though each constant alone is far under the limit
  assert.equal(code(() => decodeWire(frame, { ...limits, elementsMax: 4 + 4 * 102 - 1 })), "MSGPACK_TOO_MANY");
});

test("__proto__ keys are plain own properties, never prototypes", () => {
  const f = Buffer.from([0x81, 0xa9, ...Buffer.from("__proto__"), 0x81, 0xa1, 0x78, 0x01]);
  const v = decodeWire(f) as Record<string, unknown>;
  assert.deepEqual(Object.getPrototypeOf(v), Object.prototype);
  assert.equal(({} as Record<string, unknown>).x, undefined);
  assert.deepEqual(Object.keys(v), ["__proto__"]);
});

test("non-UTF-8 str values stay bytes; valid UTF-8 becomes text", () => {
  const f = Buffer.from([0x92, 0xa2, 0xc3, 0xa9, 0xa2, 0xff, 0xfe]);
  const [a, b] = decodeWire(f) as [unknown, unknown];
  assert.equal(a, "é");
  assert.deepEqual(b, Buffer.from([0xff, 0xfe]));
});

test("random garbage never throws anything but a BrineError", () => {
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  for (let i = 0; i < 20_000; i++) {
    const b = Buffer.alloc(1 + Math.floor(rnd() * 64));
    for (let j = 0; j < b.length; j++) b[j] = Math.floor(rnd() * 256);
    try {
      decodeWire(b);
    } catch (e) {
      assert.ok(e instanceof BrineError, `input ${b.toString("hex")}: ${e}`);
    }
  }
});
