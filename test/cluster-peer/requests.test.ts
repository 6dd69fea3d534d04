/**
 * Request/response correlation over real sockets: many concurrent requests answered out of order each get
 * their own reply; timeouts, remote errors, missing handlers and a dropped connection end a request with
 * their own codes, and nothing is left pending.
 */
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { BrineError } from "../../src/shared/errors.js";
import { PeerRemoteError } from "../../src/workers/raft/peer/peer-transport.js";
import { bytes, startNode, text, waitFor, waitUp, type TestNode, freePort } from "./helpers.js";

let m1: TestNode;
let m2: TestNode;

before(async () => {
  const [p1, p2] = [await freePort(), await freePort()];
  m1 = await startNode({ id: "m1", port: p1, peers: [{ id: "m2", host: "127.0.0.1", port: p2 }] });
  m2 = await startNode({ id: "m2", port: p2, peers: [{ id: "m1", host: "127.0.0.1", port: p1 }] });
  await Promise.all([waitUp(m1.t, ["m2"]), waitUp(m2.t, ["m1"])]);
  m2.t.on("echo", async (m) => {
    // answer in a scrambled order: later requests often finish first
    await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 20)));
    return bytes(`${m.from}:${text(m.payload)}`);
  });
  m2.t.on("sync-echo", (m) => m.payload);
  m2.t.on("never", () => new Promise<Uint8Array>(() => undefined));
  m2.t.on("fails", () => {
    throw new BrineError("RAFT_NO_LEADER", "no leader in group jobs");
  });
  m1.t.on("echo", (m) => bytes(`back:${text(m.payload)}`));
});

after(async () => {
  await m1?.t.close();
  await m2?.t.close();
});

test("500 concurrent requests answered out of order each resolve with their own reply", async () => {
  const n = 500;
  const replies = await Promise.all(Array.from({ length: n }, (_, i) => m1.t.request("m2", "echo", bytes(`q${i}`), 20_000)));
  replies.forEach((r, i) => assert.equal(text(r), `m1:q${i}`));
  assert.equal(m1.t.status()[0]!.requestsInFlight, 0);
});

test("requests flow both ways at once, each on its own connection", async () => {
  const [a, b] = await Promise.all([m1.t.request("m2", "sync-echo", bytes("x"), 10_000), m2.t.request("m1", "echo", bytes("y"), 10_000)]);
  assert.equal(text(a), "x");
  assert.equal(text(b), "back:y");
});

test("a request nobody answers times out with CLUSTER_PEER_TIMEOUT and is forgotten", async () => {
  const t0 = Date.now();
  await assert.rejects(m1.t.request("m2", "never", bytes("?"), 150), { code: "CLUSTER_PEER_TIMEOUT" });
  assert.ok(Date.now() - t0 >= 140, "not before its deadline");
  assert.equal(m1.t.status()[0]!.requestsInFlight, 0);
});

test("a handler's coded error comes back as PeerRemoteError with the remote code", async () => {
  await assert.rejects(m1.t.request("m2", "fails", bytes(""), 10_000), (e: unknown) => {
    assert.ok(e instanceof PeerRemoteError);
    assert.equal(e.code, "CLUSTER_PEER_REMOTE");
    assert.equal(e.remoteCode, "RAFT_NO_LEADER");
    assert.equal(e.peerId, "m2");
    assert.match(e.message, /no leader in group jobs/);
    return true;
  });
});

test("a request on a channel without a handler is answered with an error, not left to time out", async () => {
  const t0 = Date.now();
  await assert.rejects(m1.t.request("m2", "nobody-home", bytes(""), 10_000), (e: unknown) => e instanceof PeerRemoteError && e.remoteCode === "CLUSTER_PEER_CHANNEL");
  assert.ok(Date.now() - t0 < 5_000);
});

test("API misuse is refused with codes: unknown peer, bad channel, second handler", async () => {
  await assert.rejects(m1.t.request("m9", "echo", bytes(""), 100), { code: "CLUSTER_PEER_UNKNOWN" });
  assert.throws(() => m1.t.send("m9", "echo", bytes("")), { code: "CLUSTER_PEER_UNKNOWN" });
  assert.throws(() => m1.t.send("m2", "no spaces", bytes("")), { code: "CLUSTER_PEER_CHANNEL" });
  assert.throws(() => m2.t.on("echo", () => undefined), { code: "CLUSTER_PEER_CHANNEL" });
});

test("one-way messages arrive in order with the sender's proven id, coalesced into few frames", async () => {
  const got: string[] = [];
  const off = m2.t.on("ordered", (m) => {
    got.push(`${m.from}:${text(m.payload)}:${m.request}`);
  });
  const frames0 = m1.t.counters.framesOut;
  for (let i = 0; i < 300; i++) m1.t.send("m2", "ordered", bytes(String(i)));
  await waitFor(() => got.length === 300, "300 messages");
  assert.deepEqual(got, Array.from({ length: 300 }, (_, i) => `m1:${i}:false`));
  // queued in one burst, they leave coalesced: one seal and one socket write for many messages
  assert.ok(m1.t.counters.framesOut - frames0 <= 3, `300 messages in ${m1.t.counters.framesOut - frames0} frames`);
  off();
});

test("requests written on a connection that drops fail with CLUSTER_PEER_DOWN before their timeout", async () => {
  const p3 = await freePort();
  const m3 = await startNode({ id: "m3", port: p3, peers: [], knows: ["m4"] });
  const m4 = await startNode({ id: "m4", peers: [{ id: "m3", host: "127.0.0.1", port: p3 }] });
  try {
    m3.t.on("never", () => new Promise<Uint8Array>(() => undefined));
    await waitUp(m4.t, ["m3"]);
    const req = m4.t.request("m3", "never", bytes("?"), 60_000);
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    const rejected = assert.rejects(req, { code: "CLUSTER_PEER_DOWN" });
    await m3.t.close();
    await rejected;
    assert.ok(Date.now() - t0 < 30_000);
    assert.equal(m4.t.status()[0]!.requestsInFlight, 0);
  } finally {
    await m4.t.close();
    await m3.t.close();
  }
});
