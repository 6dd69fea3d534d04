/**
 * The handshake state machines, without sockets: mutual authentication, refusal of unknown and forged
 * peers, and that a handshake cannot be spliced, relayed with a swapped key, or replayed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Encoder } from "cbor-x";
import { FRAME } from "../../src/workers/raft/peer/framing.js";
import { HandshakeError, InitiatorHandshake, ResponderHandshake, type HandshakeContext } from "../../src/workers/raft/peer/handshake.js";
import { DEFAULT_PEER_LIMITS } from "../../src/workers/raft/peer/limits.js";
import type { PeerKeyring, PeerIdentity } from "../../src/shared/cluster-keys.js";
import { CLUSTER, bytes, identity, keyringOf, text } from "./helpers.js";

const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });

function ctx(self: PeerIdentity, keyring: PeerKeyring, clusterId = CLUSTER): HandshakeContext {
  return { clusterId, self, keyring, limits: DEFAULT_PEER_LIMITS };
}

/** A genuine pair: m1 (initiator) and m2 (responder), each knowing the other's real key. */
function pair(expected: string | null = "m2") {
  const i = new InitiatorHandshake(ctx(identity("m1"), keyringOf(["m2"])), expected);
  const r = new ResponderHandshake(ctx(identity("m2"), keyringOf(["m1"])));
  return { i, r };
}

function refusal(fn: () => unknown, reason: string, code = "CLUSTER_PEER_REFUSED"): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof HandshakeError, `expected a HandshakeError, got ${String(e)}`);
    assert.equal(e.reason, reason, e.message);
    assert.equal(e.code, code);
    return true;
  });
}

/** Re-encodes a clear handshake frame with some fields replaced. */
function rewrite(frame: Uint8Array, patch: Record<string, unknown>): Uint8Array {
  const fields = cbor.decode(frame.subarray(1)) as Record<string, unknown>;
  const body = cbor.encode({ ...fields, ...patch }) as Uint8Array;
  const out = new Uint8Array(1 + body.length);
  out[0] = frame[0]!;
  out.set(body, 1);
  return out;
}

test("mutual authentication: both sides end with the other's proven id and matching per-direction keys", () => {
  const { i, r } = pair();
  const welcome = r.onHello(i.hello);
  assert.equal(r.peerId, "m1");
  const auth = i.onWelcome(welcome);
  const { confirm, session: rs } = r.onAuth(auth);
  const is = i.onConfirm(confirm);
  assert.equal(is.peerId, "m2");
  assert.equal(rs.peerId, "m1");
  assert.equal(is.id, rs.id, "both sides name the session alike (same transcript)");
  // keys match per direction: what one seals the other opens, both ways
  const a = rs.open(is.seal(FRAME.DATA, bytes("to responder")));
  assert.equal(text(a.plaintext), "to responder");
  assert.equal(a.seq, 1, "seq 0 was the AUTH frame");
  assert.equal(text(is.open(rs.seal(FRAME.DATA, bytes("to initiator"))).plaintext), "to initiator");
});

test("the initiator may dial an address only and learn the responder's id from the handshake", () => {
  const { i, r } = pair(null);
  const is = i.onConfirm(r.onAuth(i.onWelcome(r.onHello(i.hello))).confirm);
  assert.equal(is.peerId, "m2");
});

test("every handshake has fresh keys: two sessions between the same pair do not open each other's frames", () => {
  const one = pair();
  const two = pair();
  const s1 = one.i.onConfirm(one.r.onAuth(one.i.onWelcome(one.r.onHello(one.i.hello))).confirm);
  const s2r = two.r.onAuth(two.i.onWelcome(two.r.onHello(two.i.hello))).session;
  assert.notEqual(s1.id, s2r.id);
  assert.throws(() => s2r.open(s1.seal(FRAME.DATA, bytes("x"))), { code: "CLUSTER_PEER_AUTH" });
});

test("an unknown peer (no key for its id) is refused at HELLO", () => {
  const i = new InitiatorHandshake(ctx(identity("intruder"), keyringOf(["m2"])), "m2");
  const r = new ResponderHandshake(ctx(identity("m2"), keyringOf(["m1"])));
  refusal(() => r.onHello(i.hello), "unknown-peer");
});

test("a forged initiator (known id, wrong private key) is refused at AUTH, before the responder signs anything", () => {
  const forger = new InitiatorHandshake(ctx(identity("m1", "not-m1"), keyringOf(["m2"])), "m2");
  const r = new ResponderHandshake(ctx(identity("m2"), keyringOf(["m1"])));
  const auth = forger.onWelcome(r.onHello(forger.hello));
  refusal(() => r.onAuth(auth), "forged");
});

