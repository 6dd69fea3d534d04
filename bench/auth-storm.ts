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
 * - `BRINE_BENCH_STORM_MASTER_CPUS=0` runs the master on those CPUs only (taskset); `BRINE_BENCH_STORM_SWARM_CPUS=1`
 *   the swarm's processes (taskset -a -p, before the start); `BRINE_BENCH_STORM_WORKER_NICE=5` with that
 *   `brine_worker_nice`.
 * - The storm's timeline, one line a second (sign-ins accepted, tries timed out, payloads failed whole, the
 *   master's and the swarm's CPU, the clear lane's work and refusals, replies dropped for a gone peer, handshakes
 *   timed out), is written to stderr and, with `BRINE_BENCH_STORM_TIMELINE=FILE`, to FILE as TSV.
 * - `BRINE_BENCH_STORM_BACKLOG=4096` gives the master that `zmq_backlog` (Salt's default 1000; the kernel caps it
 *   at net.core.somaxconn); `BRINE_BENCH_STORM_WORKER_THREADS=2` that `worker_threads` (Salt's default 5).
 * - `BRINE_BENCH_STORM_EXTERNAL=RETPORT:PID` runs the storm against a master already running on 127.0.0.1 (the
 *   Python master of ../shared/real-salt, `auto_accept: True`), its CPU read from PID's process tree; no ping.
 */
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { poolKeySlots, poolMinionSettings, startBrineMaster, type BenchMaster } from "./swarm.js";
import { ping } from "./syndic.js";
import type { BenchOptions, BenchRow } from "./types.js";
import { Fleet } from "../tools/swarm/fleet.js";
import { cpuSecondsOf, sampleTree } from "../tools/swarm/proc-stats.js";
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

/**
 * The master's threads from the kernel's scheduler, each: its name (/proc/PID/task/TID/comm; the main thread as
 * "main"), ns on a CPU and ns runnable but waiting for one (schedstat). A request thread with little time on a CPU
 * and little waiting had no work (the lane was empty: the main thread did not hand it any); one that waited much
 * was runnable and lost the CPU to other threads.
 */
function threadSched(pid: number): Map<string, { name: string; cpu: number; wait: number }> {
  const out = new Map<string, { name: string; cpu: number; wait: number }>();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const name = tid === String(pid) ? "main" : readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim();
        const [cpu, wait] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ").map(Number);
        out.set(tid, { name, cpu: cpu!, wait: wait! });
      } catch {
        // a thread that ended meanwhile
      }
    }
  } catch {
    // the master is gone
  }
  return out;
}

/** The threads' CPU and wait between two readings, the busiest first: "name/tid cpu s + wait s". */
function threadsBetween(a: ReturnType<typeof threadSched>, b: ReturnType<typeof threadSched>): string {
  const rows: { k: string; cpu: number; wait: number }[] = [];
  for (const [tid, t] of b) {
    const t0 = a.get(tid);
    rows.push({ k: `${t.name}/${tid}`, cpu: (t.cpu - (t0?.cpu ?? 0)) / 1e9, wait: (t.wait - (t0?.wait ?? 0)) / 1e9 });
  }
  return rows
    .filter((r) => r.cpu >= 0.1)
    .sort((x, y) => y.cpu - x.cpu)
    .map((r) => `${r.k} ${r.cpu.toFixed(1)} s on a CPU + ${r.wait.toFixed(1)} s waiting`)
    .join(", ");
}

/**
 * The kernel's count of connections a listener could not queue (its accept queue full: `zmq_backlog`, at most
 * net.core.somaxconn) and of those it dropped: /proc/net/netstat TcpExt ListenOverflows, ListenDrops (the whole
 * box's, in its network namespace: in a storm the master's ports are nearly all of them).
 */
