/**
 * A grain-targeted publish with the minion data cache placed on a ring (issue 16) against broadcast, on three real
 * master processes (127.0.0.175-177 behind HAProxy on 127.0.0.174) and six in-repo minions attached two to each
 * master (each sends its grains there), three of them with the grain `bench_role: web`:
 *
 * 1. broadcast (no route): every master holds every minion's grains;
 * 2. placement: ring `minions` on m1 and m2 (`members: voters`, `replicas: 1`), `grains` routed to it and placed
 *    (placement_check ok): m3, outside the ring, holds no minion's grains, so each grain-targeted publish on it
 *    asks m1 and m2 once (`raft/minions` `target`) before it publishes.
 *
 * In each phase, on m3: `pub` (the target evaluated and the job published; returns not waited for) with the grain
 * target `bench_role:web` and with the glob `bench-g*` alternated, N of each, and the wall time of each call; and
 * m3's CPU (utime + stime of its process) per publish over the grain calls alone, less its idle rate.
 */
import { readFileSync } from "node:fs";
import { ClusterHarness, minionThrough, skipReason, until } from "../tools/local-cluster.js";
import { cpuSecondsOf } from "../tools/swarm/proc-stats.js";
import { LocalClient } from "../src/lib/client/local-client.js";
import { loadMasterConfig } from "../src/shared/config/load.js";
import { syntheticGrains } from "../src/lib/minion/grains.js";
import { testKeys } from "../test/helpers/minions.js";
import type { TestMinion } from "../src/lib/minion/test-minion.js";
import type { BenchOptions, BenchRow } from "./types.js";

const LB = "127.0.0.174";
const HOSTS = ["127.0.0.175", "127.0.0.176", "127.0.0.177"];
const IDS = ["bench-ga", "bench-gb", "bench-gc", "bench-gd", "bench-ge", "bench-gf"];
const WEB = ["bench-ga", "bench-gc", "bench-ge"];

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const why = await skipReason(LB, HOSTS);
  if (why) return [{ figure: "grain-targeted publish, placed", value: NaN, unit: "", note: `skipped: ${why}` }];
  const N = opts.full ? 200 : 60;
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-bench-placement-grains", privateCachedir: true, extra: { runner_returns: false } });
  const minions: TestMinion[] = [];
  const rows: BenchRow[] = [];
  const cfgs = h.masters.map((m) => loadMasterConfig(m.confDir));
  const m3 = new LocalClient(cfgs[2]!);
  const run = (i: number, fn: string, ...args: string[]) => h.clusterRunner(i, fn, args);
  const cpu3 = () => cpuSecondsOf(`/proc/${h.masters[2]!.proc!.pid}/stat`) ?? NaN;
  const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
  /** N publishes of each target on m3, alternated: wall ms of each, and m3's CPU over the grain ones (less idle) */
  const phase = async (): Promise<{ grain: number[]; glob: number[]; cpuUs: number; load: string }> => {
    const c0 = cpu3();
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, 5_000));
    const idle = (cpu3() - c0) / ((performance.now() - t0) / 1000);
    const load = loadavg();
    const grain: number[] = [];
    const glob: number[] = [];
    let grainCpu = 0;
    let grainWall = 0;
    for (let i = 0; i < N; i++) {
      for (const kind of ["grain", "glob"] as const) {
        const c = cpu3();
        const t = performance.now();
        const r = await m3.pub(kind === "grain" ? { tgt: "bench_role:web", tgtType: "grain", fun: "test.ping", timeoutS: 10 } : { tgt: "bench-g*", tgtType: "glob", fun: "test.ping", timeoutS: 10 });
        const ms = performance.now() - t;
        const want = kind === "grain" ? WEB : IDS;
        if ([...((r.minions as string[]) ?? [])].sort().join() !== want.join()) throw new Error(`${kind} publish on m3 targeted ${JSON.stringify(r.minions)}, not ${want.join(",")}`);
        if (kind === "grain") {
          grain.push(ms);
          grainCpu += cpu3() - c;
          grainWall += ms / 1000;
        } else glob.push(ms);
      }
    }
    return { grain, glob, cpuUs: Math.round(((grainCpu - idle * grainWall) / N) * 1e6), load };
  };
  try {
    await h.waitLeader([0, 1, 2], 3, 60_000);
    const keys = await testKeys(IDS.length);
    IDS.forEach((id, i) => minions.push(minionThrough(HOSTS[i % 3]!, id, keys[i]!, undefined, { grains: { ...syntheticGrains(id, { index: i }), bench_role: WEB.includes(id) ? "web" : "db" } })));
    await Promise.all(minions.map((m) => m.start()));
    // the ring first (placement_check names one), grains routed to it only after the broadcast phase
    await run(0, "ring_create", "minions", "m1,m2");
    for (const i of [0, 1]) await until(`m${i + 1} to host ring minions`, async () => ((await run(i, "ring_info", "minions")).epoch >= 0 ? true : undefined), 30_000);
    await run(0, "ring_set", "minions", "members=voters", "replicas=1");
    await until("ring minions to shard over m1, m2", async () => ((await run(0, "ring_info", "minions")).node_count === 2 ? true : undefined), 30_000);
    await until("every master to hold every minion's grains", async () => {
      const r = await run(0, "placement_check", "minions", "data_type=grains");
      return IDS.every((id) => (r.ids?.[id] ?? []).length === 3) ? true : undefined;
    }, 60_000, 1000);
    const b = await phase();

    await run(0, "route_set", "grains", "minions");
    await until("every minion's grains on its one owner, nowhere else", async () => {
      const r = await run(0, "placement_check", "minions", "data_type=grains");
      const pending = Object.values((r.handoff_pending ?? {}) as Record<string, number>).reduce((a, x) => a + x, 0);
      return r.ok && pending === 0 && IDS.every((id) => (r.ids?.[id] ?? []).length === 1) ? true : undefined;
    }, 120_000, 2000);
    const p = await phase();

    const note = (x: { grain: number[]; glob: number[]; load: string }, what: string) => `${N} calls on m3 (${what}), p90 ${pct(x.grain, 0.9).toFixed(1)} ms; glob target alternated: median ${pct(x.glob, 0.5).toFixed(1)} ms, p90 ${pct(x.glob, 0.9).toFixed(1)} ms; load ${x.load}`;
    rows.push(
      { figure: "publish with a grain target on m3, broadcast, median", value: +pct(b.grain, 0.5).toFixed(1), unit: "ms", better: "lower", note: note(b, "every master holds every minion's grains") },
      { figure: "publish with a grain target on m3, grains placed, median", value: +pct(p.grain, 0.5).toFixed(1), unit: "ms", better: "lower", note: note(p, "m3 holds none: asks m1 and m2 once per publish") },
      { figure: "m3's CPU per grain-targeted publish, broadcast", value: b.cpuUs, unit: "µs", better: "lower", note: "the whole process, less its idle rate" },
      { figure: "m3's CPU per grain-targeted publish, grains placed", value: p.cpuUs, unit: "µs", better: "lower", note: "the whole process, less its idle rate (m1 and m2's share of the target question not counted)" },
    );
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop();
  }
  return rows;
}
