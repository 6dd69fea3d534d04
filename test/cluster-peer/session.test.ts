/**
 * Sessions without sockets: sealed frames open in order, and replays, reordering, tampering, reflection
 * and a changed frame type are rejected without disturbing the session. Also the body codec's refusals.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Encoder } from "cbor-x";
import { BODY, FRAME, decodeBodies, decodeBody, encodeBody, joinBodies, validateChannel } from "../../src/workers/raft/peer/framing.js";
import { Session } from "../../src/workers/raft/peer/session.js";
import { sodium } from "../../src/workers/raft/peer/sodium.js";
import { bytes, text } from "./helpers.js";

const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });

/** Two ends of one session, as the handshake would leave them (random keys, one per direction). */
function ends(messagesMax = 2 ** 48): { a: Session; b: Session } {
  const ab = sodium.randombytes_buf(32);
  const ba = sodium.randombytes_buf(32);
  return {
    a: new Session("b", "s1", "initiator", ab.slice(), ba.slice(), messagesMax),
    b: new Session("a", "s1", "responder", ba.slice(), ab.slice(), messagesMax),
  };
}

test("frames open in order in both directions; the counter is the frame's sequence number", () => {
  const { a, b } = ends();
  for (let n = 0; n < 5; n++) {
    const o = b.open(a.seal(FRAME.DATA, bytes(`m${n}`)));
    assert.equal(o.seq, n);
    assert.equal(text(o.plaintext), `m${n}`);
  }
  assert.equal(text(a.open(b.seal(FRAME.DATA, bytes("back"))).plaintext), "back");
});

test("a replayed frame is rejected (CLUSTER_PEER_REPLAY) and the session goes on", () => {
  const { a, b } = ends();
  const f0 = a.seal(FRAME.DATA, bytes("once"));
  b.open(f0);
  assert.throws(() => b.open(f0), { code: "CLUSTER_PEER_REPLAY" });
  assert.equal(text(b.open(a.seal(FRAME.DATA, bytes("next"))).plaintext), "next");
});

test("reordering is rejected: after frame 2, frame 1 is refused; a gap itself is allowed", () => {
  const { a, b } = ends();
  const f0 = a.seal(FRAME.DATA, bytes("0"));
  const f1 = a.seal(FRAME.DATA, bytes("1"));
  const f2 = a.seal(FRAME.DATA, bytes("2"));
  b.open(f0);
  assert.equal(b.open(f2).seq, 2, "frame 1 lost in transit: the gap is accepted");
  assert.throws(() => b.open(f1), { code: "CLUSTER_PEER_REPLAY" });
});

test("a tampered frame fails authentication and does not advance the counter", () => {
  const { a, b } = ends();
  const f0 = a.seal(FRAME.DATA, bytes("payload"));
  const bad = f0.slice();
  bad[bad.length - 1] = bad[bad.length - 1]! ^ 1;
  assert.throws(() => b.open(bad), { code: "CLUSTER_PEER_AUTH" });
  // a forged header claiming a huge sequence number must not block the real frames either
  const far = f0.slice();
  far[2] = 0x10;
  assert.throws(() => b.open(far), { code: "CLUSTER_PEER_AUTH" });
  assert.equal(text(b.open(f0).plaintext), "payload");
});

test("the frame type and counter are authenticated: changing either breaks the tag", () => {
  const { a, b } = ends();
  const f = a.seal(FRAME.DATA, bytes("data"));
  const asAuth = f.slice();
  asAuth[0] = FRAME.AUTH;
  assert.throws(() => b.open(asAuth), { code: "CLUSTER_PEER_AUTH" });
  const later = f.slice();
  later[8] = 7;
  assert.throws(() => b.open(later), { code: "CLUSTER_PEER_AUTH" });
  assert.equal(b.open(f).seq, 0);
});

test("a frame cannot be reflected back to its sender (each direction has its own key)", () => {
  const { a } = ends();
  const f = a.seal(FRAME.DATA, bytes("mine"));
  assert.throws(() => a.open(f), { code: "CLUSTER_PEER_AUTH" });
});

test("short, unsealed or out-of-range frames are refused as malformed", () => {
  const { a, b } = ends();
  assert.throws(() => b.open(new Uint8Array(10).fill(FRAME.DATA)), { code: "CLUSTER_PEER_FRAME" });
  const f = a.seal(FRAME.DATA, bytes("x"));
  const hello = f.slice();
  hello[0] = FRAME.HELLO;
  assert.throws(() => b.open(hello), { code: "CLUSTER_PEER_FRAME" });
  const huge = f.slice();
  huge.fill(0xff, 1, 9);
  assert.throws(() => b.open(huge), { code: "CLUSTER_PEER_FRAME" });
});

