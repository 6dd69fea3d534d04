/**
 * The main thread applies a finished request batch in one order: bus, publisher, peers (events; the publishes
 * reach the peers sealed, from the publisher thread), cache-sync, replies, runner threads
 * (src/main-thread/batch-result.ts says why each comes before the next). These
 * tests record the calls of every sink and assert the order and what each sink receives.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { applyBatchResult, type BatchOutput, type BatchSinks } from "../../src/main-thread/batch-result.js";
import type { RunnerLaunch } from "../../src/workers/req-handler/context.js";

function recorder(clustered: boolean): { calls: string[]; sinks: BatchSinks<string> } {
  const calls: string[] = [];
  const sinks: BatchSinks<string> = {
    bus: (frames) => calls.push(`bus:${frames.map((f) => f.toString()).join(",")}`),
    publisher: (loads) => calls.push(`publisher:${loads.map((l) => l.jid).join(",")}`),
    reply: (tag, reply) => calls.push(`reply:${tag}=${reply.toString()}`),
    runner: (run) => calls.push(`runner:${(run as unknown as { jid: string }).jid}`),
    ...(clustered && {
      peers: (events, verified, nonces) => calls.push(`peers:${events.length}/${verified?.join("+") ?? "-"}/${nonces?.length ?? 0}`),
      sync: (batches) => calls.push(`sync:${batches.length}`),
    }),
  };
  return { calls, sinks };
}

const batch = (): BatchOutput<string> => ({
  replies: [
    { tag: "a", reply: Buffer.from("r1") },
    { tag: "b", reply: Buffer.from("r2") },
  ],
  events: [new Uint8Array(Buffer.from("e1")), new Uint8Array(Buffer.from("e2"))],
  publishes: [{ jid: "j1" }],
  sync: [new Uint8Array(3)],
  runs: [{ jid: "run1" } as unknown as RunnerLaunch],
  verified: [1],
  nonces: new Uint8Array(16),
});

test("a clustered batch goes to the bus, the publisher, the peers, cache-sync, the replies and the runners, in that order", () => {
  const { calls, sinks } = recorder(true);
  applyBatchResult(batch(), sinks);
  assert.deepEqual(calls, ["bus:e1,e2", "publisher:j1", "peers:2/1/16", "sync:1", "reply:a=r1", "reply:b=r2", "runner:run1"]);
});

test("an unclustered master applies the same order without peers or cache-sync, and replies keep their frame order", () => {
  const { calls, sinks } = recorder(false);
  applyBatchResult(batch(), sinks);
  assert.deepEqual(calls, ["bus:e1,e2", "publisher:j1", "reply:a=r1", "reply:b=r2", "runner:run1"]);
});

test("a batch of replies only (a part, a failed task) still reaches the bus and the publisher first, with nothing to send", () => {
  const { calls, sinks } = recorder(true);
  applyBatchResult({ replies: [{ tag: "x", reply: Buffer.from("late") }], events: [], publishes: [] }, sinks);
  assert.deepEqual(calls, ["bus:", "publisher:", "peers:0/-/0", "reply:x=late"]);
});
