/**
 * The job cache's runners against the Python master's, in one run (issue 17: every figure also as a ratio against the
 * Python master where it can do the same work). Both hold the same jobs: `BRINE_BENCH_JOBSPY_JOBS` (10,000, the
 * issue's `jobs.list_jobs` size) of one test.ping return each, the last one with 100 returns; then three figures,
 * each the median of its calls after one warm-up call, wall and CPU:
 *
 * - a runner call that reads nothing (`jobs.lookup_jid` of an unknown jid), 9 calls;
 * - `jobs.list_jobs`, 3 calls;
 * - `jobs.lookup_jid` of the job with 100 returns, 9 calls.
 *
 * brine: an in-process master (job-cache-scale's `masterOn`), its job cache filled as the request workers fill it,
 * each call timed as `salt-run` sees it (control socket → runner thread → reply decoded: job-cache-scale's `timed`),
 * CPU of every thread of the process. Python: Salt 3007's own `local_cache` returner filled through its own functions
 * and its own `jobs` runner functions called in one Python process (bench/python/jobs_timing.py), as `salt-run` runs
 * them after its start, with Salt's master running (the harness's, as cpu-per-op starts it: the runners fire their
 * events to it, as `salt-run`'s do); CPU is that process's and any children's it waited for. Neither side counts a
 * CLI's start: Python's `salt-run` spends ~3 s loading Salt before it calls the runner (bench/RESULTS.md, the job
 * cache section's Python table), brine's CLI a fraction of that. Python's side has no IPC at all, brine's has its
 * control socket and thread hand-off: the comparison leans toward Python.
 * Skipped for Python, with the reason, without SALT_GIT_DIR or the harness (../shared/real-salt/README.md).
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { HARNESS, pythonAvailable, startPythonMaster } from "./cpu-per-op.js";
import { masterOn, timed } from "./job-cache-scale.js";
import { pingReturn } from "./job-cache-prune.js";
import { openStore } from "../src/lib/store/lmdb-env.js";
import { JobCache } from "../src/lib/store/job-cache.js";
import { formatJid, jidToTime } from "../src/shared/protocol/jid.js";
import { configureLogging } from "../src/shared/log.js";
import type { BenchOptions, BenchRow } from "./types.js";

const BIG_RETURNS = 100;
const SCRIPT = fileURLToPath(new URL("../../bench/python/jobs_timing.py", import.meta.url));
/** the Python side's fill and calls, s (its fill creates ~4 files per job) */
const pythonTimeoutS = 1800;

interface Figure {
  wall: number;
  cpu: number;
  first: number;
}
type Figures = Record<"noop" | "list" | "lookup", Figure>;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

function jobsToRun(): number {
  const v = process.env.BRINE_BENCH_JOBSPY_JOBS;
  if (v === undefined) return 10_000;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 10 || n > 100_000) throw new Error(`BRINE_BENCH_JOBSPY_JOBS: a whole number of jobs from 10 to 100,000, not ${JSON.stringify(v)}`);
  return n;
}