function listenOverflows(): [number, number] {
  try {
    const lines = readFileSync("/proc/net/netstat", "utf8").split("\n").filter((l) => l.startsWith("TcpExt:"));
    const names = lines[0]!.split(" ");
    const values = lines[1]!.split(" ").map(Number);
    return [values[names.indexOf("ListenOverflows")] ?? NaN, values[names.indexOf("ListenDrops")] ?? NaN];
  } catch {
    return [NaN, NaN];
  }
}

/** One second of the storm: the cumulative figures read at its end. */
interface Tick {
  s: number;
  masterCpu: number;
  swarmCpu: number;
  /** the kernel's ListenOverflows, ListenDrops */
  listen: [number, number];
  /** metrics (brine masters only): sign-ins worked on, answered stale / gone / shed / queue full, resent copies answered, replies dropped for a gone peer, handshakes timed out, clear lane depth */
  m?: number[];
}

const metricKeys = [
  'salt_master_requests_handled_total{cmd="_auth"}',
  'brine_request_lane_refused_total{lane="clear",reason="stale"}',
  'brine_request_lane_refused_total{lane="clear",reason="gone"}',
  'brine_request_lane_refused_total{lane="clear",reason="shed"}',
  'brine_request_lane_refused_total{lane="clear",reason="queue_full"}',
  "brine_sign_ins_resent_total",
  'brine_send_queue_dropped_total{queue="router"}',
  'brine_handshake_timeouts_total{port="request"}',
  'brine_handshake_timeouts_total{port="publish"}',
  'brine_request_lane_depth{lane="clear"}',
];
const metricHeads = ["worked", "stale", "gone", "shed", "full", "resent", "dropped", "hs_req", "hs_pub", "depth"];

