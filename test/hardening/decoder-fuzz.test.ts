/**
 * Property-based fuzzing (fast-check, bounded runs, fixed seeds: a failure prints its seed and path to replay)
 * of the decoders bytes from outside reach besides the minion request path: the strict wire decoder
 * (src/shared/protocol/msgpack.ts), the control socket's frame reader (src/shared/length-framing.ts), the event bus
 * stream reader and body splitter (src/shared/event-frame.ts), and the peer channel's frame decoders
 * (src/workers/raft/peer/framing.ts). Any bytes give a value or a coded BrineError: never another exception (a
 * RangeError, a TypeError, a stack overflow), never a hang; and what the encoders write decodes back.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Encoder } from "cbor-x";
import { BrineError } from "../../src/shared/errors.js";
import { decodeWire, decodeWirePrefix, encodeWire } from "../../src/shared/protocol/msgpack.js";
import { FrameReader, frame } from "../../src/shared/length-framing.js";
import { EventStreamReader, packEvent, unpackBody } from "../../src/shared/event-frame.js";
import { BODY, decodeBodies, decodeBody, decodeHello, decodeProof, decodeRefuse, encodeBody, encodeClear, FRAME, readSealedSeq, type Body } from "../../src/workers/raft/peer/framing.js";

const RUNS = 500;
const SEED = 0x13_0d15c;
const opts = (n = RUNS) => ({ numRuns: n, seed: SEED, endOnFailure: true });

/** Runs `f`; anything thrown must be a BrineError. */
function codedOnly(f: () => unknown): void {
  try {
    f();
  } catch (e) {
    if (!(e instanceof BrineError)) throw new Error(`not a coded error: ${(e as Error)?.stack ?? String(e)}`);
  }
}

const value = fc.jsonValue({ maxDepth: 4 });
/** bytes that are mostly msgpack: encodings of random values, cut, joined, with a few bytes changed */
const msgpackish = fc
  .tuple(fc.array(value, { minLength: 1, maxLength: 3 }), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }), fc.nat())
  .map(([vs, flips, cut]) => {
    const b = Buffer.concat(vs.map((v) => encodeWire(v)));
    for (const [at, byte] of flips) if (b.length) b[at % b.length] = byte;
    return b.subarray(0, b.length ? (cut % b.length) + 1 : 0);
  });
/** length prefixes and container headers that claim far more than follows */
const lyingHeaders = fc.constantFrom(
  Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff]),
  Buffer.from([0xdf, 0x7f, 0xff, 0xff, 0xff, 0xa1, 0x61]),
  Buffer.from([0xc6, 0xff, 0xff, 0xff, 0xf0]),
  Buffer.from([0xc9, 0x00, 0x00, 0x00, 0x10, 0x4f, 0x91]),
  Buffer.from(Array(300).fill(0x91)),
  Buffer.from([0xd4, 0x4f, 0xc1]),
);
const anyBytes = fc.oneof(fc.uint8Array({ maxLength: 600 }).map((u) => Buffer.from(u)), msgpackish, lyingHeaders);
const json = (v: unknown) => JSON.stringify(v, (_k, x) => (Buffer.isBuffer(x) ? x.toString("hex") : x));

test("decodeWire: any bytes give a value or a coded error", () => {
  fc.assert(
    fc.property(anyBytes, (b) => {
      codedOnly(() => decodeWire(b));
      codedOnly(() => decodeWirePrefix(b));
    }),
    opts(2000),
  );
});

test("decodeWire: what encodeWire writes decodes to the same value", () => {
  fc.assert(
    fc.property(value, (v) => {
      assert.equal(json(decodeWire(encodeWire(v))), json(v));
    }),
    opts(),
  );
});

/** `b` cut into pieces at the given points */
function split(b: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => (b.length ? c % (b.length + 1) : 0)))].sort((x, y) => x - y);
  const out: Buffer[] = [];
  let prev = 0;
  for (const c of [...at, b.length]) {
    out.push(b.subarray(prev, c));
    prev = c;
  }
  return out;
}

