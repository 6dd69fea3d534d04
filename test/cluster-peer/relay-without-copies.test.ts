/**
 * Bytes that only pass through the main thread (the state-sync relay between its thread and the Raft worker's
 * peer channel) cross without a copy: a payload handed over whole is transferred as it is; anything else (a view
 * into a larger buffer, a payload not handed over) is still copied, so a caller's buffer in use is never detached.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { PortBatcher, handOver, type PostTarget } from "../../src/workers/raft/peer-proxy-wire.js";
import { StateSyncLink, type StateSyncChannel } from "../../src/main-thread/cluster/state-sync-link.js";
import type { PeerHandler } from "../../src/workers/raft/peer/peer-types.js";
import type { FromEngine, ToEngine } from "../../src/workers/state-sync/messages.js";

/** A port that structured-clones as postMessage does, transfer list honoured (the sender's buffers detach). */
class ClonePort implements PostTarget {
  got: { p: Uint8Array[] }[] = [];
  postMessage(value: unknown, transfer?: ArrayBuffer[]): void {
    this.got.push(structuredClone(value, { transfer: transfer ?? [] }) as { p: Uint8Array[] });
  }
}

const bytesOf = (n: number, fill: number) => new Uint8Array(n).fill(fill);

test("a payload handed over whole crosses by transfer: the sender's buffer is detached and the bytes arrive", () => {
  const port = new ClonePort();
  const b = new PortBatcher<{ k: string; p: number }>(port);
  const p = bytesOf(1000, 7);
  b.push({ k: "send", p: b.payload(handOver(p)) });
  b.flush();
  assert.equal(p.byteLength, 0, "transferred, not copied");
  assert.deepEqual(port.got[0]!.p[0], bytesOf(1000, 7));
});

test("a payload not handed over, or handed over as a view into a larger buffer, is copied and stays readable", () => {
  const port = new ClonePort();
  const b = new PortBatcher<{ k: string; p: number }>(port);
  const plain = bytesOf(100, 1);
  const scratch = bytesOf(4096, 2);
  const view = handOver(scratch.subarray(10, 110));
  b.push({ k: "send", p: b.payload(plain) });
  b.push({ k: "send", p: b.payload(view) });
  b.flush();
  assert.equal(plain.byteLength, 100);
  assert.equal(scratch.byteLength, 4096, "the larger buffer is not detached");
  assert.deepEqual(port.got[0]!.p, [bytesOf(100, 1), bytesOf(100, 2)]);
});

/** The peer channel the link sees: records what it is given, answers requests with `answer`. */
class RecordingChannel implements StateSyncChannel {
  handler: PeerHandler | undefined;
  sent: Uint8Array[] = [];
  asked: Uint8Array[] = [];
  constructor(private readonly answer: () => Uint8Array) {}
  send(_peer: string, _channel: string, payload: Uint8Array): void {
    this.sent.push(payload);
  }
  async request(_peer: string, _channel: string, payload: Uint8Array): Promise<Uint8Array> {
    this.asked.push(payload);
    return this.answer();
  }
  upPeers(): string[] {
    return ["b"];
  }
  on(_channel: string, h: PeerHandler): () => void {
    this.handler = h;
    return () => (this.handler = undefined);
  }
}

const next = (port: MessagePort, k: string) =>
  new Promise<ToEngine>((resolve) => {
    const on = (m: ToEngine) => {
      if (m.k !== k) return;
      port.off("message", on);
      resolve(m);
    };
    port.on("message", on);
  });

test("the state-sync relay moves a peer's bytes to the thread by transfer, both a note and a request's answer", async () => {
  const answer = bytesOf(2048, 9);
  const ch = new RecordingChannel(() => answer);
  const link = new StateSyncLink(ch, () => ["b"]);
  const engineEnd = link.newPort();
  try {
    // a peer's note reaches the thread; the link keeps no copy
    const note = bytesOf(512, 3);
    const inbound = next(engineEnd, "in");
    ch.handler!({ from: "b", channel: "cl/state-sync", payload: note, request: false });
    assert.deepEqual((await inbound as Extract<ToEngine, { k: "in" }>).p, bytesOf(512, 3));
    assert.equal(note.byteLength, 0, "the note's bytes were transferred to the thread");

    // the thread's request goes out handed over (the proxy may transfer it on); its answer comes back by transfer
    const res = next(engineEnd, "res");
    engineEnd.postMessage({ k: "req", id: 1, to: "b", p: bytesOf(64, 4), ms: 1000 } satisfies FromEngine);
    assert.deepEqual((await res as Extract<ToEngine, { k: "res" }>).p, bytesOf(2048, 9));
    assert.equal(answer.byteLength, 0, "the answer's bytes were transferred to the thread");
    const asked = ch.asked[0]!;
    const port = new ClonePort();
    const b = new PortBatcher<{ k: string; p: number }>(port);
    b.push({ k: "req", p: b.payload(asked) });
    b.flush();
    assert.equal(asked.byteLength, 0, "the thread's request bytes were handed over: the proxy moves them without a copy");
  } finally {
    link.close();
    engineEnd.close();
  }
});
