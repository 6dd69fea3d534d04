/**
 * A Raft worker that is slow to start (a loaded box: a fresh-clone CI run at load 30 saw starts past the 15 s
 * call deadline, and the master then ended the worker and died with "outcome unknown ... no answer from the
 * raft worker within 15000 ms"): the master's wait for it, RaftClient.ready(), outlasts the call deadline and
 * ends only with the answer or with the worker gone. Other calls keep their deadline.
 *
 * The worker's side is played on a MessageChannel port (the client's endpoint may be either), so the start
 * can be made slower than a client built with a short call deadline.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { MessageChannel } from "node:worker_threads";
import { setTimeout as sleep } from "node:timers/promises";
import { isBrineError } from "../../src/shared/errors.js";
import { RaftClient } from "../../src/workers/raft/client.js";
import type { FromRaft, NodeStatus, ToRaft } from "../../src/workers/raft/api.js";

/** the client's call deadline in these tests, ms (the call timer's ticks are 250 ms) */
const callDeadlineMs = 100;
/** how long the played worker takes to start: several call deadlines and timer ticks, ms */
const startMs = 1_500;

test("a raft worker whose start outlasts the call deadline is still waited for: ready() resolves with its status", { timeout: 30_000 }, async () => {
  const { port1, port2 } = new MessageChannel();
  const status = { nodeId: "m1", raftId: 1, tickMs: 50, groups: [] } as unknown as NodeStatus;
  port2.on("message", (m: ToRaft) => {
    if (m.k !== "ready") return; // a status call goes unanswered: it must still meet its deadline
    setTimeout(() => port2.postMessage({ k: "res", id: m.id, v: status } satisfies FromRaft), startMs);
  });
  const client = new RaftClient(port1, callDeadlineMs);
  try {
    const ready = client.ready();
    await assert.rejects(client.status(), (e) => isBrineError(e, "RAFT_UNKNOWN"), "an ordinary call keeps its deadline");
    assert.deepEqual(await ready, status);
  } finally {
    client.dispose();
    port1.close();
    port2.close();
  }
});

test("a raft worker that goes away while starting fails ready() with RAFT_STOPPED: the wait never hangs", { timeout: 30_000 }, async () => {
  const { port1, port2 } = new MessageChannel();
  port2.on("message", () => {}); // never answers
  const client = new RaftClient(port1, callDeadlineMs);
  try {
    const ready = client.ready();
    let settled = false;
    ready.then(
      () => (settled = true),
      () => (settled = true),
    );
    await sleep(startMs);
    assert.equal(settled, false, "no deadline ends the wait for a start");
    port2.close();
    await assert.rejects(ready, (e) => isBrineError(e, "RAFT_STOPPED"));
  } finally {
    client.dispose();
    port1.close();
  }
});
