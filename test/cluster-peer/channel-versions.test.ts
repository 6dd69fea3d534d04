/**
 * The handshake's word on the newer payload forms each side reads (HELLO/WELCOME `ch`, since session 18):
 * each session knows what its peer reads, a master that says nothing (every master before it) is read as
 * reading the first form only and gets frames without the field, and a malformed `ch` is refused.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Encoder } from "cbor-x";
import { HandshakeError, InitiatorHandshake, ResponderHandshake, type HandshakeContext } from "../../src/workers/raft/peer/handshake.js";
import { DEFAULT_PEER_LIMITS } from "../../src/workers/raft/peer/limits.js";
import { CLUSTER, freePort, identity, keyringOf, startNode, waitUp } from "./helpers.js";

const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });

function ctx(self: string, peers: string[], channelVersions?: Record<string, number>): HandshakeContext {
  return { clusterId: CLUSTER, self: identity(self), keyring: keyringOf(peers), limits: DEFAULT_PEER_LIMITS, ...(channelVersions ? { channelVersions } : {}) };
}

function handshake(iVersions?: Record<string, number>, rVersions?: Record<string, number>) {
  const i = new InitiatorHandshake(ctx("m1", ["m2"], iVersions), "m2");
  const r = new ResponderHandshake(ctx("m2", ["m1"], rVersions));
  const welcome = r.onHello(i.hello);
  const { confirm, session: rs } = r.onAuth(i.onWelcome(welcome));
  const is = i.onConfirm(confirm);
  return { hello: i.hello, welcome, is, rs };
}

const fieldsOf = (frame: Uint8Array) => cbor.decode(frame.subarray(1)) as Record<string, unknown>;

test("both sides name the forms they read: each session knows its peer's", () => {
  const { is, rs } = handshake({ raft: 2 }, { raft: 2, other: 3 });
  assert.equal(is.peerReads("raft"), 2);
  assert.equal(is.peerReads("other"), 3);
  assert.equal(rs.peerReads("raft"), 2);
  assert.equal(rs.peerReads("other"), 1, "a channel the peer did not name: its first form");
});

test("a master that says nothing (as every master before session 18) is read as reading first forms, and gets no field it does not know of", () => {
  const old = handshake(undefined, { raft: 2 });
  assert.equal(old.rs.peerReads("raft"), 1, "the new responder sees an old initiator");
  assert.equal(old.is.peerReads("raft"), 2);
  assert.deepEqual(Object.keys(fieldsOf(old.hello)).sort(), ["cluster", "eph", "from", "nonce", "to", "v"], "the old side's HELLO is main's");
  const back = handshake({ raft: 2 }, undefined);
  assert.equal(back.is.peerReads("raft"), 1, "the new initiator sees an old responder");
  assert.deepEqual(Object.keys(fieldsOf(back.welcome)).sort(), ["cluster", "eph", "from", "nonce", "to", "v"]);
  assert.deepEqual(fieldsOf(back.hello).ch, { raft: 2 });
  const none = handshake({}, {});
  assert.equal("ch" in fieldsOf(none.hello), false, "nothing to say: no field");
});

test("a HELLO whose ch is malformed is refused as a bad frame", () => {
  const i = new InitiatorHandshake(ctx("m1", ["m2"], { raft: 2 }), "m2");
  const f = fieldsOf(i.hello);
  for (const ch of [[2], { raft: 0 }, { raft: 1.5 }, { "bad name!": 2 }, { raft: "2" }, Object.fromEntries(Array.from({ length: 17 }, (_, k) => [`c${k}`, 2]))]) {
    const body = cbor.encode({ ...f, ch }) as Uint8Array;
    const frame = new Uint8Array(1 + body.length);
    frame[0] = i.hello[0]!;
    frame.set(body, 1);
    const r = new ResponderHandshake(ctx("m2", ["m1"], { raft: 2 }));
    assert.throws(
      () => r.onHello(frame),
      (e: unknown) => e instanceof HandshakeError && e.reason === "bad-frame",
      JSON.stringify(ch).slice(0, 80),
    );
  }
});

test("three transports over sockets: each outbound link knows what its peer reads, and one that says nothing reads as 1", { timeout: 30_000 }, async () => {
  const [pa, pb, pc] = [await freePort("127.0.0.1"), await freePort("127.0.0.1"), await freePort("127.0.0.1")];
  const ep = (id: string, port: number) => ({ host: "127.0.0.1", port, id });
  const a = await startNode({ id: "a", port: pa, peers: [ep("b", pb), ep("c", pc)], channelVersions: { raft: 2 } });
  const b = await startNode({ id: "b", port: pb, peers: [ep("a", pa)], channelVersions: { raft: 2 } });
  const c = await startNode({ id: "c", port: pc, peers: [ep("a", pa)] });
  try {
    await waitUp(a.t, ["b", "c"]);
    await waitUp(b.t, ["a"]);
    await waitUp(c.t, ["a"]);
    assert.equal(a.t.peerReads("b", "raft"), 2);
    assert.equal(a.t.peerReads("c", "raft"), 1, "c said nothing");
    assert.equal(b.t.peerReads("a", "raft"), 2);
    assert.equal(c.t.peerReads("a", "raft"), 2, "c is told what a reads (and uses none of it, as an old master would)");
    assert.equal(a.t.peerReads("nobody", "raft"), 1);
  } finally {
    for (const n of [a, b, c]) await n.t.close();
  }
});
