/**
 * The Raft payload's two forms on the peer channel (raft-wire.ts): the map form of every master before
 * session 18 and the positional form. Both decode to what checkPeerMessage accepts alike, the link sends the
 * positional form only to a peer whose handshake said it reads it, and a malformed positional payload is
 * refused with a reason, never thrown into the Raft thread.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { checkPeerMessage, RaftPeerLink, RAFT_CHANNEL, type RaftPeerChannel } from "../../src/workers/raft/raft-transport.js";
import { decodeRaftPayload, encodeRaftPayload } from "../../src/workers/raft/raft-wire.js";
import { cbor } from "../../src/shared/cbor.js";
import { raftIdOf } from "../../src/shared/node-ids.js";
import type { Message } from "../../src/workers/raft/core/types.js";

const A = raftIdOf("a");
const B = raftIdOf("b");
const base = { from: A, to: B, term: 3, logTerm: 2, index: 7, commit: 6, reject: false, rejectHint: 0 };

/** One message of every shape the peers exchange, each with the optional fields it carries. */
const SHAPES: Message[] = [
  { ...base, type: "MsgApp", entries: [{ term: 3, index: 8, type: "normal", data: new Uint8Array([1, 2, 3]) }, { term: 3, index: 9, type: "conf", data: new Uint8Array([9]) }] },
  { ...base, type: "MsgApp" },
  { ...base, type: "MsgAppResp", reject: true, rejectHint: 4 },
  { ...base, type: "MsgHeartbeat", quiesce: true, context: "ctx-1" },
  { ...base, type: "MsgHeartbeatResp", context: "ctx-1" },
  { ...base, type: "MsgProp", entries: [{ term: 0, index: 0, type: "normal", data: new Uint8Array([5]) }], requests: [11, 12], incarnation: 4, batch: 9 },
  { ...base, type: "MsgPropResp", requests: [11, 12], incarnation: 4, batch: 9, reason: "RAFT_NO_LEADER" },
  { ...base, type: "MsgSnap", snapOffset: 0, snapshot: { metadata: { index: 5, term: 2, confState: { voters: [A, B], learners: [], confIndex: 1 } }, offset: 0, totalBytes: 4, data: new Uint8Array([1, 2, 3, 4]) } },
  { ...base, type: "MsgSnapResp", snapOffset: 4 },
  { ...base, type: "MsgTransferLeader", transferee: B },
  { ...base, type: "MsgVote" },
  { ...base, type: "MsgPreVoteResp", reject: true },
  { ...base, type: "MsgTimeoutNow" },
  { ...base, type: "MsgReadIndex", requests: [3], incarnation: 1, batch: 2 },
];

test("every peer message decodes from the positional form to what the map form gives, and is accepted alike", () => {
  for (const m of SHAPES) {
    const fromMap = decodeRaftPayload(encodeRaftPayload("cluster", [m], 1));
    const fromPositional = decodeRaftPayload(encodeRaftPayload("cluster", [m], 2));
    assert.equal(fromPositional.group, "cluster");
    const want = checkPeerMessage(fromMap.messages[0], A, B);
    const got = checkPeerMessage(fromPositional.messages[0], A, B);
    assert.ok(typeof got !== "string", `${m.type}: ${String(got)}`);
    assert.deepEqual(got, want, m.type);
    assert.deepEqual(got, m, `${m.type} survives the positional form whole`);
  }
});

test("one payload carries several messages in order in the positional form", () => {
  const { group, messages } = decodeRaftPayload(encodeRaftPayload("ring-1", SHAPES, 2));
  assert.equal(group, "ring-1");
  assert.deepEqual(
    messages.map((raw) => checkPeerMessage(raw, A, B)),
    SHAPES,
  );
});

test("the two forms' bytes: the map form is main's build's byte for byte, the positional form is pinned", () => {
  const m: Message = { type: "MsgApp", from: 1, to: 2, term: 3, logTerm: 3, index: 7, commit: 6, reject: false, rejectHint: 0, entries: [{ term: 3, index: 8, type: "normal", data: new Uint8Array([0xca, 0xfe]) }] };
  // encodeRaftPayload("cluster", [m]) of main at 1200f68 (before the positional form)
  const mainBytes =
    "b90002616767636c7573746572616d81b9000a6474797065664d73674170706466726f6d0162746f02647465726d03676c6f675465726d0365696e6465780766636f6d6d6974066672656a656374f46a72656a65637448696e740067656e747269657381b90004647465726d0365696e646578086474797065666e6f726d616c646461746142cafe";
  assert.equal(Buffer.from(encodeRaftPayload("cluster", [m], 1)).toString("hex"), mainBytes, "a peer that said nothing gets main's bytes");
  assert.equal(Buffer.from(encodeRaftPayload("cluster", [m])).toString("hex"), mainBytes, "the map form is the default");
  assert.deepEqual(checkPeerMessage(decodeRaftPayload(Buffer.from(mainBytes, "hex")).messages[0], 1, 2), m, "main's bytes are read");
  // [2, "cluster", [type 5 (MsgApp), 1, 2, 3, 3, 7, 6, false, 0, [3, 8, 0, h'cafe'], null]]
  assert.equal(Buffer.from(encodeRaftPayload("cluster", [m], 2)).toString("hex"), "830267636c75737465728b05010203030706f4008403080042cafef6");
});

