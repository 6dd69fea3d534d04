/**
 * A thread's own close (src/shared/thread-kit.ts closeInOrder, the Raft worker's `close`): a step that fails does
 * not keep the steps after it from running (their sockets would stay open when the host then ends the thread,
 * which aborts the process with zeromq.js); the first failure is what the close reports.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { closeInOrder } from "../../src/shared/thread-kit.js";

test("every step of a close runs after one fails, in order, and the close fails with the first failure", async () => {
  const ran: string[] = [];
  const step = (what: string, fail?: string) => [what, async () => {
    ran.push(what);
    await new Promise((r) => setImmediate(r));
    if (fail) throw new Error(fail);
  }] as const;
  await assert.rejects(
    closeInOrder("test thread", [step("hand-off", "no follower answered"), step("peer host"), step("link", "already closed"), ["timer", () => void ran.push("timer")], step("groups")]),
    /no follower answered/,
  );
  assert.deepEqual(ran, ["hand-off", "peer host", "link", "timer", "groups"]);
});

test("a close whose steps all succeed resolves after the last one", async () => {
  const ran: string[] = [];
  await closeInOrder("test thread", [["a", () => void ran.push("a")], ["b", async () => void ran.push("b")]]);
  assert.deepEqual(ran, ["a", "b"]);
});
