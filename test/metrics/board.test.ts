/**
 * The metrics board (src/shared/metrics/board.ts): labels stay bounded whatever names arrive, request durations land
 * in the right fixed buckets, a counter carries past 32 bits, and two worker threads counting into one board
 * at once lose nothing and never give one function name two slots.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { MetricsBoard, createMetricsBoard } from "../../src/shared/metrics/board.js";
import { CMD_LABELS, FUN_SLOTS_DYNAMIC, REQUEST_BUCKETS_US, cmdSlotOf, tagSlotOf, TAG_PREFIXES } from "../../src/shared/metrics/labels.js";

describe("metrics board", () => {
  test("cmd labels: the allow-list by name, anything else other, a non-string none", () => {
    assert.equal(CMD_LABELS[cmdSlotOf("_return")], "_return");
    assert.equal(CMD_LABELS[cmdSlotOf("_auth")], "_auth");
    assert.equal(CMD_LABELS[cmdSlotOf("__proto__")], "other");
    assert.equal(CMD_LABELS[cmdSlotOf("x".repeat(10_000))], "other");
    assert.equal(CMD_LABELS[cmdSlotOf(undefined)], "none");
    assert.equal(CMD_LABELS[cmdSlotOf(42)], "none");
  });

  test("tag prefixes: Salt's tag words and the bare jid by name, a minion's own tag other", () => {
    const at = (t: string) => TAG_PREFIXES[tagSlotOf(t)];
    assert.equal(at("salt/job/20250101010101010101/ret/m1"), "salt/job");
    assert.equal(at("salt/auth"), "salt/auth");
    assert.equal(at("salt/jobs"), "other");
    assert.equal(at("20250101010101010101"), "jid");
    assert.equal(at("2025010101010101010x"), "other");
    assert.equal(at("minion_start"), "minion_start");
    assert.equal(at("minion/refresh/m1"), "minion/refresh");
    assert.equal(at("my/own/tag"), "other");
  });

  test("fun labels: publishes fill the table in order, then other; returns count only names a publish put there", () => {
    const b = new MetricsBoard();
    for (let i = 0; i < FUN_SLOTS_DYNAMIC + 10; i++) b.jobPublished(`mod.fun${i}`);
    b.jobPublished(["test.ping", "test.echo"]);
    b.jobPublished("bad name; with spaces");
    b.jobCompleted("mod.fun0", true);
    b.jobCompleted("mod.fun0", false);
    b.jobCompleted("never.published", true);
    b.jobCompleted(`mod.fun${FUN_SLOTS_DYNAMIC + 1}`, true); // published after the table was full
    b.jobCompleted(["test.ping", "test.echo"], true);
    const s = b.read();
    const pub = new Map(s.published.map((p) => [p.fun, p.n]));
    assert.equal(pub.size, FUN_SLOTS_DYNAMIC + 2, "the table's names, compound and other");
    assert.equal(pub.get("mod.fun0"), 1);
    assert.equal(pub.get(`mod.fun${FUN_SLOTS_DYNAMIC - 1}`), 1);
    assert.equal(pub.get(`mod.fun${FUN_SLOTS_DYNAMIC}`), undefined);
    assert.equal(pub.get("other"), 10 + 1);
    assert.equal(pub.get("compound"), 1);
    const done = (fun: string, success: boolean) => s.completed.find((c) => c.fun === fun && c.success === success)?.n;
    assert.equal(done("mod.fun0", true), 1);
    assert.equal(done("mod.fun0", false), 1);
    assert.equal(done("other", true), 2);
    assert.equal(done("compound", true), 1);
    assert.equal(done("never.published", true), undefined);
  });

  test("request durations fall in the first bucket whose bound they do not exceed; the sum is kept in µs", () => {
    const b = new MetricsBoard();
    const cmd = cmdSlotOf("_return");
    b.request(cmd, REQUEST_BUCKETS_US[0]); // on the bound: that bucket
    b.request(cmd, REQUEST_BUCKETS_US[0] + 1); // just over: the next
    b.request(cmd, 0);
    b.request(cmd, 60_000_000); // a minute: +Inf
    const r = b.read().requests.find((x) => x.cmd === "_return")!;
    assert.equal(r.count, 4);
    assert.equal(r.buckets.length, REQUEST_BUCKETS_US.length + 1);
    assert.equal(r.buckets[0], 2);
    assert.equal(r.buckets[1], 1);
    assert.equal(r.buckets[REQUEST_BUCKETS_US.length], 1);
    assert.equal(r.sumUs, REQUEST_BUCKETS_US[0] * 2 + 1 + 60_000_000);
    assert.deepEqual(b.read().requests.map((x) => x.cmd), ["_return"], "commands never seen are not listed");
  });

  test("a counter carries into its high word past 2^32", () => {
    const b = new MetricsBoard();
    b.laneRefused(1, 0, 0xffffffff);
    b.laneRefused(1, 0, 2);
    assert.equal(b.read().laneRefused.find((r) => r.lane === "req" && r.reason === "queue_full")!.n, 2 ** 32 + 1);
  });

  test("a board is refused when it is not one (wrong size or header)", () => {
    assert.throws(() => new MetricsBoard(new SharedArrayBuffer(64)));
    assert.throws(() => new MetricsBoard(new SharedArrayBuffer(createMetricsBoard().byteLength)));
  });

  test("two worker threads counting at once: every count arrives, each name gets one slot", async () => {
    const sab = createMetricsBoard();
    const perThread = 50_000;
    const boardUrl = new URL("../../src/shared/metrics/board.js", import.meta.url).href;
    const code = `
      const { workerData, parentPort } = require("node:worker_threads");
      import(workerData.boardUrl).then(({ MetricsBoard }) => {
        const b = new MetricsBoard(workerData.sab);
        for (let i = 0; i < workerData.n; i++) {
          b.request(9, (i % 3000) * 1000); // the sum crosses 2^30 (a carry) about 70 times per thread
          b.jobPublished("fun." + (i % 40));
          b.jobCompleted("fun." + (i % 40), i % 2 === 0);
          b.eventFired("salt/job/1/new");
        }
        parentPort.postMessage("done");
      });`;
    const run = () =>
      new Promise<void>((resolve, reject) => {
        const w = new Worker(code, { eval: true, workerData: { sab, n: perThread, boardUrl } });
        w.once("message", () => void w.terminate().then(() => resolve()));
        w.once("error", reject);
      });
    await Promise.all([run(), run()]);
    const s = new MetricsBoard(sab).read();
    const req = s.requests.find((r) => r.cmd === CMD_LABELS[9])!;
    assert.equal(req.count, 2 * perThread);
    let sum = 0;
    for (let i = 0; i < perThread; i++) sum += (i % 3000) * 1000;
    assert.equal(req.sumUs, 2 * sum);
    assert.equal(s.published.length, 40, "each of the 40 names once");
    assert.equal(s.published.reduce((a, p) => a + p.n, 0), 2 * perThread);
    assert.equal(s.completed.reduce((a, c) => a + c.n, 0), 2 * perThread);
    assert.ok(s.completed.every((c) => c.fun !== "other"));
    assert.equal(s.events.find((e) => e.tagPrefix === "salt/job")!.n, 2 * perThread);
  });
});
