/**
 * The cluster log's peer keys (PEER_KEY, brine's own entry kind): a key recorded, replaced by a later entry (a
 * master admitted again), forgotten by a tombstone that stays; stale entries change nothing; snapshots carry it
 * and a snapshot from before the machine existed restores empty; malformed entries are refused.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { decodeEntry, encodeEntry } from "../../src/workers/raft/state-machines/entries.js";
import { ClusterGroupState } from "../../src/workers/raft/state-machines/groups.js";
import { PeerKeysStateMachine } from "../../src/workers/raft/state-machines/peer-keys.js";
import { cbor } from "../../src/shared/cbor.js";

const pem = () => generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" }) as string;

test("a key is recorded, replaced by a later entry and forgotten by a tombstone, which stays", () => {
  const sm = new PeerKeysStateMachine();
  const [a, b] = [pem(), pem()];
  assert.equal(sm.apply({ id: "m4", pub: a, host: "10.0.0.4", port: 4520 }, 5).outcome, "applied");
  assert.deepEqual(sm.all(), [{ id: "m4", pub: a, host: "10.0.0.4", port: 4520 }]);
  assert.equal(sm.apply({ id: "m4", pub: b }, 6).outcome, "applied");
  assert.equal(sm.all()[0]!.pub, b);
  assert.equal(sm.apply({ id: "m4", pub: null }, 7).outcome, "applied");
  assert.deepEqual(sm.all(), [{ id: "m4", pub: null }]);
  assert.equal(sm.apply({ id: "m4", pub: a }, 7).outcome, "stale", "a replayed index changes nothing");
  assert.equal(sm.version, 7);
});

test("the cluster group applies PEER_KEY from the log, and its snapshot carries the keys; an older snapshot without them restores empty", () => {
  const g = new ClusterGroupState();
  const a = pem();
  const bytes = encodeEntry({ kind: "PEER_KEY", value: { id: "m2", pub: a } });
  assert.deepEqual(decodeEntry(bytes), { kind: "PEER_KEY", value: { id: "m2", pub: a } });
  assert.equal(g.apply(bytes, 3).outcome, "applied");
  const copy = new ClusterGroupState();
  copy.restore(g.snapshot());
  assert.deepEqual(copy.peerKeys.all(), [{ id: "m2", pub: a }]);
  const old = new ClusterGroupState();
  old.apply({ kind: "ROUTE", value: { data_type: "jobs", ring_id: null } }, 1);
  const snap = old.snapshot();
  // drop the field as a snapshot from before PEER_KEY would lack it
  const o = cbor.decode(snap) as { machines: Record<string, unknown> };
  delete o.machines.peer_keys_sm;
  const restored = new ClusterGroupState();
  restored.restore(Uint8Array.from(cbor.encode(o)));
  assert.deepEqual(restored.peerKeys.all(), []);
});

test("malformed PEER_KEY entries are refused: a path in the id, a non-key pub, a bad port", () => {
  assert.throws(() => encodeEntry({ kind: "PEER_KEY", value: { id: "../m1", pub: null } }), /CLUSTER_BAD_NODE_ID|key file|path/);
  assert.throws(() => encodeEntry({ kind: "PEER_KEY", value: { id: "m1", pub: "hello" } }), /public key PEM/);
  assert.throws(() => encodeEntry({ kind: "PEER_KEY", value: { id: "m1", pub: null, port: 70000 } }), /port/);
});

test("a re-admitted tombstone (cluster.readmit_member) is carried by the log and by snapshots; readmit only with a null pub", () => {
  const g = new ClusterGroupState();
  assert.equal(g.apply(encodeEntry({ kind: "PEER_KEY", value: { id: "m4", pub: null } }), 3).outcome, "applied");
  assert.equal(g.apply(encodeEntry({ kind: "PEER_KEY", value: { id: "m4", pub: null, readmit: true } }), 4).outcome, "applied");
  const copy = new ClusterGroupState();
  copy.restore(g.snapshot());
  assert.deepEqual(copy.peerKeys.all(), [{ id: "m4", pub: null, readmit: true }]);
  assert.throws(() => encodeEntry({ kind: "PEER_KEY", value: { id: "m4", pub: pem(), readmit: true } }), /readmit is true, and only with a null pub/);
  assert.throws(() => encodeEntry({ kind: "PEER_KEY", value: { id: "m4", pub: null, readmit: "yes" } as never }), /readmit/);
});
