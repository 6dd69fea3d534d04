/**
 * `npm run bench`: every benchmark module under bench/, one table: figure, value, target, ratio.
 * `--full` runs the full-size variants (e.g. the 5,000-minion swarm). `--only NAME` runs one module.
 */
import os from "node:os";
import { existsSync } from "node:fs";
import type { BenchModule, BenchRow } from "./types.js";

const MODULES = ["request-paths", "return-flood", "mixed-load", "replay-nonces", "replay-owner-cluster", "key-index", "state-sync", "minion-patterns", "job-cache-scale", "ring", "raft-sim", "raft-worker", "fileserver", "peer-channel", "swarm", "syndic", "fleet-memory", "auth-storm", "storm-model", "commit-floor", "cluster", "placement", "placement-grains", "cluster-publish", "api", "metrics", "cpu-per-op", "memory-vs-python", "signin-floor", "publish-fanout", "fanout-vs-python", "jobs-vs-python"];

function fmt(v: number): string {
  if (!Number.isFinite(v)) return String(v);
  if (Math.abs(v) >= 1000) return Math.round(v).toLocaleString("en-US");
  return v.toFixed(v >= 10 ? 1 : 3);
}

async function main(): Promise<void> {
  const full = process.argv.includes("--full");
  const oi = process.argv.indexOf("--only");
  const only = oi > 0 ? process.argv[oi + 1] : undefined;
  const cpus = os.cpus();
  console.log(`brine benchmarks — ${cpus.length} x ${cpus[0]?.model ?? "cpu"}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}, load ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}${full ? ", full size" : ""}`);
  const rows: (BenchRow & { module: string })[] = [];
  for (const name of MODULES) {
    if (only && name !== only) continue;
    const file = new URL(`./${name}.js`, import.meta.url);
    if (!existsSync(file)) continue;
    try {
      const mod = (await import(file.href)) as BenchModule;
      for (const r of await mod.run({ full })) rows.push({ ...r, module: name });
    } catch (e) {
      console.log(`${name}: failed: ${(e as Error).message}`);
    }
  }
  const header = ["module", "figure", "value", "unit", "target", "ratio", "note"];
  const table = rows.map((r) => {
    const ratio = r.target ? (r.better === "lower" ? r.target / r.value : r.value / r.target) : undefined;
    return [r.module, r.figure, fmt(r.value), r.unit, r.target !== undefined ? fmt(r.target) : "", ratio !== undefined ? ratio.toFixed(2) + (ratio >= 1 ? " ok" : " LOW") : "", r.note ?? ""];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((t) => t[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd();
  console.log(line(header));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const t of table) console.log(line(t));
  process.exit(0);
}

void main();
