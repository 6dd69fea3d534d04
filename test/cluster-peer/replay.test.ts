/**
 * Replays, reordering and tampering inside a live session. A ZeroMQ relay sits between two masters and
 * passes the handshake through untouched (it cannot read or forge anything), then replays, holds back and
 * corrupts sealed frames: the receiver must drop exactly those, log them, and deliver everything else once.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import * as zmq from "zeromq";
import { FRAME } from "../../src/workers/raft/peer/framing.js";
import { bytes, startNode, text, waitFor, waitUp, freePort } from "./helpers.js";

type Rewrite = (frame: Buffer, dataIndex: number) => Buffer[];

/** An on-path relay: dialler → front (ROUTER) → back (DEALER) → listener, and replies the other way. */
class Relay {
  private readonly front = new zmq.Router({ linger: 0 });
  private readonly back = new zmq.Dealer({ linger: 0 });
  private rid: Buffer | undefined;
  private forwardData = 0;
  private returnData = 0;

  constructor(
    private readonly forward: Rewrite,
    private readonly backward: Rewrite = (f) => [f],
  ) {}

  async start(frontPort: number, backPort: number): Promise<void> {
    await this.front.bind(`tcp://127.0.0.1:${frontPort}`);
    this.back.connect(`tcp://127.0.0.1:${backPort}`);
    void this.pump();
    void this.pumpBack();
  }

  private async pump(): Promise<void> {
    try {
      for await (const [rid, frame] of this.front) {
        this.rid = rid;
        const out = frame![0] === FRAME.DATA ? this.forward(frame!, this.forwardData++) : [frame!];
        for (const f of out) await this.back.send(f);
      }
    } catch {
      // closed
    }
  }

  private async pumpBack(): Promise<void> {
    try {
      for await (const [frame] of this.back) {
        const out = frame![0] === FRAME.DATA ? this.backward(frame!, this.returnData++) : [frame!];
        for (const f of out) await this.front.send([this.rid!, f]);
      }
    } catch {
      // closed
    }
  }

  close(): void {
    this.front.close();
    this.back.close();
  }
}

async function relayed(forward: Rewrite, backward?: Rewrite) {
  const relayPort = await freePort();
  const m2 = await startNode({ id: "m2", peers: [], knows: ["m1"] });
  const relay = new Relay(forward, backward);
  await relay.start(relayPort, m2.port);
  const m1 = await startNode({ id: "m1", peers: [{ id: "m2", host: "127.0.0.1", port: relayPort }] });
  await waitUp(m1.t, ["m2"]);
  return {
    m1,
    m2,
    async close() {
      await m1.t.close();
      await m2.t.close();
      relay.close();
    },
  };
}

test("replayed, reordered and tampered frames are dropped and logged; every other frame arrives once", async () => {
  let held: Buffer | undefined;
  const net = await relayed((f, k) => {
    if (k === 1) return [f, f]; // replay
    if (k === 3) {
      held = f; // hold back ...
      return [];
    }
    if (k === 4) return [f, held!]; // ... and deliver after its successor
    if (k === 6) {
      const bad = Buffer.from(f);
      bad[bad.length - 5] = bad[bad.length - 5]! ^ 0x40;
      return [bad, f]; // a corrupted copy first, then the genuine frame
    }
    return [f];
  });
  try {
    const got: string[] = [];
    net.m2.t.on("raft/cluster", (m) => {
      got.push(text(m.payload));
    });
    // one frame per message: the writer coalesces what is queued at once, so space the sends out
    for (let i = 0; i < 10; i++) {
      net.m1.t.send("m2", "raft/cluster", bytes(String(i)));
      await new Promise((r) => setTimeout(r, 5));
    }
    await waitFor(() => got.length >= 9, "9 deliveries");
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(got, ["0", "1", "2", "4", "5", "6", "7", "8", "9"], "3 came after 4: refused; 1 twice: once");
    const c = net.m2.t.counters;
    assert.equal(c.replays, 2);
    assert.equal(c.authFailures, 1);
    const warned = net.m2.log.warnings();
    assert.equal(warned.filter((l) => l.includes("replayed or reordered")).length, 2, JSON.stringify(warned));
    assert.equal(warned.filter((l) => l.includes("failed authentication")).length, 1, JSON.stringify(warned));
    assert.ok(net.m1.t.isUp("m2"), "a bad frame is dropped; the session stays up");
  } finally {
    await net.close();
  }
});

test("replayed responses resolve nothing twice: each request gets its own reply once", async () => {
  const net = await relayed(
    (f) => [f],
    (f) => [f, f], // every reply twice
  );
  try {
    net.m2.t.on("echo", (m) => m.payload);
    // one at a time, so each reply travels in its own frame and is replayed on its own
    for (let i = 0; i < 20; i++) assert.equal(text(await net.m1.t.request("m2", "echo", bytes(`r${i}`), 10_000)), `r${i}`);
    await waitFor(() => net.m1.t.counters.replays === 20, "20 replays counted");
  } finally {
    await net.close();
  }
});
