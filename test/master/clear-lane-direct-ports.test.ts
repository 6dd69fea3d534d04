/**
 * The clear lane's batches go on a MessagePort of each worker's own (src/main-thread/direct-ports.ts), Piscina still
 * the pool: a worker gets its port in an `attach` task, a batch goes on a free port (else through the pool), a port
 * whose worker ended fails the batch on it, and a worker started in its place gets a port. Driven with a pool of the
 * test's own whose "workers" answer on their ports in this thread; then a real master's sign-ins.
 */
import { test, describe, after, before } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import type { MessagePort } from "node:worker_threads";
import { DirectPorts, type PortPool } from "../../src/main-thread/direct-ports.js";
import type { AttachTask, BatchTask, DirectReply } from "../../src/workers/req-handler/task.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

/** A pool whose workers take one port each and answer a batch with its frames reversed; other tasks answer "pool". */
function fakePool(workers: number) {
  const ev = new EventEmitter();
  const ports: MessagePort[] = [];
  const poolTasks: unknown[] = [];
  let next = 0;
  const run = async (task: { kind: string }): Promise<unknown> => {
    if (task.kind !== "attach") {
      poolTasks.push(task);
      return "pool";
    }
    const port = (task as AttachTask).port;
    // the workers take the asks in turn; one that has a port says no
    const w = next++ % workers;
    if (ports[w] && !closedWorkers.has(w)) {
      port.close();
      return { thread: w, attached: false };
    }
    closedWorkers.delete(w);
    ports[w] = port;
    port.on("message", (b: BatchTask) => {
      if (holding) held.push(() => port.postMessage({ result: reply(b) } satisfies DirectReply));
      else port.postMessage({ result: reply(b) } satisfies DirectReply);
    });
    port.unref();
    return { thread: w, attached: true };
  };
  const reply = (b: BatchTask) => ({ replies: b.frames.map((f) => Buffer.from(f).reverse()), events: [], publishes: [] });
  const closedWorkers = new Set<number>();
  let holding = false;
  const held: (() => void)[] = [];
  const pool = { run, on: (name: string, f: () => void) => ev.on(name, f) } as unknown as PortPool;
  return {
    pool,
    ports,
    poolTasks,
    /** the next batches wait for release() */
    hold: () => (holding = true),
    release: () => {
      holding = false;
      for (const f of held.splice(0)) f();
    },
    /** worker `w` ends: its port closes */
    end: (w: number) => {
      closedWorkers.add(w);
      ports[w]!.close();
    },
    /** Piscina started a worker in place of an ended one */
    created: () => ev.emit("workerCreate"),
  };
}

const batch = (...frames: string[]): BatchTask => ({ kind: "batch", batch: 1, frames: frames.map((f) => Buffer.from(f)), arrivals: frames.map(() => Date.now()), staleMs: 0 });
const text = (r: unknown) => (r as { replies: Uint8Array[] }).replies.map((x) => Buffer.from(x).toString());
const turn = () => new Promise((r) => setImmediate(r));

test("once attached, each worker has one port and batches go on them, other tasks through the pool", async () => {
  const f = fakePool(2);
  const d = new DirectPorts(f.pool, 2);
  try {
    assert.equal(await d.run(batch("ab")), "pool", "before ports are attached a batch goes through the pool");
    await d.attach();
    assert.equal(d.size, 2);
    assert.deepEqual(text(await d.run(batch("ab", "cd"))), ["ba", "dc"]);
    assert.equal(await d.run({ kind: "ready" }), "pool");
    assert.equal(d.batchesOnPorts, 1);
    assert.deepEqual(f.poolTasks.map((t) => (t as { kind: string }).kind), ["batch", "ready"]);
  } finally {
    d.close();
  }
});

test("a batch that finds every port taken goes through the pool", async () => {
  const f = fakePool(1);
  const d = new DirectPorts(f.pool, 1);
  try {
    await d.attach();
    f.hold();
    const first = d.run(batch("xy"));
    assert.equal(await d.run(batch("zz")), "pool");
    f.release();
    assert.deepEqual(text(await first), ["yx"]);
  } finally {
    d.close();
  }
});

test("a worker that ends with a batch on its port fails that batch, and the worker started in its place gets a port", async () => {
  const f = fakePool(2);
  const d = new DirectPorts(f.pool, 2);
  try {
    await d.attach();
    f.hold();
    const lost = d.run(batch("ab"));
    await turn();
    f.end(0);
    f.end(1);
    await assert.rejects(lost, /request worker ended/);
    // (each port's close event comes on its own turn)
    for (let i = 0; i < 10 && d.size > 0; i++) await turn();
    assert.equal(d.size, 0, "the closed ports are forgotten");
    assert.equal(await d.run(batch("cd")), "pool", "meanwhile batches go through the pool");
    f.release();
    f.created();
    await d.attach();
    assert.equal(d.size, 2);
    assert.deepEqual(text(await d.run(batch("ef"))), ["fe"]);
  } finally {
    d.close();
  }
});

describe("a master's sign-ins on the clear lane's direct ports", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  before(async () => {
    tm = await startTestMaster({ auto_accept: true, worker_threads: 4 });
  });
  after(async () => {
    await tm.stop();
  });

  test("each clear-lane worker has its port once the master serves, and a minion's sign-ins go on them", async () => {
    const direct = (tm.server as unknown as { lanes: { direct: DirectPorts } }).lanes.direct;
    assert.equal(direct.size, 2);
    const before = direct.batchesOnPorts;
    const keys = await testKeys(1);
    const m = fastMinion(tm, "direct-port-minion", keys[0]!);
    await m.start();
    try {
      // start() resolves once the minion signed in (and got its pillar)
      assert.ok(direct.batchesOnPorts > before, "the sign-in's batch went on a direct port");
    } finally {
      await m.stop();
    }
  });
});