async function brine(jobsN: number): Promise<Figures & { fillS: number }> {
  configureLogging({ level: "quiet" });
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-bench-jobspy-"));
  const { cfg, server } = await masterOn(root);
  const store = openStore(cfg);
  const jobs = new JobCache(store);
  const now = Date.now();
  const jidAt = (i: number) => formatJid(now - 3_600_000 + i * 100, i % 1000);
  try {
    const t0 = performance.now();
    for (let j = 0; j < jobsN; j += 100) {
      const writes: Promise<unknown>[] = [];
      for (let k = j; k < Math.min(jobsN, j + 100); k++) {
        const jid = jidAt(k);
        const minions = k === jobsN - 1 ? Array.from({ length: BIG_RETURNS }, (_, m) => `minion-${String(m).padStart(4, "0")}`) : ["m1"];
        writes.push(jobs.saveLoad(jid, { fun: "test.ping", arg: [], tgt: "*", tgt_type: "glob", user: "root", jid, ret: "" }, minions));
        for (const id of minions) writes.push(jobs.addReturn(jid, id, pingReturn));
        writes.push(jobs.setEndtime(jid, jidToTime(jid)));
      }
      await Promise.all(writes);
    }
    await jobs.flush();
    const fillS = (performance.now() - t0) / 1000;
    const noop = await timed(server, cfg.sock_dir, "jobs.lookup_jid", ["20000101000000000000"], () => undefined, 9);
    const list = await timed(server, cfg.sock_dir, "jobs.list_jobs", [], (r) => {
      if (Object.keys(r as object).length < jobsN) throw new Error("brine list_jobs: jobs missing");
    });
    const lookup = await timed(server, cfg.sock_dir, "jobs.lookup_jid", [jidAt(jobsN - 1)], (r) => {
      if (Object.keys(r as object).length !== BIG_RETURNS) throw new Error("brine lookup_jid: returns missing");
    }, 9);
    return { noop, list, lookup, fillS };
  } finally {
    await store.close();
    await server.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

interface PyCall {
  wall: number;
  cpu: number;
}
interface PyOut {
  fill_s: number;
  noop: { first: PyCall; calls: PyCall[] };
  list_jobs: { first: PyCall; calls: PyCall[] };
  lookup_jid: { first: PyCall; calls: PyCall[] };
}

async function python(jobsN: number): Promise<Figures & { fillS: number }> {
  const m = await startPythonMaster(undefined);
  try {
    // the master's config (the harness writes DIR/master/conf/master beside DIR/master/cache, where the root key is)
    const conf = path.join(path.dirname(path.dirname(m.rootKeyFile)), "conf", "master");
    // Salt's source for 3007.x and the harness's python, as the harness starts the master
    const sh = `. "${HARNESS}/env.sh"; SRC=$(rs_src_for_ref 3007.x); exec env "$(rs_pyenv "$SRC")" "$SALT_PY" "$@"`;
    const r = spawnSync("bash", ["-c", sh, "jobs-vs-python", SCRIPT, conf, String(jobsN), String(BIG_RETURNS), "9"], { encoding: "utf8", timeout: pythonTimeoutS * 1000, maxBuffer: 1 << 20 });
    if (r.status !== 0) throw new Error(`the Python side failed: ${(r.stderr || r.stdout || String(r.error)).trim().slice(-400)}`);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!) as PyOut;
    const fig = (f: { first: PyCall; calls: PyCall[] }, n: number): Figure => {
      const calls = f.calls.slice(0, n);
      return { wall: median(calls.map((c) => c.wall)), cpu: median(calls.map((c) => c.cpu)), first: f.first.wall };
    };
    // list_jobs: as many calls as brine's (3)
    return { noop: fig(out.noop, 9), list: fig(out.list_jobs, 3), lookup: fig(out.lookup_jid, 9), fillS: out.fill_s };
  } finally {
    await m.stop();
  }
}

export async function run(_opts: BenchOptions): Promise<BenchRow[]> {
  const jobsN = jobsToRun();
  const load = () => os.loadavg().map((l) => l.toFixed(1)).join(" ");
  const load0 = load();
  const b = await brine(jobsN);
  const what = { noop: "a runner call that reads nothing (jobs.lookup_jid of an unknown jid, median of 9)", list: `jobs.list_jobs, ${jobsN.toLocaleString("en-US")} jobs (median of 3)`, lookup: `jobs.lookup_jid, a job of ${BIG_RETURNS} returns (median of 9)` } as const;
  const rows: BenchRow[] = [];
  for (const k of ["noop", "list", "lookup"] as const) rows.push({ figure: `jobs vs Python: brine, ${what[k]}`, value: b[k].wall, unit: "ms", better: "lower", note: `CPU ${b[k].cpu.toFixed(2)} ms (master and client); first call ${b[k].first.toFixed(1)} ms; filled in ${b.fillS.toFixed(1)} s; load ${load0} -> ${load()}` });
  const why = pythonAvailable();
  if (why) {
    rows.push({ figure: "jobs vs Python: Python master", value: NaN, unit: "", note: `skipped: ${why}` });
    return rows;
  }
  const load1 = load();
  const p = await python(jobsN);
  for (const k of ["noop", "list", "lookup"] as const) {
    rows.push({ figure: `jobs vs Python: Python 3007, ${what[k]}`, value: p[k].wall, unit: "ms", note: `CPU ${p[k].cpu.toFixed(1)} ms (its process and any children it waited for); first call ${p[k].first.toFixed(1)} ms; filled in ${p.fillS.toFixed(1)} s; load ${load1} -> ${load()}` });
    rows.push({ figure: `jobs vs Python: brine / Python, ${what[k].replace(/ \(median of \d\)/, "")}`, value: b[k].wall / p[k].wall, unit: "×", better: "lower", note: `wall ${b[k].wall.toFixed(2)} / ${p[k].wall.toFixed(1)} ms; CPU ${b[k].cpu.toFixed(2)} / ${p[k].cpu.toFixed(1)} ms (${(b[k].cpu / p[k].cpu).toFixed(3)})` });
  }
  return rows;
}
