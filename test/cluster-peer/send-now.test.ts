/**
 * Latency-bound messages (Raft's) can skip the writer's wait for the end of the I/O burst: with `now` the
 * queue is sealed and handed to the socket before send() returns, everything already queued in the same
 * frame, in order. Without it, messages wait for the burst to end and leave together, unless flush() writes
 * them first (the Raft link queues one payload per group and flushes once per peer). A `held` message is
 * only queued: the writer after the burst is not scheduled for it, and flush() writes it.
 */
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { bytes, startNode, text, waitFor, waitUp, type TestNode, freePort } from "./helpers.js";

let m1: TestNode;
let m2: TestNode;
const got: string[] = [];

before(async () => {
  const [p1, p2] = [await freePort(), await freePort()];
  m1 = await startNode({ id: "m1", port: p1, peers: [{ id: "m2", host: "127.0.0.1", port: p2 }] });
  m2 = await startNode({ id: "m2", port: p2, peers: [{ id: "m1", host: "127.0.0.1", port: p1 }] });
  await Promise.all([waitUp(m1.t, ["m2"]), waitUp(m2.t, ["m1"])]);
  m2.t.on("raft", (m) => void got.push(text(m.payload)));
  m2.t.on("ev", (m) => void got.push(text(m.payload)));
});

after(async () => {
  await m1?.t.close();
  await m2?.t.close();
});

test("a message sent with `now` is written before send() returns, with what was queued before it, in order", async () => {
  got.length = 0;
  const c = m1.t.counters;
  const frames = c.framesOut;
  const bodies = c.bodiesOut;
  m1.t.send("m2", "ev", bytes("e1"));
  m1.t.send("m2", "ev", bytes("e2"));
  assert.equal(c.framesOut, frames, "an ordinary message waits for the end of the I/O burst");
  m1.t.send("m2", "raft", bytes("r1"), { now: true });
  assert.equal(c.framesOut, frames + 1, "written at once");
  assert.equal(c.bodiesOut, bodies + 3, "the queued messages share its frame");
  await waitFor(() => got.length === 3, "the three messages");
  assert.deepEqual(got, ["e1", "e2", "r1"]);
});

test("without `now`, messages queued in one turn leave together after it", async () => {
  got.length = 0;
  const c = m1.t.counters;
  const frames = c.framesOut;
  for (let i = 0; i < 5; i++) m1.t.send("m2", "ev", bytes(`e${i}`));
  assert.equal(c.framesOut, frames);
  await waitFor(() => got.length === 5, "the five messages");
  assert.equal(c.framesOut, frames + 1, "one frame for the five");
  assert.deepEqual(got, ["e0", "e1", "e2", "e3", "e4"]);
});

test("flush writes what was queued for a peer at once, in one frame, and does nothing with an empty queue", async () => {
  got.length = 0;
  const c = m1.t.counters;
  const frames = c.framesOut;
  const bodies = c.bodiesOut;
  m1.t.send("m2", "raft", bytes("g1"));
  m1.t.send("m2", "raft", bytes("g2"));
  m1.t.send("m2", "raft", bytes("g3"));
  assert.equal(c.framesOut, frames, "queued, not written");
  m1.t.flush(["m2"]);
  assert.equal(c.framesOut, frames + 1, "written by the flush, before it returns");
  assert.equal(c.bodiesOut, bodies + 3, "the three in one frame");
  m1.t.flush(["m2"]);
  m1.t.flush(["nobody"]);
  assert.equal(c.framesOut, frames + 1, "an empty queue or an unknown peer writes nothing");
  await waitFor(() => got.length === 3, "the three messages");
  assert.deepEqual(got, ["g1", "g2", "g3"]);
});

test("a held message is not written after the I/O burst: it waits for flush(), which writes it with what was queued", async () => {
  got.length = 0;
  const c = m1.t.counters;
  const frames = c.framesOut;
  m1.t.send("m2", "raft", bytes("h1"), { held: true });
  m1.t.send("m2", "raft", bytes("h2"), { held: true });
  // several turns of the event loop: a writer scheduled after the burst (setImmediate) would have run
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  assert.equal(c.framesOut, frames, "still queued");
  assert.equal(m1.t.status().find((s) => s.id === "m2")?.queuedMessages, 2);
  m1.t.flush(["m2"]);
  assert.equal(c.framesOut, frames + 1, "written by the flush, in one frame");
  await waitFor(() => got.length === 2, "the two messages");
  assert.deepEqual(got, ["h1", "h2"]);
});