test("a session that sealed messagesMax frames refuses to seal more (the transport re-keys)", () => {
  const { a, b } = ends(3);
  for (let n = 0; n < 3; n++) b.open(a.seal(FRAME.DATA, bytes("x")));
  assert.equal(a.exhausted, true);
  assert.throws(() => a.seal(FRAME.DATA, bytes("x")), { code: "CLUSTER_PEER_DOWN" });
  a.destroy();
  assert.throws(() => a.open(new Uint8Array(40)), { code: "CLUSTER_PEER_CLOSED" });
});

test("message bodies round-trip, and malformed bodies are refused with CLUSTER_PEER_FRAME", () => {
  const p = bytes("p");
  for (const body of [
    { kind: BODY.MSG, channel: "raft/cluster", payload: p },
    { kind: BODY.REQ, channel: "raft/jobs", id: 7, payload: p },
    { kind: BODY.RES, id: 7, payload: p },
    { kind: BODY.ERR, id: 7, code: "RAFT_NO_LEADER", text: "no leader" },
  ] as const) {
    assert.deepEqual(decodeBody(encodeBody(body), 64), body);
  }
  const bad: unknown[] = [
    { kind: 0 },
    [9, "c", p],
    [0, "bad channel", p],
    [0, "c", "not bytes"],
    [1, "c", 0, p],
    [1, "c", 1.5, p],
    [2, -1, p],
    [3, 1, 5, "x"],
    [0, "x".repeat(65), p],
  ];
  for (const b of bad) assert.throws(() => decodeBody(cbor.encode(b) as Uint8Array, 64), { code: "CLUSTER_PEER_FRAME" }, JSON.stringify(b));
  assert.throws(() => decodeBody(new Uint8Array([0x9f]), 64), { code: "CLUSTER_PEER_FRAME" });
});

test("a one-way message's body, written without the codec, is byte for byte what the codec writes, at every CBOR head size", () => {
  for (const n of [0, 1, 23, 24, 255, 256, 65_535, 65_536, 70_000]) {
    const payload = new Uint8Array(n).map((_, i) => (i * 7) & 0xff);
    for (const channel of ["r", "raft", "cl/presence", "c".repeat(23), "c".repeat(24), "c".repeat(64)]) {
      const ours = encodeBody({ kind: BODY.MSG, channel, payload });
      assert.deepEqual(Buffer.from(ours), Buffer.from(cbor.encode([BODY.MSG, channel, payload]) as Uint8Array), `${channel.length}-byte channel, ${n}-byte payload`);
      assert.deepEqual(decodeBody(ours, 64), { kind: BODY.MSG, channel, payload });
    }
  }
});

test("a channel name is checked against each bound it is given, also once it was found well-formed", () => {
  assert.equal(validateChannel("abcd", 64), "abcd");
  assert.throws(() => validateChannel("abcd", 3), { code: "CLUSTER_PEER_CHANNEL" });
  assert.equal(validateChannel("abcd", 4), "abcd");
  for (const bad of ["bad channel", "", "-x", 7, undefined]) {
    assert.throws(() => validateChannel(bad, 64), { code: "CLUSTER_PEER_CHANNEL" }, String(bad));
    assert.throws(() => validateChannel(bad, 64), { code: "CLUSTER_PEER_CHANNEL" }, `${String(bad)}, asked again`);
  }
  // past the names kept as checked (256), a well-formed one is still taken and a bad one still refused
  for (let i = 0; i < 300; i++) assert.equal(validateChannel(`name${i}`, 64), `name${i}`);
  assert.throws(() => validateChannel("x".repeat(65), 64), { code: "CLUSTER_PEER_CHANNEL" });
});

test("a DATA plaintext carries a sequence of bodies; one malformed body refuses the whole frame", () => {
  const a = encodeBody({ kind: BODY.MSG, channel: "raft/cluster", payload: bytes("a") });
  const b = encodeBody({ kind: BODY.RES, id: 3, payload: bytes("b") });
  const both = decodeBodies(joinBodies([a, b], a.length + b.length), 64);
  assert.deepEqual(
    both.map((x) => x.kind),
    [BODY.MSG, BODY.RES],
  );
  const bad = cbor.encode([0, "bad channel", bytes("x")]) as Uint8Array;
  assert.throws(() => decodeBodies(joinBodies([a, bad], a.length + bad.length), 64), { code: "CLUSTER_PEER_FRAME" });
  assert.throws(() => decodeBodies(new Uint8Array(0), 64), { code: "CLUSTER_PEER_FRAME" });
});
