/**
 * An auth storm (issue 17): N brine-swarm minions started all at once against a fresh master, retrying their
 * sign-ins as Salt's minions do (bench/README.md, "How a minion retries its sign-in"), then one test.ping to all.
 *
 * Figures: the time until every minion had signed in (Salt's minions never give up; these give up at 600 s and
 * are counted), sign-in payloads and timed-out tries per minion, the master's CPU (all its threads, /proc) from the
 * start to the last sign-in per signed-in minion (the swarm shares the box's cores: the load is printed with each
 * row), what the master's clear lane did with the sign-ins it got (metrics: handled, answered stale, connection
 * gone, queue full), and the test.ping's returns.
 *
 * - `BRINE_BENCH_STORM_SIZES=5000,9500` chooses the sizes (default 1,000; `--full` 1,000 and 5,000). At 2 fds per
 *   minion the box's 20,000-descriptor limit allows ~9,900 minions on one master process (bench/RESULTS.md).
 * - `BRINE_BENCH_STORM_MASTER_CPUS=0` runs the master on those CPUs only (taskset); `BRINE_BENCH_STORM_WORKER_NICE=5`
 *   with that `brine_worker_nice`.
 * - `BRINE_BENCH_STORM_EXTERNAL=RETPORT:PID` runs the storm against a master already running on 127.0.0.1 (the
 *   Python master of ../shared/real-salt, `auto_accept: True`), its CPU read from PID's process tree; no ping.
 */
import { readdirSync, readFileSync } from "node:fs";
import { poolKeySlots, poolMinionSettings, startBrineMaster, type BenchMaster } from "./swarm.js";
import { ping } from "./syndic.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { Fleet } from "../tools/swarm/fleet.js";
import { sampleTree } from "../tools/swarm/proc-stats.js";
import { DEFAULT_KEY_POOL_DIR, ensureKeyPool } from "../src/lib/minion/keys.js";
import { freePort } from "../tools/free-port.js";

/** How long the storm may take before the minions still out are counted as not signed in, ms. */
const stormMsMax = 600_000;

const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The master's threads from the kernel's scheduler (/proc/PID/task/TID/schedstat: ns on a CPU, ns runnable but
 * waiting for one): its main thread (tid = pid) and all of them. A main thread that waits for a CPU while the
 * request workers run accepts, handshakes and reads late: what "starved" means here.
 */
function sched(pid: number): { mainCpu: number; mainWait: number; allCpu: number; allWait: number } | undefined {
  const read = (tid: string) => readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ").map(Number);
  try {
    const [mainCpu, mainWait] = read(String(pid));
    let allCpu = 0;
    let allWait = 0;
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const [c, w] = read(tid);
        allCpu += c!;
        allWait += w!;
      } catch {
        // a thread that ended meanwhile
      }
    }
    return { mainCpu: mainCpu!, mainWait: mainWait!, allCpu, allWait };
  } catch {
    return undefined;
  }
}

/** The master's metrics (`brine_metrics`), as name{labels} → value. */
async function scrape(port: number): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

