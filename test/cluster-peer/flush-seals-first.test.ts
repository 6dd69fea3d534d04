/**
 * A flush for several peers seals every peer's frame before it hands the first one to its socket: handing a
 * frame to libzmq wakes its I/O thread, which on a busy box often takes the sender's CPU, so a seal left
 * between two sends made the second peer's frame (a leader's append to its second follower) wait for it.
 * The transport's stage sink sees the order: seal, seal, send, send (it was seal, send, seal, send).
 */
import { test, after, before } from "node:test";
import assert from "node:assert/strict";
import { bytes, startNode, text, waitFor, waitUp, type TestNode, freePort } from "./helpers.js";
import type { StageSink } from "../../src/shared/metrics/stage-clock.js";

let m1: TestNode;
let m2: TestNode;
let m3: TestNode;
const got: string[] = [];
/** the order of m1's seal and send stages */
const order: string[] = [];
const sink: StageSink = {
  on: true,
  now: () => 0,
  add: (stage) => {
    if (stage === "peer.seal" || stage === "peer.zmqSend") order.push(stage);
  },
  count: () => undefined,
};

before(async () => {
  const [p1, p2, p3] = [await freePort(), await freePort(), await freePort()];
  const ep = (id: string, port: number) => ({ id, host: "127.0.0.1", port });
  m1 = await startNode({ id: "m1", port: p1, peers: [ep("m2", p2), ep("m3", p3)], stages: sink });
  m2 = await startNode({ id: "m2", port: p2, peers: [ep("m1", p1)], knows: ["m1", "m3"] });
  m3 = await startNode({ id: "m3", port: p3, peers: [ep("m1", p1)], knows: ["m1", "m2"] });
  await Promise.all([waitUp(m1.t, ["m2", "m3"]), waitUp(m2.t, ["m1"]), waitUp(m3.t, ["m1"])]);
  m2.t.on("raft", (m) => void got.push(`m2:${text(m.payload)}`));
  m3.t.on("raft", (m) => void got.push(`m3:${text(m.payload)}`));
});

after(async () => {
  await m1?.t.close();
  await m2?.t.close();
  await m3?.t.close();
});

test("a flush for two peers seals both frames before either is handed to its socket, and both arrive", async () => {
  m1.t.send("m2", "raft", bytes("a2"));
  m1.t.send("m3", "raft", bytes("a3"));
  order.length = 0;
  m1.t.flush(["m2", "m3"]);
  assert.deepEqual(order, ["peer.seal", "peer.seal", "peer.zmqSend", "peer.zmqSend"], "both sealed, then both sent, before flush returns");
  await waitFor(() => got.length === 2, "both messages");
  assert.deepEqual([...got].sort(), ["m2:a2", "m3:a3"]);
});

test("a flush that finds one peer's write under way sends the other's frame at once and the busy link takes its queue along", async () => {
  got.length = 0;
  m1.t.send("m2", "raft", bytes("b1"), { now: true }); // a write under way on m2's link until its send settles
  m1.t.send("m2", "raft", bytes("b2"));
  m1.t.send("m3", "raft", bytes("b3"));
  order.length = 0;
  m1.t.flush(["m2", "m3"]);
  assert.deepEqual(order, ["peer.seal", "peer.zmqSend"], "only m3's frame: m2's writer is busy and takes b2 along");
  await waitFor(() => got.length === 3, "the three messages");
  assert.deepEqual(got.filter((x) => x.startsWith("m2:")), ["m2:b1", "m2:b2"], "in order on m2's link");
});
