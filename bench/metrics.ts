/**
 * What the metrics cost (issue #17, "Metrics and health"): the request worker's per-request counting, timed on
 * the real board code as a `_return` does it (its command slot, its duration in the histogram, its return event
 * and its completed job: four counts, two clock reads), with the young-generation GCs the loop caused (none
 * means it allocates nothing); and the main thread's cost of one scrape (rendering every family of a board
 * where every command and 64 function names were counted), which it pays once per scrape, never per request.
 */
import { PerformanceObserver, performance } from "node:perf_hooks";
import { masterDefaults } from "../src/shared/config/defaults.js";
import { MetricsBoard } from "../src/shared/metrics/board.js";
import { MetricsHost } from "../src/main-thread/metrics-exporter.js";
import { CMD_LABELS, cmdSlotOf } from "../src/shared/metrics/labels.js";
import type { BenchOptions, BenchRow } from "./types.js";

/** the brief's bound: "a few Atomics.add", well under a microsecond next to a return's ~20-60 µs of thread CPU */
const TARGET_NS = 500;

/** Counts GCs while `f` runs (entries arrive asynchronously: waits a turn before counting). */
async function gcsDuring(f: () => void): Promise<number> {
  let n = 0;
  const obs = new PerformanceObserver((list) => (n += list.getEntries().length));
  obs.observe({ entryTypes: ["gc"] });
  f();
  await new Promise((r) => setTimeout(r, 50));
  obs.disconnect();
  return n;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const n = opts.full ? 20_000_000 : 3_000_000;
  const board = new MetricsBoard();
  board.jobPublished("test.ping");
  const cmds = ["_return", "_pillar", "_auth", "_minion_event"];
  const tag = "salt/job/20250101010101010101/ret/minion-1";
  // what a `_return` counts: its command slot and duration (request.ts, worker.ts), its event (context.ts fire),
  // its completed job (aes-funcs.ts); durations are made-up integers here, the clock is timed on its own below
  const counting = (count: number) => {
    for (let i = 0; i < count; i++) {
      const cmd = cmdSlotOf(cmds[i & 3]);
      board.eventFired(tag);
      board.jobCompleted("test.ping", true);
      board.request(cmd, (i & 4095) * 10);
    }
  };
  const marks = new Float64Array(4);
  const clock = (count: number) => {
    for (let i = 0; i < count; i++) marks[i & 3] = performance.now();
  };
  counting(200_000); // warm up (optimized code)
  clock(200_000);
  let t0 = process.hrtime.bigint();
  const gcs = await gcsDuring(() => counting(n));
  const nsCounting = Number(process.hrtime.bigint() - t0) / n;
  t0 = process.hrtime.bigint();
  const clockGcs = await gcsDuring(() => clock(n));
  const nsClock = Number(process.hrtime.bigint() - t0) / n;

  // one scrape of a full board: every command and 64 function names counted
  const host = new MetricsHost({ ...masterDefaults(), brine_metrics: { port: 0 } });
  await host.start({ laneDepth: () => [3, 5], sendQueues: () => [{ length: 1, dropped: 0 }, { length: 2, dropped: 1 }], connected: async () => 1000 });
  for (const c of CMD_LABELS) host.board.request(cmdSlotOf(c), 1234);
  for (let i = 0; i < 70; i++) host.board.jobPublished(`mod.fun${i}`);
  let bytes = 0;
  for (let i = 0; i < 20; i++) bytes = (await host.render()).length;
  const scrapes = opts.full ? 500 : 100;
  const s0 = process.hrtime.bigint();
  for (let i = 0; i < scrapes; i++) await host.render();
  const msPerScrape = Number(process.hrtime.bigint() - s0) / scrapes / 1e6;
  await host.stop();
  return [
    {
      figure: "metrics: counting per request in a worker (4 Atomics counts)",
      value: nsCounting,
      unit: "ns",
      target: TARGET_NS,
      better: "lower",
      note: `${gcs} GCs over ${n.toLocaleString("en-US")} requests (0: allocates nothing)`,
    },
    {
      figure: "metrics: the clock read per request (performance.now)",
      value: nsClock,
      unit: "ns",
      note: `${clockGcs} GCs over ${n.toLocaleString("en-US")} reads: Node 20 returns each as a heap number (16 B); a request that waits reads it twice`,
    },
    { figure: "metrics: one scrape rendered on the main thread", value: msPerScrape, unit: "ms", note: `${(bytes / 1024).toFixed(0)} KiB of text, prom-client's process figures included` },
  ];
}
