/**
 * Bounded queues: with the peer unreachable, sends queue up to peerQueueMessagesMax / peerQueueBytesMax and
 * then fail with CLUSTER_PEER_QUEUE_FULL, however many more are tried; when the peer comes up the queued
 * messages are delivered, in order, under the new session.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { isBrineError } from "../../src/shared/errors.js";
import { bytes, startNode, text, waitFor, freePort } from "./helpers.js";

test("a full message queue refuses sends with CLUSTER_PEER_QUEUE_FULL and does not grow; queued messages go out once the peer is up", async () => {
  const p2 = await freePort();
  const m1 = await startNode({ id: "m1", peers: [{ id: "m2", host: "127.0.0.1", port: p2 }], limits: { peerQueueMessagesMax: 10 } });
  try {
    for (let i = 0; i < 10; i++) m1.t.send("m2", "raft/cluster", bytes(String(i)));
    let refused = 0;
    for (let i = 0; i < 1000; i++) {
      try {
        m1.t.send("m2", "raft/cluster", bytes("overflow"));
      } catch (e) {
        assert.ok(isBrineError(e, "CLUSTER_PEER_QUEUE_FULL"), String(e));
        refused++;
      }
    }
    assert.equal(refused, 1000);
    await assert.rejects(m1.t.request("m2", "raft/cluster", bytes("req"), 5000), { code: "CLUSTER_PEER_QUEUE_FULL" });
    const st = m1.t.status()[0]!;
    assert.equal(st.queuedMessages, 10);
    assert.equal(st.requestsInFlight, 0, "a refused request leaves nothing pending");

    // the peer appears: the ten queued messages are delivered, in order, nothing else
    const m2 = await startNode({ id: "m2", port: p2, peers: [], knows: ["m1"] });
    try {
      const got: string[] = [];
      m2.t.on("raft/cluster", (m) => {
        got.push(text(m.payload));
      });
      await waitFor(() => got.length === 10, "10 queued messages delivered");
      await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(got, Array.from({ length: 10 }, (_, i) => String(i)));
      assert.equal(m1.t.status()[0]!.queuedMessages, 0);
    } finally {
      await m2.t.close();
    }
  } finally {
    await m1.t.close();
  }
});

test("the byte bound holds independently of the message count", async () => {
  const p2 = await freePort();
  const m1 = await startNode({ id: "m1", peers: [{ id: "m2", host: "127.0.0.1", port: p2 }], limits: { peerQueueBytesMax: 4096 } });
  try {
    const kb = new Uint8Array(1000);
    let accepted = 0;
    for (let i = 0; i < 50; i++) {
      try {
        m1.t.send("m2", "raft/cluster", kb);
        accepted++;
      } catch (e) {
        assert.ok(isBrineError(e, "CLUSTER_PEER_QUEUE_FULL"), String(e));
      }
    }
    assert.equal(accepted, 4, "four 1,000-byte messages (plus framing) fit in 4,096 bytes");
    assert.ok(m1.t.status()[0]!.queuedBytes <= 4096);
    // a small one still fits where a large one did not
    m1.t.send("m2", "raft/cluster", new Uint8Array(1));
  } finally {
    await m1.t.close();
  }
});

test("requests in flight are bounded, and an oversized payload is refused up front", async () => {
  const p2 = await freePort();
  const m1 = await startNode({ id: "m1", peers: [{ id: "m2", host: "127.0.0.1", port: p2 }], limits: { requestsInFlightMax: 3, frameBytesMax: 2048 } });
  try {
    const pending = [1, 2, 3].map(() => m1.t.request("m2", "raft/cluster", bytes("r"), 60_000));
    await assert.rejects(m1.t.request("m2", "raft/cluster", bytes("r"), 60_000), { code: "CLUSTER_PEER_QUEUE_FULL" });
    assert.throws(() => m1.t.send("m2", "raft/cluster", new Uint8Array(4096)), { code: "CLUSTER_PEER_FRAME" });
    const closing = m1.t.close();
    for (const p of pending) await assert.rejects(p, { code: "CLUSTER_PEER_CLOSED" });
    await closing;
    assert.throws(() => m1.t.send("m2", "raft/cluster", bytes("late")), { code: "CLUSTER_PEER_CLOSED" });
  } finally {
    await m1.t.close();
  }
});
