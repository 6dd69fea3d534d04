/**
 * Reconnects: when one master restarts, the other reports it down, keeps (bounded) what is sent meanwhile,
 * redials with backoff, runs a new handshake (new session id) and delivers; the restarted master's own
 * connection replaces the old inbound session on the survivor, and the survivor dials a peer that reached it
 * at once instead of waiting out its backoff.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { bytes, nextEvent, startNode, text, waitFor, waitUp, type TestNode, freePort } from "./helpers.js";

test("after a peer restarts: peerDown, messages queued while it is away, peerUp with a new session, delivery and requests both ways", async () => {
  const [p1, p2] = [await freePort(), await freePort()];
  const m1 = await startNode({ id: "m1", port: p1, peers: [{ id: "m2", host: "127.0.0.1", port: p2 }] });
  const spec2 = { id: "m2", port: p2, peers: [{ id: "m1", host: "127.0.0.1", port: p1 }] };
  let m2: TestNode = await startNode(spec2);
  try {
    await Promise.all([waitUp(m1.t, ["m2"]), waitUp(m2.t, ["m1"])]);
    const firstSession = m1.t.status()[0]!.sessionId;
    m1.t.on("echo", (m) => bytes(`m1 got ${text(m.payload)}`));

    const down = nextEvent<[string, string]>(m1.t.events, "peerDown");
    await m2.t.close();
    const [who] = await down;
    assert.equal(who, "m2");
    assert.equal(m1.t.isUp("m2"), false);
    assert.ok(m1.log.warnings().some((l) => l.startsWith("peer channel: lost m2")), JSON.stringify(m1.log.lines));

    // sent while m2 is away: queued, not lost, not an error
    m1.t.send("m2", "raft/cluster", bytes("while you were out"));
    const up = nextEvent<[string, { sessionId: string }]>(m1.t.events, "peerUp");
    m2 = await startNode(spec2);
    const got: string[] = [];
    m2.t.on("raft/cluster", (m) => {
      got.push(text(m.payload));
    });
    const [upId, info] = await up;
    assert.equal(upId, "m2");
    assert.notEqual(info.sessionId, firstSession, "a new handshake, new keys");
    await waitFor(() => got.length === 1, "the queued message");
    assert.deepEqual(got, ["while you were out"]);

    // the restarted master dials back: m1 answers on the new inbound session
    await waitUp(m2.t, ["m1"]);
    assert.equal(text(await m2.t.request("m1", "echo", bytes("hi"), 10_000)), "m1 got hi");
    m2.t.on("echo", (m) => m.payload);
    assert.equal(text(await m1.t.request("m2", "echo", bytes("and back"), 10_000)), "and back");
  } finally {
    await m1.t.close();
    await m2.t.close();
  }
});

test("a peer that is not there yet is dialled with backoff until it appears", async () => {
  const p2 = await freePort();
  const m1 = await startNode({ id: "m1", peers: [{ id: "m2", host: "127.0.0.1", port: p2 }], limits: { reconnectMinMs: 10, reconnectMaxMs: 80 } });
  try {
    await waitFor(() => m1.t.status()[0]!.failedAttempts >= 3, "three failed attempts");
    const m2 = await startNode({ id: "m2", port: p2, peers: [], knows: ["m1"] });
    try {
      await waitUp(m1.t, ["m2"]);
    } finally {
      await m2.t.close();
    }
  } finally {
    await m1.t.close();
  }
});

test("a peer that connects to us is dialled back at once, not when the backoff that grew while it was away runs out", async () => {
  const p2 = await freePort();
  // a long backoff: after its first failed attempt m1 would wait at least 0.8 × 4 s before the next one
  const m1 = await startNode({ id: "m1", peers: [{ id: "m2", host: "127.0.0.1", port: p2 }], limits: { reconnectMinMs: 4000, reconnectMaxMs: 8000 } });
  try {
    await waitFor(() => m1.t.status()[0]!.failedAttempts >= 1, "a failed attempt");
    const started = Date.now();
    const m2 = await startNode({ id: "m2", port: p2, peers: [{ id: "m1", host: "127.0.0.1", port: m1.port }] });
    try {
      await waitUp(m2.t, ["m1"]);
      await waitUp(m1.t, ["m2"], 2500);
      assert.ok(Date.now() - started < 3000, `m1's link up ${Date.now() - started} ms after m2 started, before its backoff ran out`);
    } finally {
      await m2.t.close();
    }
  } finally {
    await m1.t.close();
  }
});

test("a session that reaches sessionMessagesMax is replaced by a new handshake without losing queued messages", async () => {
  const p2 = await freePort();
  const m2 = await startNode({ id: "m2", port: p2, peers: [], knows: ["m1"] });
  const m1 = await startNode({ id: "m1", peers: [{ id: "m2", host: "127.0.0.1", port: p2 }], limits: { sessionMessagesMax: 4 } });
  try {
    const sessions = new Set<string>();
    m1.t.events.on("peerUp", (_id: string, info: { sessionId: string }) => sessions.add(info.sessionId));
    const got: string[] = [];
    m2.t.on("raft/cluster", (m) => {
      got.push(text(m.payload));
    });
    await waitUp(m1.t, ["m2"]);
    sessions.add(m1.t.status()[0]!.sessionId!);
    const frames0 = m1.t.counters.framesOut;
    for (let i = 0; i < 12; i++) {
      m1.t.send("m2", "raft/cluster", bytes(String(i)));
      await new Promise((r) => setTimeout(r, 5)); // one frame each
    }
    await waitFor(() => got.length === 12, "12 messages across re-keys");
    assert.deepEqual(got, Array.from({ length: 12 }, (_, i) => String(i)));
    // seq 0 of each session is the handshake's AUTH, so a session carries 3 data frames
    const frames = m1.t.counters.framesOut - frames0;
    assert.ok(frames >= 4, `the sends went out in ${frames} frames`);
    assert.ok(sessions.size >= Math.ceil(frames / 3), `${sessions.size} sessions for ${frames} frames at 3 data frames per session`);
  } finally {
    await m1.t.close();
    await m2.t.close();
  }
});
