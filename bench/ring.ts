/**
 * Ring figures (reference-points.md §C): load balance over 200k minion ids for 3, 5 and 10 nodes against
 * 2x the binomial noise floor, keys moved when a node joins or leaves against the ideal + 1 pp, lookup cost
 * through the shared buffer, and its size. `npm run bench` prints these rows; `node dist/bench/ring.js`
 * prints them alone.
 */
import { pathToFileURL } from "node:url";
import { assignSlots, type RingAssignment } from "../src/shared/sab-ring/assign.js";
import { computeLayout, createRingBuffer, resolveRingLimits, ringSlots } from "../src/shared/sab-ring/layout.js";
import { RingReader } from "../src/shared/sab-ring/reader.js";
import { RingWriter } from "../src/shared/sab-ring/writer.js";
import { masterIds, minionKeys } from "../test/ring/minion-keys.js";
import { cv, keyCounts, keySlots, movedFraction, noiseFloor } from "../test/ring/ring-metrics.js";
import type { BenchOptions, BenchRow } from "./types.js";

const KEYS = 200_000;
const pct = (x: number): number => Math.round(x * 10_000) / 100;

function balanceRows(slots: Uint16Array): BenchRow[] {
  return [3, 5, 10].map((n) => {
    const floor = noiseFloor(n, KEYS);
    return {
      figure: `ring load CV, ${n} nodes, ${KEYS / 1000}k minion ids`,
      value: pct(cv(keyCounts(assignSlots(masterIds(n)), slots))),
      unit: "%",
      target: pct(2 * floor),
      better: "lower",
      note: `binomial noise floor ${pct(floor)}%`,
    };
  });
}

function movementRows(slots: Uint16Array): BenchRow[] {
  const rows: BenchRow[] = [];
  for (const n of [3, 5, 10]) {
    const before = assignSlots(masterIds(n));
    const added = assignSlots([...masterIds(n), "master-new"], before);
    rows.push({
      figure: `ring keys moved, ${n} -> ${n + 1} nodes`,
      value: pct(movedFraction(before, added, slots)),
      unit: "%",
      target: pct(1 / (n + 1) + 0.01),
      better: "lower",
      note: `ideal ${pct(1 / (n + 1))}%`,
    });
  }
  const before = assignSlots(masterIds(10));
  const removed = assignSlots(masterIds(10).filter((id) => id !== "master-04"), before);
  rows.push({
    figure: "ring keys moved, 10 -> 9 nodes",
    value: pct(movedFraction(before, removed, slots)),
    unit: "%",
    target: pct(1 / 10 + 0.01),
    better: "lower",
    note: "ideal 10%; only the departed node's keys move",
  });
  return rows;
}

/** Median of `runs` timings of `fn` over `ops` operations, in ns per operation. */
function nsPerOp(ops: number, runs: number, fn: () => void): number {
  const samples: number[] = [];
  for (let r = 0; r < runs; r++) {
    const t0 = process.hrtime.bigint();
    fn();
    samples.push(Number(process.hrtime.bigint() - t0) / ops);
  }
  samples.sort((a, b) => a - b);
  return Math.round(samples[Math.floor(samples.length / 2)]! * 10) / 10;
}

function lookupRows(keys: readonly string[], opts: BenchOptions): BenchRow[] {
  const w = RingWriter.attach(createRingBuffer());
  const table: RingAssignment = assignSlots(masterIds(10));
  w.publishRing("cluster", table, 1);
  w.publishRing("jobs", table, 1);
  w.publishRoutes({ jobs: "jobs" });
  const r = new RingReader(w.buffer);
  const ops = opts.full ? 2_000_000 : 500_000;
  const runs = opts.full ? 7 : 3;
  const hot = keys.slice(0, 10_000);
  let sink = 0;
  const owner = nsPerOp(ops, runs, () => {
    for (let i = 0; i < ops; i++) if (r.owner(hot[i % hot.length]!) === "master-01") sink++;
  });
  const gate = nsPerOp(ops, runs, () => {
    for (let i = 0; i < ops; i++) if (r.ownsFor("jobs", hot[i % hot.length]!, "master-01")) sink++;
  });
  const t0 = process.hrtime.bigint();
  const reps = 20;
  for (let i = 0; i < reps; i++) assignSlots([...masterIds(10), `master-x${i}`], table);
  const assignMs = Number(process.hrtime.bigint() - t0) / 1e6 / reps;
  if (sink < 0) throw new Error("unreachable");
  return [
    { figure: "ring owner() from the shared buffer, 10 nodes", value: owner, unit: "ns/op", better: "lower", note: "murmur3 + one slot load, 1 thread" },
    { figure: "ring ownsFor() gate, routed data type", value: gate, unit: "ns/op", better: "lower", note: "route lookup + owner + drop counter" },
    { figure: "ring reassignment on a membership change, 10 -> 11", value: Math.round(assignMs * 10) / 10, unit: "ms", better: "lower", note: "in the Raft worker, once per CONFIG" },
  ];
}

function sizeRows(): BenchRow[] {
  const layout = computeLayout(resolveRingLimits());
  const l = layout.limits;
  return [
    { figure: "ring slot table per ring", value: ringSlots, unit: "bytes", better: "lower", note: `${ringSlots} slots x 1 byte, two copies (latch)` },
    {
      figure: "ring shared buffer, default limits",
      value: layout.totalBytes,
      unit: "bytes",
      better: "lower",
      note: `${l.ringsMax} rings x ${l.ringNodesMax} nodes, ${l.dataTypesMax} data types`,
    },
  ];
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const keys = minionKeys(KEYS);
  const slots = keySlots(keys);
  return [...balanceRows(slots), ...movementRows(slots), ...lookupRows(keys, opts), ...sizeRows()];
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const rows = await run({ full: process.argv.includes("--full") });
  for (const r of rows) {
    const target = r.target === undefined ? "" : `  (target ${r.better === "higher" ? ">=" : "<="} ${r.target} ${r.unit})`;
    console.log(`${r.figure.padEnd(56)} ${String(r.value).padStart(9)} ${r.unit}${target}${r.note ? `  ${r.note}` : ""}`);
  }
}
