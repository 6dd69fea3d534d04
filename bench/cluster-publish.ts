/**
 * CPU per publish of a cluster (issue 17): N real master processes (3, then 5; 127.0.0.15-19 behind HAProxy on
 * 127.0.0.14), one in-repo minion signed in directly on each master (so every master's PUB socket has a
 * subscriber and a job published on m1 reaches minions of every master), the minions holding their returns
 * (the window is the publish and its delivery only).
 *
 * `JOBS` publishes of `test.ping` to every minion, all from m1 (so each is forwarded to the N-1 peers), 16 at once;
 * the window runs from the first publish until every minion has every job. CPU: utime + stime of each master's
 * threads (/proc/<pid>/task/<tid>/stat, by thread name: main, brine-publisher, the rest), summed per master and
 * over all masters, less each master's idle rate over 5 s before the window (the raw figure beside it). Load
 * average before and after in each row's note.
 *
 * `BRINE_BENCH_CLUSTER_SIZES=3,5` (default) picks the cluster sizes; `BRINE_BENCH_PUBLISHES` the publish count.
 */
import { readFileSync } from "node:fs";
import { ClusterHarness, skipReason, until, minionThrough } from "../tools/local-cluster.js";
import { threadCpuByName } from "./thread-cpu.js";
import { LocalClient } from "../src/lib/client/local-client.js";
import { loadMasterConfig } from "../src/shared/config/load.js";
import { testKeys } from "../test/helpers/minions.js";
import type { TestMinion } from "../src/lib/minion/test-minion.js";
import type { BenchOptions, BenchRow } from "./types.js";

const LB = "127.0.0.14";
const ALL_HOSTS = ["127.0.0.15", "127.0.0.16", "127.0.0.17", "127.0.0.18", "127.0.0.19"];
/** publishes in flight from the one client at once */
const CONCURRENT_PUBLISHES = 16;
/** how long each master's idle CPU rate is measured before the window, ms */
const IDLE_WINDOW_MS = 5_000;

/** CPU seconds of one process's threads, grouped as main / publisher / other. */
function threadGroups(pid: number): { main: number; publisher: number; other: number } {
  const out = { main: 0, publisher: 0, other: 0 };
  for (const [name, s] of threadCpuByName(pid)) {
    if (name === "main") out.main += s;
    else if (name === "brine-publisher") out.publisher += s;
    else out.other += s;
  }
  return out;
}

const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");