async function stormOn(n: number, target: { retPort: number; pid: number; label: string; m?: BenchMaster; metricsPort?: number }): Promise<BenchRow[]> {
  await ensureKeyPool(poolKeySlots, { dir: DEFAULT_KEY_POOL_DIR });
  const settings = poolMinionSettings(target.retPort, "storm-", n, stormMsMax);
  const procs = Math.max(2, Math.ceil(n / 1500));
  const fleet = new Fleet({ settings, minions: n, procs });
  await fleet.init();
  const load0 = loadavg();
  const cpu0 = sampleTree(target.pid)!.cpuS;
  const sched0 = sched(target.pid);
  const t0 = Date.now();
  fleet.startAll();
  const c = fleet.collector;
  // the master's CPU read each second, kept at the moment the last minion signed in
  let cpuAtLast = cpu0;
  let schedAtLast = sched0;
  let signedIn = 0;
  const end = t0 + stormMsMax + 30_000;
  while (c.settledCount() < n && Date.now() < end) {
    await sleep(1000);
    const now = c.authAt.filter((x) => Number.isFinite(x)).length;
    if (now > signedIn) {
      signedIn = now;
      cpuAtLast = sampleTree(target.pid)?.cpuS ?? cpuAtLast;
      schedAtLast = sched(target.pid) ?? schedAtLast;
    }
  }
  const load1 = loadavg();
  const accepted = c.authAt.filter((x) => Number.isFinite(x));
  const lastS = accepted.length ? (Math.max(...accepted) - t0) / 1000 : NaN;
  const payloads = [...c.authResults.values()].reduce((a, b) => a + b, 0);
  const timedOutTries = c.timeouts.get("_auth") ?? 0;
  const cpuS = cpuAtLast - cpu0;
  const nice = process.env.BRINE_BENCH_STORM_WORKER_NICE;
  const note = `${target.label}, ${n} minions started at once in ${procs} swarm procs (Salt's retry: auth_timeout 5 s × 7, acceptance_wait_time 10 s)${nice ? `, brine_worker_nice ${nice}` : ""}, load ${load0} -> ${load1}`;
  const rows: BenchRow[] = [
    { figure: `storm ${n} (${target.label}): signed in`, value: accepted.length, unit: "minions", target: n, better: "higher", note: `${note}; start failures ${JSON.stringify(Object.fromEntries(c.startFailures))}` },
    { figure: `storm ${n} (${target.label}): all signed in within`, value: Math.round(lastS * 10) / 10, unit: "s", better: "lower", note: accepted.length < n ? `only ${accepted.length} of ${n}: the time of the last one` : "from the start of all to the last accepted sign-in" },
    { figure: `storm ${n} (${target.label}): sign-in payloads per minion`, value: Math.round((payloads / n) * 100) / 100, unit: "payloads", better: "lower", note: `results ${JSON.stringify(Object.fromEntries(c.authResults))}` },
    { figure: `storm ${n} (${target.label}): timed-out sign-in tries per minion`, value: Math.round((timedOutTries / n) * 100) / 100, unit: "tries", better: "lower", note: "each followed by the same payload again (a new connection for 3007.x) while tries remain" },
    { figure: `storm ${n} (${target.label}): master CPU per signed-in minion`, value: accepted.length ? Math.round((cpuS / accepted.length) * 1e6) : NaN, unit: "us", better: "lower", note: `${cpuS.toFixed(1)} s of master CPU (all threads) from the start to the last sign-in` },
  ];
  // brine's threads only: another master's work is in other processes (the Python master's MWorkers)
  if (target.m && sched0 && schedAtLast) {
    const s = (ns: number) => (ns / 1e9).toFixed(1);
    rows.push({ figure: `storm ${n} (${target.label}): master main thread waiting for a CPU, share of the storm`, value: Math.round(((schedAtLast.mainWait - sched0.mainWait) / 1e9 / lastS) * 1000) / 10, unit: "%", better: "lower", note: `main thread ${s(schedAtLast.mainCpu - sched0.mainCpu)} s on a CPU, ${s(schedAtLast.mainWait - sched0.mainWait)} s runnable and waiting; all threads ${s(schedAtLast.allCpu - sched0.allCpu)} s on a CPU, ${s(schedAtLast.allWait - sched0.allWait)} s waiting (/proc schedstat, start to last sign-in)` });
  }
  try {
    if (target.metricsPort !== undefined) {
      const m = await scrape(target.metricsPort);
      const get = (k: string) => m.get(k) ?? 0;
      rows.push({ figure: `storm ${n} (${target.label}): sign-ins worked on per minion`, value: Math.round((get('salt_master_requests_handled_total{cmd="_auth"}') / n) * 100) / 100, unit: "sign-ins", better: "lower", note: `clear lane answered without work: stale ${get('brine_request_lane_refused_total{lane="clear",reason="stale"}')}, connection gone ${get('brine_request_lane_refused_total{lane="clear",reason="gone"}')}, queue full ${get('brine_request_lane_refused_total{lane="clear",reason="queue_full"}')}; resent copies answered with their first reply ${get("brine_sign_ins_resent_total")}` });
    }
    if (target.m && accepted.length === n) {
      await sleep(5000);
      const r = await ping(target.m, n, (id) => id.startsWith("storm-"));
      rows.push({ figure: `storm ${n} (${target.label}): test.ping to all, returns`, value: r.returns, unit: "returns", target: n, better: "higher", note: `the last at ${r.lastReturnMs} ms, load ${loadavg()}` });
    }
  } finally {
    await fleet.shutdown();
  }
  return rows;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const sizes = process.env.BRINE_BENCH_STORM_SIZES ? process.env.BRINE_BENCH_STORM_SIZES.split(",").map(Number) : opts.full ? [1000, 5000] : [1000];
  const external = process.env.BRINE_BENCH_STORM_EXTERNAL;
  const out: BenchRow[] = [];
  for (const n of sizes) {
    if (external) {
      const [port, pid] = external.split(":").map(Number);
      out.push(...(await stormOn(n, { retPort: port!, pid: pid!, label: "external master" })));
      continue;
    }
    const metricsPort = await freePort();
    const cpus = process.env.BRINE_BENCH_STORM_MASTER_CPUS;
    const nice = Number(process.env.BRINE_BENCH_STORM_WORKER_NICE ?? 0);
    const m = await startBrineMaster({ id: "bench-auth-storm", brine_metrics: { port: metricsPort }, ...(nice ? { brine_worker_nice: nice } : {}) }, cpus ? { cpus } : {});
    try {
      out.push(...(await stormOn(n, { retPort: m.retPort, pid: m.pid, label: "brine", m, metricsPort })));
    } finally {
      await m.stop();
    }
  }
  return out;
}