test("a forged responder (known id, wrong private key) is refused by the initiator at CONFIRM", () => {
  const i = new InitiatorHandshake(ctx(identity("m1"), keyringOf(["m2"])), "m2");
  const impostor = new ResponderHandshake(ctx(identity("m2", "not-m2"), keyringOf(["m1"])));
  const { confirm } = impostor.onAuth(i.onWelcome(impostor.onHello(i.hello)));
  refusal(() => i.onConfirm(confirm), "forged");
});

test("a peer claiming this master's own id is refused as a duplicate node id", () => {
  const i = new InitiatorHandshake(ctx(identity("m2"), keyringOf(["m2"])), null);
  const r = new ResponderHandshake(ctx(identity("m2"), keyringOf(["m2"])));
  refusal(() => r.onHello(i.hello), "duplicate-id");
});

test("a peer of another cluster_id, or another protocol version, is refused", () => {
  const other = new InitiatorHandshake(ctx(identity("m1"), keyringOf(["m2"]), "other-cluster"), "m2");
  refusal(() => pair().r.onHello(other.hello), "cluster");
  const { i, r } = pair();
  refusal(() => r.onHello(rewrite(i.hello, { v: 2 })), "version", "CLUSTER_HANDSHAKE");
});

test("a HELLO for another node id is refused (an address that now belongs to someone else)", () => {
  const i = new InitiatorHandshake(ctx(identity("m1"), keyringOf(["m2", "m3"])), "m3");
  refusal(() => pair().r.onHello(i.hello), "wrong-node");
  // and the initiator refuses a responder that is not the node it dialled
  const j = new InitiatorHandshake(ctx(identity("m1"), keyringOf(["m2", "m3"])), "m3");
  const r = new ResponderHandshake(ctx(identity("m2"), keyringOf(["m1"])));
  refusal(() => j.onWelcome(r.onHello(j.hello)), "wrong-node");
});

test("a relay that swaps in its own ephemeral key is caught: the keys differ and AUTH fails key confirmation", () => {
  const { i, r } = pair();
  const mallory = new InitiatorHandshake(ctx(identity("m1", "mallory"), keyringOf(["m2"])), "m2");
  const mEph = (cbor.decode(mallory.hello.subarray(1)) as { eph: Uint8Array }).eph;
  // Mallory replaces m1's ephemeral key with hers on the way to m2; m1's signature is over the real one
  const welcome = r.onHello(rewrite(i.hello, { eph: mEph }));
  const auth = i.onWelcome(welcome);
  refusal(() => r.onAuth(auth), "forged");
});

test("an AUTH from one handshake is refused in another (no replay or splicing of proofs)", () => {
  const one = pair();
  const auth1 = one.i.onWelcome(one.r.onHello(one.i.hello));
  const two = pair();
  two.r.onHello(two.i.hello);
  refusal(() => two.r.onAuth(auth1), "forged");
  // and replaying a whole recorded HELLO + AUTH to a fresh responder fails the same way
  const three = new ResponderHandshake(ctx(identity("m2"), keyringOf(["m1"])));
  three.onHello(one.i.hello);
  refusal(() => three.onAuth(auth1), "forged");
});

test("a low-order ephemeral key is refused", () => {
  const { i, r } = pair();
  refusal(() => r.onHello(rewrite(i.hello, { eph: new Uint8Array(32) })), "bad-key", "CLUSTER_HANDSHAKE");
});

test("frames out of order, malformed or oversized are refused, and a failed side stays failed", () => {
  const { i, r } = pair();
  refusal(() => i.onConfirm(new Uint8Array([FRAME.CONFIRM, 1, 2, 3])), "state", "CLUSTER_HANDSHAKE");
  refusal(() => r.onHello(new Uint8Array([FRAME.HELLO, 0xff, 0xff])), "bad-frame", "CLUSTER_HANDSHAKE");
  refusal(() => r.onHello(i.hello), "state", "CLUSTER_HANDSHAKE");
  const r2 = new ResponderHandshake(ctx(identity("m2"), keyringOf(["m1"])));
  refusal(() => r2.onHello(rewrite(i.hello, { pad: new Uint8Array(DEFAULT_PEER_LIMITS.handshakeFrameBytesMax) })), "bad-frame", "CLUSTER_HANDSHAKE");
  const r3 = new ResponderHandshake(ctx(identity("m2"), keyringOf(["m1"])));
  refusal(() => r3.onHello(rewrite(i.hello, { eph: new Uint8Array(31) })), "bad-frame", "CLUSTER_HANDSHAKE");
  const r4 = new ResponderHandshake(ctx(identity("m2"), keyringOf(["m1"])));
  refusal(() => r4.onHello(rewrite(i.hello, { from: "0.0.0.0" })), "bad-id");
});