test("a malformed positional payload is refused with a reason: unknown version, bad tuple, bad entries, unknown type code", () => {
  const enc = (v: unknown) => cbor.encode(v) as Uint8Array;
  const tuple = [5, A, B, 3, 2, 7, 6, false, 0, null, null];
  assert.throws(() => decodeRaftPayload(enc([3, "cluster", tuple])), /version 3/);
  assert.throws(() => decodeRaftPayload(enc([2, 7, tuple])), /not a raft payload/);
  assert.throws(() => decodeRaftPayload(enc([2, "cluster", ...new Array(4097).fill(tuple)])), /4097 messages/);
  const check = (t: unknown) => checkPeerMessage(decodeRaftPayload(enc([2, "cluster", t])).messages[0], A, B);
  assert.ok(typeof check(tuple) !== "string", "the well-formed tuple is accepted");
  assert.match(String(check(tuple.slice(0, 10))), /not a map/);
  assert.match(String(check("MsgApp")), /not a map/);
  assert.match(String(check([99, ...tuple.slice(1)])), /not a peer message/);
  assert.match(String(check(["MsgApp", ...tuple.slice(1)])), /not a peer message/, "a type by name is not a code");
  assert.match(String(check([...tuple.slice(0, 9), [3, 8, 0], null])), /entries/);
  assert.match(String(check([...tuple.slice(0, 9), [3, 8, 7, new Uint8Array([1])], null])), /malformed entry/);
  assert.match(String(check([...tuple.slice(0, 10), [1, 2]])), /not a peer message/);
  assert.match(String(check([...tuple.slice(0, 10), { requests: "x" }])), /requests/);
  assert.match(String(check([5, A, B, -1, 2, 7, 6, false, 0, null, null])), /term/);
});

/** A fake peer channel: what the link sends, and each peer's word on the forms it reads. */
function fakeChannel(reads: Record<string, number> | undefined) {
  const sent: { to: string; payload: Uint8Array }[] = [];
  const handlers = new Map<string, (m: { from: string; payload: Uint8Array }) => unknown>();
  const channel: RaftPeerChannel = {
    send: (to, ch, payload) => {
      assert.equal(ch, RAFT_CHANNEL);
      sent.push({ to, payload: new Uint8Array(payload) });
    },
    flush: () => {},
    isUp: () => true,
    on: (ch, h) => {
      handlers.set(ch, h);
      return () => handlers.delete(ch);
    },
    events: new EventEmitter(),
    ...(reads ? { peerReads: (peer: string, ch: string) => (ch === RAFT_CHANNEL ? (reads[peer] ?? 1) : 1) } : {}),
  };
  return { channel, sent, handlers };
}

test("the link sends the positional form only to a peer whose handshake said it reads it, the map form to any other", () => {
  const self = "a";
  const { channel, sent } = fakeChannel({ b: 2 });
  const link = new RaftPeerLink(channel, self, ["b", "c"]);
  const app = (to: string): Message => ({ ...SHAPES[0]!, from: raftIdOf(self), to: raftIdOf(to) });
  link.send("cluster", [app("b"), app("c")]);
  const byPeer = new Map(sent.map((s) => [s.to, s.payload]));
  assert.ok(Array.isArray(cbor.decode(byPeer.get("b")!)), "b said it reads form 2");
  const toC = cbor.decode(byPeer.get("c")!) as { g: string; m: unknown[] };
  assert.equal(toC.g, "cluster", "c said nothing: the map form, as main's build reads it");
  assert.equal(toC.m.length, 1);
  // a channel that cannot tell (tests' fakes, older wrappers): the map form to everyone
  const old = fakeChannel(undefined);
  new RaftPeerLink(old.channel, self, ["b"]).send("cluster", [app("b")]);
  assert.ok(!Array.isArray(cbor.decode(old.sent[0]!.payload)));
});

test("the link delivers both forms from a peer, and counts a malformed one as refused without stopping", () => {
  const { channel, handlers } = fakeChannel({ b: 2 });
  const link = new RaftPeerLink(channel, "b", ["a"]);
  const got: { group: string; m: Message }[] = [];
  link.attach({ receive: (group, m) => got.push({ group, m }) });
  const m: Message = { ...SHAPES[2]!, from: A, to: B };
  const deliver = handlers.get(RAFT_CHANNEL)!;
  deliver({ from: "a", payload: encodeRaftPayload("cluster", [m], 1) });
  deliver({ from: "a", payload: encodeRaftPayload("cluster", [m], 2) });
  deliver({ from: "a", payload: cbor.encode([2, "cluster", [1, 2]]) as Uint8Array });
  deliver({ from: "a", payload: cbor.encode([9, "cluster"]) as Uint8Array });
  assert.deepEqual(got, [
    { group: "cluster", m },
    { group: "cluster", m },
  ]);
  assert.equal(link.counters.received, 2);
  assert.equal(link.counters.refused, 2);
});