/** The timeline as TSV: per second the swarm's sign-in results and the differences of the cumulative figures (depth as read). */
function timeline(ticks: Tick[], t0: number, bySecond: Map<number, Map<string, number>>): string {
  const lines = [["t_s", "accepted", "try_timeout", "payload_timeout", "error_reply", "master_cpu_s", "swarm_cpu_s", ...metricHeads, "listen_overflows", "listen_drops"].join("\t")];
  const s0 = Math.floor(t0 / 1000);
  for (let i = 1; i < ticks.length; i++) {
    const a = ticks[i - 1]!;
    const b = ticks[i]!;
    // the swarm's results in the seconds since the previous tick
    const results = new Map<string, number>();
    for (let sec = s0 + a.s; sec < s0 + b.s; sec++) for (const [k, n] of bySecond.get(sec) ?? []) results.set(k, (results.get(k) ?? 0) + n);
    const m = b.m && a.m ? b.m.map((x, j) => (j === metricHeads.length - 1 ? x : x - a.m![j]!)) : metricHeads.map(() => NaN);
    lines.push([b.s, results.get("accepted") ?? 0, results.get("try_timeout") ?? 0, results.get("timeout") ?? 0, results.get("failed") ?? 0, (b.masterCpu - a.masterCpu).toFixed(2), (b.swarmCpu - a.swarmCpu).toFixed(2), ...m, b.listen[0] - a.listen[0], b.listen[1] - a.listen[1]].join("\t"));
  }
  return lines.join("\n") + "\n";
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
  // BRINE_BENCH_STORM_SWARM_CPUS: the swarm's processes (every thread, and the ones they start later) on these CPUs
  const swarmCpus = process.env.BRINE_BENCH_STORM_SWARM_CPUS;
  if (swarmCpus) for (const pid of fleet.pids()) execFileSync("taskset", ["-a", "-p", "-c", swarmCpus, String(pid)], { stdio: "ignore" });
  const swarmCpu = () => fleet.pids().reduce((a, pid) => a + (cpuSecondsOf(`/proc/${pid}/stat`) ?? 0), 0);
  const readMetrics = async (): Promise<number[] | undefined> => {
    if (target.metricsPort === undefined) return undefined;
    try {
      const m = await scrape(target.metricsPort);
      return metricKeys.map((k) => m.get(k) ?? 0);
    } catch {
      return undefined;
    }
  };
  const load0 = loadavg();
  const cpu0 = sampleTree(target.pid)!.cpuS;
  const sched0 = sched(target.pid);
  const threads0 = threadSched(target.pid);
  const ticks: Tick[] = [{ s: 0, masterCpu: cpu0, swarmCpu: swarmCpu(), listen: listenOverflows(), m: await readMetrics() }];
  const t0 = Date.now();
  fleet.startAll();
  const c = fleet.collector;
  // the master's CPU read each second, kept at the moment the last minion signed in
  let cpuAtLast = cpu0;
  let schedAtLast = sched0;
  let threadsAtLast = threads0;
  let signedIn = 0;
  const end = t0 + stormMsMax + 30_000;
  while (c.settledCount() < n && Date.now() < end) {
    await sleep(1000 - ((Date.now() - t0) % 1000));
    const masterCpu = sampleTree(target.pid)?.cpuS ?? ticks[ticks.length - 1]!.masterCpu;
    ticks.push({ s: Math.round((Date.now() - t0) / 1000), masterCpu, swarmCpu: swarmCpu(), listen: listenOverflows(), m: await readMetrics() });
    const now = c.authAt.filter((x) => Number.isFinite(x)).length;
    if (now > signedIn) {
      signedIn = now;
      cpuAtLast = masterCpu;
      schedAtLast = sched(target.pid) ?? schedAtLast;
      threadsAtLast = threadSched(target.pid);
    }
  }
  const tsv = timeline(ticks, t0, c.authBySecond);
  process.stderr.write(`auth-storm ${n} (${target.label}) timeline:\n${tsv}`);
  if (process.env.BRINE_BENCH_STORM_TIMELINE) writeFileSync(process.env.BRINE_BENCH_STORM_TIMELINE, tsv);
  const load1 = loadavg();
  const accepted = c.authAt.filter((x) => Number.isFinite(x));
  const lastS = accepted.length ? (Math.max(...accepted) - t0) / 1000 : NaN;
  const payloads = [...c.authResults.values()].reduce((a, b) => a + b, 0);
  const timedOutTries = c.timeouts.get("_auth") ?? 0;
  const cpuS = cpuAtLast - cpu0;
  const lastTick = ticks.findIndex((t) => t.s >= Math.ceil(lastS));
  const atLast = ticks[lastTick >= 0 ? lastTick : ticks.length - 1]!;
  const swarmCpuS = atLast.swarmCpu - ticks[0]!.swarmCpu;
  const nice = process.env.BRINE_BENCH_STORM_WORKER_NICE;
  const note = `${target.label}, ${n} minions started at once in ${procs} swarm procs (Salt's retry: auth_timeout 5 s × 7, acceptance_wait_time 10 s)${nice ? `, brine_worker_nice ${nice}` : ""}, load ${load0} -> ${load1}`;
  const rows: BenchRow[] = [
    { figure: `storm ${n} (${target.label}): signed in`, value: accepted.length, unit: "minions", target: n, better: "higher", note: `${note}; start failures ${JSON.stringify(Object.fromEntries(c.startFailures))}` },
    { figure: `storm ${n} (${target.label}): all signed in within`, value: Math.round(lastS * 10) / 10, unit: "s", better: "lower", note: `${accepted.length < n ? `only ${accepted.length} of ${n}: the time of the last one` : "from the start of all to the last accepted sign-in"}; the kernel's listen overflows / drops meanwhile ${atLast.listen[0] - ticks[0]!.listen[0]} / ${atLast.listen[1] - ticks[0]!.listen[1]} (zmq_backlog ${process.env.BRINE_BENCH_STORM_BACKLOG ?? "default"}, worker_threads ${process.env.BRINE_BENCH_STORM_WORKER_THREADS ?? "default"})` },
    { figure: `storm ${n} (${target.label}): sign-in payloads per minion`, value: Math.round((payloads / n) * 100) / 100, unit: "payloads", better: "lower", note: `results ${JSON.stringify(Object.fromEntries(c.authResults))}` },
    { figure: `storm ${n} (${target.label}): timed-out sign-in tries per minion`, value: Math.round((timedOutTries / n) * 100) / 100, unit: "tries", better: "lower", note: "each followed by the same payload again (a new connection for 3007.x) while tries remain" },
    { figure: `storm ${n} (${target.label}): master CPU per signed-in minion`, value: accepted.length ? Math.round((cpuS / accepted.length) * 1e6) : NaN, unit: "us", better: "lower", note: `${cpuS.toFixed(1)} s of master CPU (all threads) from the start to the last sign-in; by thread (schedstat): ${threadsBetween(threads0, threadsAtLast)}` },
    { figure: `storm ${n} (${target.label}): swarm CPU per signed-in minion`, value: accepted.length ? Math.round((swarmCpuS / accepted.length) * 1e6) : NaN, unit: "us", better: "lower", note: `${swarmCpuS.toFixed(1)} s of the swarm's CPU (its ${fleet.pids().length} processes) to the second of the last sign-in${swarmCpus ? `, swarm on CPUs ${swarmCpus}` : ""}${process.env.BRINE_BENCH_STORM_MASTER_CPUS ? `, master on CPUs ${process.env.BRINE_BENCH_STORM_MASTER_CPUS}` : ""}` },
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
      const worked = get('salt_master_requests_handled_total{cmd="_auth"}');
      const acceptedReplies = c.authResults.get("accepted") ?? 0;
      rows.push({ figure: `storm ${n} (${target.label}): sign-ins worked on per minion`, value: Math.round((worked / n) * 100) / 100, unit: "sign-ins", better: "lower", note: `clear lane answered without work: stale ${get('brine_request_lane_refused_total{lane="clear",reason="stale"}')}, connection gone ${get('brine_request_lane_refused_total{lane="clear",reason="gone"}')}, shed ${get('brine_request_lane_refused_total{lane="clear",reason="shed"}')}, queue full ${get('brine_request_lane_refused_total{lane="clear",reason="queue_full"}')}; resent copies answered with their first reply ${get("brine_sign_ins_resent_total")}; replies dropped for a gone peer ${get('brine_send_queue_dropped_total{queue="router"}')}; handshakes timed out: request ${get('brine_handshake_timeouts_total{port="request"}')}, publish ${get('brine_handshake_timeouts_total{port="publish"}')}` });
      rows.push({ figure: `storm ${n} (${target.label}): wasted sign-ins (worked on, no minion accepted their reply)`, value: Math.max(0, worked - acceptedReplies), unit: "sign-ins", better: "lower", note: `${worked} worked on (RSA), ${acceptedReplies} replies accepted by minions (a resent copy answered from memory counts as accepted, not as work)` });
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
    // BRINE_BENCH_STORM_BACKLOG: the master's zmq_backlog (its ports' listen backlog; Salt's default 1000)
    const backlog = process.env.BRINE_BENCH_STORM_BACKLOG;
    // BRINE_BENCH_STORM_WORKER_THREADS: the master's worker_threads (split between its lanes: req-pool.ts laneThreads)
    const threads = process.env.BRINE_BENCH_STORM_WORKER_THREADS;
    const m = await startBrineMaster({ id: "bench-auth-storm", brine_metrics: { port: metricsPort }, ...(nice ? { brine_worker_nice: nice } : {}), ...(backlog ? { zmq_backlog: Number(backlog) } : {}), ...(threads ? { worker_threads: Number(threads) } : {}) }, cpus ? { cpus } : {});
    try {
      out.push(...(await stormOn(n, { retPort: m.retPort, pid: m.pid, label: "brine", m, metricsPort })));
    } finally {
      await m.stop();
    }
  }
  return out;
}