async function oneSize(n: number, jobs: number): Promise<BenchRow[]> {
  const hosts = ALL_HOSTS.slice(0, n);
  const h = await ClusterHarness.start({ lbHost: LB, hosts, clusterId: `brine-bench-pub${n}`, privateCachedir: true, extra: { runner_returns: false }, ...(process.env.BRINE_BENCH_NODE_FLAGS ? { nodeFlags: process.env.BRINE_BENCH_NODE_FLAGS.split(" ") } : {}) });
  const minions: TestMinion[] = [];
  try {
    await h.waitLeader(hosts.map((_, i) => i), n, 60_000);
    const keys = await testKeys(n);
    hosts.forEach((host, i) => minions.push(minionThrough(host, `bench-cp${i + 1}`, keys[i]!)));
    await Promise.all(minions.map((m) => m.start()));
    const client = new LocalClient(loadMasterConfig(h.masters[0]!.confDir));
    await until("every minion to answer", async () => {
      const got = new Set<string>();
      for await (const r of client.cmdIter({ tgt: "bench-cp*", fun: "test.ping", timeoutS: 10 })) if (!("missing" in r)) got.add(r.id);
      return got.size === n ? true : undefined;
    }, 60_000, 1000);
    for (const m of minions) m.holdReturns = true;
    const pids = h.masters.map((m) => m.proc!.pid!);
    /** one master's threads by name, numbered threads (brine-req-1, …) together */
    const byName = (pid: number) => {
      const out = new Map<string, number>();
      for (const [name, s] of threadCpuByName(pid)) out.set(name.replace(/[-\d]+$/, ""), (out.get(name.replace(/[-\d]+$/, "")) ?? 0) + s);
      return out;
    };
    const sample = () => pids.map(threadGroups);
    const total = (s: ReturnType<typeof sample>) => s.reduce((a, g) => a + g.main + g.publisher + g.other, 0);

    const i0 = sample();
    const ti = performance.now();
    await new Promise((r) => setTimeout(r, IDLE_WINDOW_MS));
    const i1 = sample();
    const idleRate = (total(i1) - total(i0)) / ((performance.now() - ti) / 1000);

    const before = minions.map((m) => m.stats.publishes);
    const names0 = [byName(pids[0]!), byName(pids[1]!)];
    const load0 = loadavg();
    const a = sample();
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENT_PUBLISHES }, async () => {
        while (next < jobs) {
          next++;
          const r = await client.pub({ tgt: "bench-cp*", fun: "test.ping", timeoutS: 30 });
          if (typeof r.jid !== "string") throw new Error(`publish refused: ${JSON.stringify(r).slice(0, 200)}`);
        }
      }),
    );
    await until("every minion to have every publish", async () => (minions.every((m, i) => m.stats.publishes - before[i]! >= jobs) ? true : undefined), 120_000, 100);
    const b = sample();
    const names1 = [byName(pids[0]!), byName(pids[1]!)];
    const threads = (k: number) =>
      [...names1[k]!]
        .map(([name, s1]) => [name, s1 - (names0[k]!.get(name) ?? 0)] as const)
        .filter(([, s]) => s > 0)
        .sort((x, y) => y[1] - x[1])
        .map(([name, s]) => `${name} ${Math.round((s / jobs) * 1e6)}`)
        .join(", ");
    const wall = (performance.now() - t0) / 1000;
    const load1 = loadavg();
    const d = pids.map((_, i) => ({ main: b[i]!.main - a[i]!.main, publisher: b[i]!.publisher - a[i]!.publisher, other: b[i]!.other - a[i]!.other }));
    const us = (s: number) => Math.round((s / jobs) * 1e6);
    const raw = total(b) - total(a);
    const net = raw - idleRate * wall;
    const pubSum = d.reduce((s, g) => s + g.publisher, 0);
    // what forwarding costs a peer: every thread of m2..mN (raw: the idle rate is not split per master)
    const peerAll = d.slice(1).map((g) => g.main + g.publisher + g.other);
    const peerMean = peerAll.reduce((a, b) => a + b, 0) / peerAll.length;
    const per = d.map((g, i) => `m${i + 1} ${us(g.main + g.publisher + g.other)} (main ${us(g.main)}, publisher ${us(g.publisher)})`).join("; ");
    const note = `${jobs} publishes from m1 to ${n} minions (one per master), ${n} masters, ${wall.toFixed(1)} s; load ${load0} → ${load1}`;
    return [
      { figure: `cluster of ${n}: CPU per publish, all masters`, value: us(net), unit: "µs", better: "lower", note: `${note}; less idle ${(idleRate * 1000).toFixed(0)} ms/s, raw ${us(raw)} µs; per master µs: ${per}` },
      { figure: `cluster of ${n}: CPU per publish of one peer master (mean of ${n - 1}, raw)`, value: us(peerMean), unit: "µs", better: "lower", note: `each peer: ${peerAll.map(us).join(", ")} µs; the origin m1: ${us(d[0]!.main + d[0]!.publisher + d[0]!.other)} µs` },
      { figure: `cluster of ${n}: the origin's and a peer's threads' CPU per publish`, value: us(d[0]!.main + d[0]!.publisher + d[0]!.other), unit: "µs", better: "lower", note: `m1 by thread µs: ${threads(0)}; m2: ${threads(1)}` },
      { figure: `cluster of ${n}: publisher threads' CPU per publish, all masters`, value: us(pubSum), unit: "µs", better: "lower", note: `origin m1 ${us(d[0]!.publisher)} µs, peers ${d.slice(1).map((g) => us(g.publisher)).join(", ")} µs` },
    ];
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop();
  }
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const sizes = (process.env.BRINE_BENCH_CLUSTER_SIZES ?? "3,5").split(",").map(Number);
  const jobs = Number(process.env.BRINE_BENCH_PUBLISHES ?? (opts.full ? 2000 : 500));
  const why = await skipReason(LB, ALL_HOSTS.slice(0, Math.max(...sizes)));
  if (why) return [{ figure: "cluster publish", value: NaN, unit: "", note: `skipped: ${why}` }];
  const rows: BenchRow[] = [];
  for (const n of sizes) rows.push(...(await oneSize(n, jobs)));
  return rows;
}