test("control socket FrameReader: any chunks give frames or a coded error", () => {
  fc.assert(
    fc.property(fc.array(anyBytes, { maxLength: 4 }), fc.array(fc.nat(), { maxLength: 6 }), (chunks, cuts) => {
      const r = new FrameReader();
      codedOnly(() => {
        for (const c of split(Buffer.concat(chunks), cuts)) r.push(c);
      });
    }),
    opts(),
  );
  // a length prefix claiming up to 4 GiB, then little: refused or waited for, never allocated
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 0xffffffff }), fc.uint8Array({ maxLength: 64 }), (len, rest) => {
      const head = Buffer.alloc(4);
      head.writeUInt32BE(len);
      codedOnly(() => new FrameReader().push(Buffer.concat([head, rest])));
    }),
    opts(),
  );
});

test("control socket FrameReader: frames split anywhere come out whole and in order", () => {
  fc.assert(
    fc.property(fc.array(value, { minLength: 1, maxLength: 5 }), fc.array(fc.nat(), { maxLength: 8 }), (vs, cuts) => {
      const r = new FrameReader();
      const got: unknown[] = [];
      for (const c of split(Buffer.concat(vs.map((v) => frame(v))), cuts)) got.push(...r.push(c));
      assert.equal(json(got), json(vs));
    }),
    opts(),
  );
});

/** a bus frame whose body is exactly `body` */
const rawFrame = (body: Buffer) => encodeWire({ head: {}, body });
/** tags of any bytes: "\n\n" inside, invalid UTF-8, control characters */
const tagBytes = fc.oneof(
  fc.uint8Array({ maxLength: 40 }).map((u) => Buffer.from(u)),
  fc.array(fc.constantFrom("salt/job/", "\n", "\n\n", "ret/", "\xff", "a", "/"), { maxLength: 8 }).map((p) => Buffer.from(p.join(""), "latin1")),
);
const eventBody = fc.tuple(tagBytes, fc.oneof(value.map((v) => encodeWire(v)), anyBytes)).map(([t, d]) => Buffer.concat([t, Buffer.from("\n\n"), d]));

test("bus: unpackBody gives an event or a coded error for any body", () => {
  fc.assert(
    fc.property(fc.oneof(eventBody, anyBytes), (b) => codedOnly(() => unpackBody(b))),
    opts(),
  );
});

test("bus: a stream of frames with any tag and data bytes, split anywhere, never throws and keeps plain tags", () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(tagBytes, value), { minLength: 1, maxLength: 5 }), fc.array(eventBody, { maxLength: 3 }), fc.array(fc.nat(), { maxLength: 8 }), (events, hostile, cuts) => {
      const frames = [...hostile.map(rawFrame), ...events.map(([t, v]) => rawFrame(Buffer.concat([t, Buffer.from("\n\n"), encodeWire(v)])))];
      const r = new EventStreamReader();
      const got = split(Buffer.concat(frames), cuts).flatMap((c) => r.push(c));
      assert.ok(got.length + r.skipped === frames.length, `${got.length} + ${r.skipped} of ${frames.length}`);
      // the events after the hostile ones: a tag without a newline comes out as it went in
      const mine = got.slice(got.length - events.length);
      events.forEach(([t, v], i) => {
        if (t.includes(0x0a) || mine[i] === undefined) return;
        assert.equal(mine[i]!.tag, t.toString("utf8"));
        assert.equal(json(mine[i]!.data), json(v));
      });
    }),
    opts(),
  );
});

test("bus: a stream that is not msgpack at all throws only coded errors", () => {
  fc.assert(
    fc.property(fc.array(anyBytes, { maxLength: 4 }), (chunks) => {
      const r = new EventStreamReader();
      codedOnly(() => chunks.forEach((c) => r.push(c)));
    }),
    opts(),
  );
  const r = new EventStreamReader();
  assert.equal(r.push(packEvent("t", { a: 1 })).length, 1);
});

