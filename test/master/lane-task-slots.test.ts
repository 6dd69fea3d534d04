/**
 * A lane posts at most `tasksMax` batches to its workers at once (req-pool.ts `tasksPerWorker`: the clear lane one
 * per worker): frames that come while every slot is taken wait on the main thread and go together in the next
 * batch when a task ends, and every frame still gets exactly one reply, from its batch, or at shutdown. Driven
 * with a pool of the test's own, whose tasks end when the test says.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { BroadcastChannel } from "node:worker_threads";
import { LaneQueue, SHUTDOWN_REPLY, type LanePool } from "../../src/main-thread/req-pool.js";
import type { BatchOutput } from "../../src/main-thread/batch-result.js";
import type { BatchResult, BatchTask } from "../../src/workers/req-handler/task.js";

/** A pool whose tasks wait until `end(i)`: each reply is the frame's bytes reversed. */
function heldPool() {
  const tasks: { task: BatchTask; done: (r: BatchResult) => void }[] = [];
  const pool: LanePool = {
    run: (task: BatchTask) => new Promise<BatchResult>((done) => tasks.push({ task, done })),
  } as LanePool;
  const end = (i: number) => {
    const t = tasks[i]!;
    t.done({ replies: t.task.frames.map((f) => Buffer.from(f).reverse()), events: [], publishes: [] });
  };
  return { pool, tasks, end };
}

let channels = 0;
function lane(pool: LanePool, tasksMax: number, name: "clear" | "req" = "clear") {
  const out: { tag: number; reply: string }[] = [];
  const channel = new BroadcastChannel(`lane-task-slots-${process.pid}-${++channels}`);
  channel.unref();
  const q = new LaneQueue<number>(name, pool, 1000, 0, (o: BatchOutput<number>) => o.replies.forEach((r) => out.push({ tag: r.tag, reply: r.reply.toString() })), channel, tasksMax);
  const push = (tag: number) => assert.equal(q.push({ frame: Buffer.from(`f${tag}`), tag, arrival: Date.now() }), true);
  return { q, out, push, close: () => q.close() };
}

const turn = () => new Promise((r) => setImmediate(r));

test("with one task slot, frames that come while the task runs wait and go together in the next batch", async () => {
  const { pool, tasks, end } = heldPool();
  const l = lane(pool, 1);
  try {
    l.push(1);
    await turn();
    assert.deepEqual(tasks.map((t) => t.task.frames.length), [1], "the first frame goes at once, alone");
    for (const tag of [2, 3, 4]) l.push(tag);
    await turn();
    assert.equal(tasks.length, 1, "no second task while the slot is taken");
    assert.equal(l.q.waiting, 4);
    end(0);
    await turn();
    assert.deepEqual(tasks.map((t) => t.task.frames.map((f) => Buffer.from(f).toString())), [["f1"], ["f2", "f3", "f4"]], "the waiting frames go in one batch when the task ends");
    end(1);
    await turn();
    assert.deepEqual(l.out, [1, 2, 3, 4].map((tag) => ({ tag, reply: `${tag}f` })), "each frame answered once, by its own reply");
    assert.equal(l.q.waiting, 0);
  } finally {
    l.close();
  }
});

test("with two task slots, two batches run at once and a third waits for one of them", async () => {
  const { pool, tasks, end } = heldPool();
  const l = lane(pool, 2);
  try {
    l.push(1);
    await turn();
    l.push(2);
    await turn();
    l.push(3);
    l.push(4);
    await turn();
    assert.equal(tasks.length, 2);
    end(1);
    await turn();
    assert.equal(tasks.length, 3);
    assert.deepEqual(tasks[2]!.task.frames.map((f) => Buffer.from(f).toString()), ["f3", "f4"]);
    end(0);
    end(2);
    await turn();
    assert.deepEqual(l.out.map((o) => o.tag).sort(), [1, 2, 3, 4]);
  } finally {
    l.close();
  }
});

test("a failed task frees its slot: its frames get an error reply and the waiting frames go", async () => {
  const tasks: { task: BatchTask; fail: (e: Error) => void }[] = [];
  const pool = { run: (task: BatchTask) => new Promise((_r, fail) => tasks.push({ task, fail })) } as unknown as LanePool;
  const l = lane(pool, 1);
  try {
    l.push(1);
    await turn();
    l.push(2);
    await turn();
    tasks[0]!.fail(new Error("worker gone"));
    await turn();
    assert.equal(tasks.length, 2, "the frame that waited went in a new task");
    assert.deepEqual(l.out.map((o) => o.tag), [1]);
    assert.match(l.out[0]!.reply, /Some exception handling minion payload/);
  } finally {
    l.close();
  }
});

test("at shutdown, frames still waiting for a task slot are answered too, each once (a running task's frames by its task)", async () => {
  const { pool, tasks, end } = heldPool();
  const l = lane(pool, 1);
  try {
    l.push(1);
    await turn();
    l.push(2);
    l.push(3);
    await turn();
    assert.equal(tasks.length, 1);
    l.q.answerOwed(SHUTDOWN_REPLY);
    assert.deepEqual(l.out, [2, 3].map((tag) => ({ tag, reply: SHUTDOWN_REPLY.toString() })));
    assert.equal(l.q.waiting, 1, "the running task's frame is owed by its task (destroy() ends it: an error reply)");
    end(0);
    await turn();
    assert.deepEqual(l.out.map((o) => o.tag), [2, 3, 1]);
    assert.equal(l.q.waiting, 0, "nothing waits or runs any more");
    assert.equal(tasks.length, 1, "no task was started for the frames answered at shutdown");
  } finally {
    l.close();
  }
});

test("at shutdown, the AES lane's frames still waiting are left unanswered, not answered with a clear map a Salt minion cannot read, and no longer counted (a running task's frames still by its task)", async () => {
  const { pool, tasks, end } = heldPool();
  const l = lane(pool, 1, "req");
  try {
    l.push(1);
    await turn();
    l.push(2);
    l.push(3);
    await turn();
    l.q.answerOwed(undefined);
    assert.equal(l.out.length, 0, "nothing answered for the waiting frames");
    assert.equal(l.q.waiting, 1, "only the running task's frame is still owed");
    end(0);
    await turn();
    assert.deepEqual(l.out.map((o) => o.tag), [1], "the running task's frame answered by its task");
    assert.equal(l.q.waiting, 0);
    assert.equal(tasks.length, 1, "no task was started for the frames left at shutdown");
  } finally {
    l.close();
  }
});
