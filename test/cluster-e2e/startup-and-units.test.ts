/**
 * Cluster start-up refusals (a clear message, nothing started) and the one-node cluster; the pure pieces of
 * the cluster wiring: forwarding's loop and duplicate checks, the Raft message validation, the no-clobber
 * creation of shared files.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { Encoder } from "cbor-x";
import { startTestMaster, freePort } from "../helpers/master.js";
import { FakeChannel } from "../helpers/fake-channel.js";
import { isBrineError } from "../../src/shared/errors.js";
import { ClusterForwarder, EVENT_CHANNEL, PUBLISH_CHANNEL, isJobEventFrame } from "../../src/main-thread/cluster/forwarding.js";
import { checkPeerMessage, decodeRaftPayload, encodeRaftPayload } from "../../src/workers/raft/raft-transport.js";
import { createExclusive, ensureClusterKeys, readOrCreateClusterAes, resolveLocalState } from "../../src/shared/shared-fs.js";
import { packEvent } from "../../src/shared/event-frame.js";
import { encodeWire } from "../../src/shared/protocol/msgpack.js";
import { raftIdOf } from "../../src/shared/node-ids.js";
import { CLUSTER_RING } from "../../src/shared/sab-ring/layout.js";
import type { Message } from "../../src/workers/raft/core/types.js";
import { masterDefaults } from "../../src/shared/config/defaults.js";

function tmp(): string {
  return mkdtempSync(path.join(os.tmpdir(), "brine-cls-"));
}

async function refused(overrides: Record<string, unknown>, root?: string): Promise<{ code: string; message: string }> {
  try {
    const tm = await startTestMaster(overrides, root);
    await tm.stop();
  } catch (e) {
    assert.ok(isBrineError(e), String(e));
    return { code: e.code, message: e.message };
  }
  assert.fail("the master started");
}

test("start-up refuses a wildcard node id, a duplicate node id and unusable cluster keys, naming the fix", async () => {
  const shared = tmp();
  const pki = path.join(shared, "pki");
  try {
    const port = await freePort();
    const wild = await refused({ id: "0.0.0.0", cluster_id: "c", cluster_pki_dir: pki, cluster_pool_port: port });
    assert.equal(wild.code, "CLUSTER_BAD_NODE_ID");
    assert.match(wild.message, /`id`/);

    // a master named "dup" runs; a second master (its own key pair) claiming the same id is refused
    const first = await startTestMaster({ id: "dup", cluster_id: "c", cluster_pki_dir: pki, cluster_pool_port: await freePort() });
    try {
      const dup = await refused({ id: "dup", cluster_id: "c", cluster_pki_dir: pki, cluster_pool_port: await freePort() });
      assert.equal(dup.code, "CLUSTER_BAD_NODE_ID");
      assert.match(dup.message, /duplicate node id "dup"/);
    } finally {
      await first.stop();
    }

    // a peer listed twice
    const twice = await refused({ id: "a", cluster_id: "c", cluster_pki_dir: pki, cluster_pool_port: await freePort(), cluster_peers: ["127.0.0.2:4520", "127.0.0.2:4520"] });
    assert.equal(twice.code, "CLUSTER_BAD_NODE_ID");

    // unparsable and unreadable cluster keys
    writeFileSync(path.join(pki, "cluster.pem"), "not a key");
    const bad = await refused({ id: "b", cluster_id: "c", cluster_pki_dir: pki, cluster_pool_port: await freePort() });
    assert.equal(bad.code, "CLUSTER_KEY");
    assert.match(bad.message, /cluster\.pem could not be parsed/);
    rmSync(path.join(pki, "cluster.pem"));
    mkdirSync(path.join(pki, "cluster.pem"));
    const dir = await refused({ id: "b", cluster_id: "c", cluster_pki_dir: pki, cluster_pool_port: await freePort() });
    assert.equal(dir.code, "CLUSTER_KEY");
    assert.match(dir.message, /cluster\.pem/);
  } finally {
    rmSync(shared, { recursive: true, force: true });
  }
});

test("a cluster_id without peers founds a one-node cluster on the shared keys", async () => {
  const shared = tmp();
  const tm = await startTestMaster({ id: "solo", cluster_id: "c1", cluster_pki_dir: path.join(shared, "pki"), cluster_pool_port: await freePort() });
  try {
    const st = await tm.server.clusterNode!.raft.status();
    const g = st.groups.find((x) => x.group === CLUSTER_RING)!;
    assert.deepEqual(g.voters, ["solo"]);
    for (const f of ["cluster.pem", "cluster.pub", ".aes", "peers/solo.pub"]) readFileSync(path.join(shared, "pki", f));
    // the minion-facing key is the cluster key, the LMDB environments are per node
    assert.match(String(tm.cfg.brine_lmdb_dir), /brine-node\/solo\/brine-lmdb$/);
    assert.match(String(tm.cfg.brine_raft_lmdb_dir), /brine-node\/solo\/brine-raft-lmdb$/);
  } finally {
    await tm.stop();
    rmSync(shared, { recursive: true, force: true });
  }
});

test("shared files are created once: the first writer wins, later ones read its file", () => {
  const d = tmp();
  try {
    const f = path.join(d, "x");
    assert.equal(createExclusive(f, "one", 0o600), true);
    assert.equal(createExclusive(f, "two", 0o600), false);
    assert.equal(readFileSync(f, "utf8"), "one");
    const cfg = { ...masterDefaults(), id: "n1", pki_dir: path.join(d, "p1"), cachedir: path.join(d, "c"), cluster_id: "c", cluster_pki_dir: path.join(d, "cp"), keysize: 2048 };
    const k1 = ensureClusterKeys(cfg);
    const k2 = ensureClusterKeys({ ...cfg, id: "n2", pki_dir: path.join(d, "p2") });
    assert.equal(k1.created, true);
    assert.equal(k2.created, false);
    assert.equal(k1.pem, k2.pem);
    assert.equal(readOrCreateClusterAes(cfg), readOrCreateClusterAes({ ...cfg, id: "n2" }));
    // LMDB is never placed on a network filesystem
    const local = resolveLocalState({ ...cfg }, (dir) => dir.startsWith(path.join(d, "c")));
    assert.ok(local && !local.lmdb.startsWith(path.join(d, "c")) && local.lmdb.includes(path.join("n1", "brine-lmdb")));
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
});

test("forwarding: once to each peer, never relayed, duplicates and forgeries dropped", () => {
  const aCh = new FakeChannel(["b", "c"]);
  const a = new ClusterForwarder("a", aCh, { events: () => undefined, publishes: () => undefined });
  const frame = packEvent("salt/job/20260101000000000000/ret/m1", { return: true, id: "m1" });
  a.forward([frame], [0]);
  // a publish as the publisher thread hands it over: its loads' msgpack and its sealed frame (opaque here)
  a.forwardPublishes(encodeWire([{ fun: "test.ping", jid: "20260101000000000000" }]), [new Uint8Array([1, 2, 3])]);
  assert.deepEqual(aCh.sent.map((s) => [s.to, s.channel]), [["b", EVENT_CHANNEL], ["c", EVENT_CHANNEL], ["b", PUBLISH_CHANNEL], ["c", PUBLISH_CHANNEL]]);
  assert.equal(isJobEventFrame(frame), true);
  assert.equal(isJobEventFrame(packEvent("salt/auth", {})), false);

  const got: { events: number; publishes: number; mirrored: number } = { events: 0, publishes: 0, mirrored: 0 };
  const bCh = new FakeChannel(["a", "c"]);
  new ClusterForwarder("b", bCh, { events: (f) => (got.events += f.length), publishes: (_from, _l, p) => (got.publishes += p?.length ?? 0), mirror: (f) => (got.mirrored += f.length) });
  const toB = aCh.sent.filter((s) => s.to === "b");
  for (const s of toB) bCh.handlers.get(s.channel)!({ from: "a", payload: s.payload });
  assert.deepEqual(got, { events: 1, publishes: 1, mirrored: 1 });
  assert.equal(bCh.sent.length, 0, "what b received is not forwarded again");
  // the same batches again (a duplicate), and a's batch presented by c (a relay or a forgery): dropped
  for (const s of toB) bCh.handlers.get(s.channel)!({ from: "a", payload: s.payload });
  for (const s of toB) bCh.handlers.get(s.channel)!({ from: "c", payload: s.payload });
  assert.deepEqual(got, { events: 1, publishes: 1, mirrored: 1 });
});

test("raft messages from peers: only from the authenticated sender, to this node, of peer types, well formed", () => {
  const a = raftIdOf("a");
  const b = raftIdOf("b");
  const m: Message = { type: "MsgApp", from: a, to: b, term: 2, logTerm: 1, index: 5, commit: 4, reject: false, rejectHint: 0, entries: [{ term: 2, index: 6, type: "normal", data: new Uint8Array([1, 2]) }] };
  const { group, messages } = decodeRaftPayload(encodeRaftPayload("cluster", [m]));
  assert.equal(group, "cluster");
  const ok = checkPeerMessage(messages[0], a, b);
  assert.ok(typeof ok !== "string", String(ok));
  assert.deepEqual(ok.entries![0]!.data, new Uint8Array([1, 2]));
  assert.match(String(checkPeerMessage(messages[0], raftIdOf("c"), b)), /authenticated sender/);
  assert.match(String(checkPeerMessage(messages[0], a, a)), /not this node/);
  assert.match(String(checkPeerMessage({ ...m, type: "MsgHup" }, a, b)), /not a peer message/);
  assert.match(String(checkPeerMessage({ ...m, term: -1 }, a, b)), /term/);
  assert.match(String(checkPeerMessage({ ...m, entries: [{ term: 1, index: 1, type: "bogus", data: new Uint8Array() }] }, a, b)), /entry/);
  const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });
  assert.throws(() => decodeRaftPayload(cbor.encode({ g: 1, m: [] }) as Uint8Array));
});
