/**
 * Every thread that started through the worker kit answers heap probes under its name, so `brine.memory`
 * (run in a runner thread) reads each thread's V8 heap; a thread that does not answer is simply absent.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Worker } from "node:worker_threads";
import { probeHeaps } from "../../src/shared/heap-probe.js";

const probeModule = new URL("../../src/shared/heap-probe.js", import.meta.url).href;

function startThread(name: string, holdBytes: number): Promise<Worker> {
  const code = `
    import { parentPort } from "node:worker_threads";
    const { answerHeapProbes } = await import(${JSON.stringify(probeModule)});
    globalThis.held = Array.from({ length: ${holdBytes / 64} }, (_, i) => "x".repeat(40) + i);
    answerHeapProbes(${JSON.stringify(name)});
    parentPort.postMessage("ready");
    setInterval(() => {}, 1000);`;
  const w = new Worker(new URL(`data:text/javascript,${encodeURIComponent(code)}`));
  return new Promise((resolve, reject) => {
    w.once("message", () => resolve(w));
    w.once("error", reject);
  });
}

test("each answering thread reports its V8 heap under its name, the asking thread its own first", async () => {
  const small = await startThread("small", 64 * 1024);
  const big = await startThread("big", 16 * 1024 * 1024);
  try {
    const heaps = await probeHeaps("asker", 1000);
    assert.equal(heaps[0]!.thread, "asker");
    const byName = new Map(heaps.map((h) => [h.thread, h]));
    assert.ok(byName.has("small") && byName.has("big"), JSON.stringify(heaps.map((h) => h.thread)));
    assert.equal(heaps.filter((h) => h.thread === "asker").length, 1, "the asker is listed once");
    assert.ok(byName.get("big")!.usedBytes > byName.get("small")!.usedBytes + 8 * 1024 * 1024, "the thread holding 16 MiB shows it");
    for (const h of heaps) assert.ok(h.totalBytes >= h.usedBytes && h.usedBytes > 0, JSON.stringify(h));
    // the young generation (a share of the committed heap that grows under bursts and stays) is reported apart
    for (const h of heaps) assert.ok(h.youngBytes > 0 && h.youngBytes <= h.totalBytes, JSON.stringify(h));
  } finally {
    await small.terminate();
    await big.terminate();
  }
});

test("a thread that stopped answering is absent, not waited for past the window", async () => {
  const w = await startThread("gone", 64 * 1024);
  await w.terminate();
  const t0 = performance.now();
  const heaps = await probeHeaps("asker", 300);
  // a hang guard (a probe that waited for the gone thread would never answer), wide enough for a loaded box
  assert.ok(performance.now() - t0 < 10_000);
  assert.ok(!heaps.some((h) => h.thread === "gone"));
});