const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });
const cborish = fc.oneof(
  fc.anything({ maxDepth: 3 }).map((v) => {
    try {
      return Buffer.from(cbor.encode(v));
    } catch {
      return Buffer.alloc(0);
    }
  }),
  fc.record({ v: fc.oneof(fc.constant(1), fc.anything()), cluster: fc.string(), from: fc.string(), to: fc.oneof(fc.constant(null), fc.string()), eph: fc.uint8Array({ minLength: 30, maxLength: 34 }), nonce: fc.uint8Array({ minLength: 32, maxLength: 32 }), reason: fc.anything(), sig: fc.uint8Array({ maxLength: 1100 }) }, { requiredKeys: [] }).map((m) => Buffer.from(cbor.encode(m))),
  fc.tuple(fc.integer({ min: -1, max: 4 }), fc.oneof(fc.string(), fc.constant("cl/ev")), fc.oneof(fc.nat(), fc.double(), fc.uint8Array()), fc.oneof(fc.uint8Array(), fc.string())).map((a) => Buffer.from(cbor.encode(a))),
  anyBytes,
);

test("peer channel: handshake, proof, sealed header and body decoders give a value or a coded error", () => {
  fc.assert(
    fc.property(fc.array(cborish, { minLength: 1, maxLength: 3 }), (parts) => {
      const b = Buffer.concat(parts);
      const framed = Buffer.concat([Buffer.from([FRAME.HELLO]), b]);
      codedOnly(() => decodeHello(framed, 4096));
      codedOnly(() => decodeRefuse(framed, 4096));
      codedOnly(() => decodeProof(b));
      codedOnly(() => readSealedSeq(b));
      codedOnly(() => decodeBodies(b, 64));
      codedOnly(() => decodeBody(b, 64));
    }),
    opts(),
  );
});

test("peer channel: encoded bodies and handshake frames decode back", () => {
  const body: fc.Arbitrary<Body> = fc.oneof(
    fc.record({ kind: fc.constant(BODY.MSG), channel: fc.constantFrom("raft", "cl/ev", "cl/sync-pull"), payload: fc.uint8Array({ maxLength: 64 }) }),
    fc.record({ kind: fc.constant(BODY.REQ), channel: fc.constantFrom("cl/join", "a.b:c"), id: fc.integer({ min: 1, max: 2 ** 40 }), payload: fc.uint8Array({ maxLength: 64 }) }),
    fc.record({ kind: fc.constant(BODY.RES), id: fc.integer({ min: 1, max: 2 ** 40 }), payload: fc.uint8Array({ maxLength: 64 }) }),
    fc.record({ kind: fc.constant(BODY.ERR), id: fc.integer({ min: 1, max: 2 ** 40 }), code: fc.string({ maxLength: 20 }), text: fc.string({ maxLength: 100 }) }),
  ) as fc.Arbitrary<Body>;
  fc.assert(
    fc.property(fc.array(body, { minLength: 1, maxLength: 4 }), (bodies) => {
      const got = decodeBodies(Buffer.concat(bodies.map((x) => encodeBody(x))), 64);
      assert.equal(json(got.map((g) => ({ ...g, ...("payload" in g ? { payload: Buffer.from(g.payload).toString("hex") } : {}) }))), json(bodies.map((g) => ({ ...g, ...("payload" in g ? { payload: Buffer.from(g.payload).toString("hex") } : {}) }))));
    }),
    opts(),
  );
  const hello = { v: 1, cluster: "c", from: "m1", to: null, eph: new Uint8Array(32).fill(1), nonce: new Uint8Array(32).fill(2) };
  const h = decodeHello(encodeClear(FRAME.HELLO, hello), 4096);
  assert.equal(h.from, "m1");
});
