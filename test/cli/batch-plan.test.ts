/**
 * The batch scheduler (src/lib/client/batch.ts) against Salt 3007's salt/cli/batch.py, as tables: the batch size
 * of N and N%, which minions each sub-job takes, --batch-wait, --failhard, a sub-job that ends without a
 * minion's return, the exit code, and the driver loop with an injected clock and publisher.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { BatchPlan, batchSize, partRetcode, runBatch, type BatchEffect, type SubJobReturn } from "../../src/lib/client/batch.js";

test("batch size: N, N% rounded down, a share below one minion rounded up, and invalid input", () => {
  const table: [string, number, number | undefined][] = [
    ["2", 5, 2],
    ["50%", 3, 1],
    ["10%", 3, 1],
    ["33%", 10, 3],
    ["100%", 4, 4],
    ["%10", 20, 2],
    ["abc", 3, undefined],
    ["1.5", 3, undefined],
  ];
  for (const [b, n, want] of table) assert.equal(batchSize(b, n), want, `${b} of ${n}`);
});

test("retcode of a return: a number, the highest of a multi-function map, 0 otherwise", () => {
  assert.equal(partRetcode(3), 3);
  assert.equal(partRetcode({ "test.ping": 0, "cmd.run": 2 }), 2);
  assert.equal(partRetcode({}), 0);
  assert.equal(partRetcode(undefined), 0);
});

const texts = (es: BatchEffect[]) => es.map((e) => (e.type === "print" ? e.text : e.type === "show" ? `show ${e.id} rc=${e.retcode}` : `failhard ${e.id}`));

test("sub-jobs: at most N minions active; a freed slot takes the next minion; the run ends when all returned", () => {
  const p = new BatchPlan(["a", "b", "c"], 2, 0, false);
  const j1 = p.next(0)!;
  assert.deepEqual(j1.minions, ["a", "b"]);
  assert.deepEqual(texts(j1.effects), ["\nExecuting run on ['a', 'b']\n"]);
  assert.equal(p.next(0), undefined, "no free slot");
  assert.deepEqual(texts(p.settle([[j1.key, "b", { ret: true, retcode: 0, jid: "J1" }]], [], 0)), ["show b rc=0"]);
  const j2 = p.next(0)!;
  assert.deepEqual(j2.minions, ["c"]);
  p.settle([[j1.key, "a", { ret: true, retcode: 0 }]], [j1.key], 0);
  assert.equal(p.finished, false);
  p.settle([[j2.key, "c", { ret: true, retcode: 0 }]], [j2.key], 0);
  assert.equal(p.finished, true);
  assert.equal(p.retcode, 0);
  assert.deepEqual(p.returns(), { a: true, b: true, c: true });
});

test("a shown return is {retcode, jid, minion: ret} with the return's outputter", () => {
  const p = new BatchPlan(["a"], 1, 0, false);
  const j = p.next(0)!;
  const [e] = p.settle([[j.key, "a", { ret: { x: 1 }, out: "highstate", retcode: 0, jid: "J" }]], [], 0);
  assert.deepEqual(e, { type: "show", id: "a", data: { retcode: 0, jid: "J", a: { x: 1 } }, out: "highstate", retcode: 0 });
});

test("when the minions left fit in the batch and none is active, they all go at once", () => {
  const p = new BatchPlan(["a", "b", "c"], 3, 0, false);
  assert.deepEqual(p.next(0)!.minions, ["a", "b", "c"]);
});

test("--batch-wait keeps a finished minion's slot busy for the wait", () => {
  const p = new BatchPlan(["a", "b"], 1, 1000, false);
  const j1 = p.next(0)!;
  p.settle([[j1.key, "a", { ret: true, retcode: 0 }]], [j1.key], 100);
  assert.equal(p.next(600), undefined, "slot still waiting");
  assert.deepEqual(p.next(1100)!.minions, ["b"]);
});

test("--failhard stops at the first return with a retcode above 0; the exit code is the highest retcode", () => {
  const p = new BatchPlan(["a", "b", "c"], 1, 0, true);
  const j1 = p.next(0)!;
  assert.deepEqual(texts(p.settle([[j1.key, "a", { ret: "x", retcode: 3 }]], [], 0)), ["show a rc=3", "failhard a"]);
  assert.equal(p.finished, true);
  assert.equal(p.next(0), undefined);
  assert.equal(p.retcode, 3);
  const q = new BatchPlan(["a", "b"], 2, 0, false);
  const k = q.next(0)!;
  q.settle([[k.key, "a", { ret: "x", retcode: 2 }], [k.key, "b", { ret: "y", retcode: { f: 5, g: 0 } }]], [k.key], 0);
  assert.equal(q.retcode, 5);
});

test("a sub-job that ends without a minion's return shows that minion with an empty return, retcode 0", () => {
  const p = new BatchPlan(["a", "b"], 2, 0, false);
  const j = p.next(0)!;
  const es = p.settle([[j.key, "a", { ret: true, retcode: 0 }]], [j.key], 0);
  assert.deepEqual(es[1], { type: "show", id: "b", data: { b: {} }, out: undefined, retcode: 0 });
  assert.equal(p.finished, true);
});

test("minions that did not answer the ping are named; --static (quiet) prints nothing but returns", () => {
  assert.deepEqual(texts(BatchPlan.downText(["z"])), ["Minion z did not respond. No job will be sent."]);
  const p = new BatchPlan(["a"], 1, 0, false, true);
  assert.deepEqual(p.next(0)!.effects, []);
});

test("the driver publishes each sub-job as slots free and shows returns as they arrive (clock and publisher injected)", async () => {
  let t = 0;
  const published: string[][] = [];
  const shown: string[] = [];
  const plan = new BatchPlan(["m1", "m2", "m3"], 2, 0, false);
  await runBatch(plan, {
    now: () => t,
    // a fake clock that still yields to the event loop, as a real sleep does
    sleep: (ms) =>
      new Promise<void>((r) =>
        setImmediate(() => {
          t += ms;
          r();
        }),
      ),
    publish: (minions) => {
      published.push(minions);
      return (async function* (): AsyncGenerator<SubJobReturn> {
        for (const id of minions) {
          await new Promise((r) => setImmediate(r));
          if (id === "m3") yield { id, missing: true };
          else yield { id, part: { ret: true, retcode: 0, jid: `J${published.length}` } };
        }
      })();
    },
    effect: (e) => {
      if (e.type === "show") shown.push(e.id);
    },
  });
  assert.deepEqual(published, [["m1", "m2"], ["m3"]]);
  assert.deepEqual(shown, ["m1", "m2", "m3"]);
  assert.equal(plan.retcode, 0);
});
