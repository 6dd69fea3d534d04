/**
 * Job placement (issue 16) on five real master processes (127.0.0.187-191 behind HAProxy on 127.0.0.186), four
 * in-repo minions through the balancer, the same jobs published in two phases:
 *
 * 1. broadcast (no route): every master stores every job (the mirror copies peers' records);
 * 2. placement: ring `jobs` on m1-m3, `members: voters`, `replicas: 2`, `jobs` routed to it.
 *
 * For each phase: the job-cache bytes the phase's jobs take across the five masters (each master's LMDB read
 * from this process, key + stored value bytes of every record of the phase's jids in the five job banks),
 * divided by the returns; and all five masters' CPU (utime + stime of each process, /proc) from the first
 * publish until every copy is where it belongs (broadcast: every master holds every job and return;
 * placement: every job and return on exactly its two owners, every outbox empty), per return. Whether the
 * copies are in place is read from the masters' LMDB by this process (no runner call in the window), and the
 * masters' idle CPU rate, measured over 10 s before each phase, is subtracted for the window's length (the
 * raw figure is shown beside it). Then `jobs.lookup_jid` latency on m4 (outside the ring), through its
 * control socket (a runner thread per call, as `salt-run` has): for broadcast jobs (read from m4's own cache),
 * and for placed jobs (asked of every master and merged).
 */
import path from "node:path";
import { readFileSync } from "node:fs";
import { open } from "lmdb";
import { ClusterHarness, minionThrough, skipReason, until } from "../tools/local-cluster.js";
import { cpuSecondsOf } from "../tools/swarm/proc-stats.js";
import { LocalClient } from "../src/lib/client/local-client.js";
import { loadMasterConfig } from "../src/shared/config/load.js";
import { controlCall } from "../src/lib/client/control-client.js";
import { testKeys } from "../test/helpers/minions.js";
import type { TestMinion } from "../src/lib/minion/test-minion.js";
import type { BenchOptions, BenchRow } from "./types.js";

const LB = "127.0.0.186";
const HOSTS = ["127.0.0.187", "127.0.0.188", "127.0.0.189", "127.0.0.190", "127.0.0.191"];
const MINIONS = ["bench-pa", "bench-pb", "bench-pc", "bench-pd"];
const BANKS = ["jobs/loads", "jobs/minions", "jobs/endtimes", "jobs/nocache", "jobs/returns"];

/** Per master: the jids of `jids` it holds a load of, its returns of them, its hand-off outbox size. */
function census(lmdbDir: string, jids: ReadonlySet<string>): { loads: Set<string>; returns: number; outbox: number } {
  const root = open({ path: lmdbDir, readOnly: true, maxDbs: 64, compression: false });
  const loads = new Set<string>();
  let returns = 0;
  let outbox = 0;
  try {
    for (const key of root.openDB<Buffer, string>({ name: "jobs/loads", encoding: "binary" }).getKeys()) if (jids.has(key)) loads.add(key);
    for (const key of root.openDB<Buffer, string>({ name: "jobs/returns", encoding: "binary" }).getKeys()) if (jids.has(key.slice(0, key.indexOf("/")))) returns++;
    outbox = root.openDB<Buffer, string>({ name: "jobs/handoff", encoding: "binary" }).getCount();
  } finally {
    void root.close();
  }
  return { loads, returns, outbox };
}

/** Bytes (key + stored value) of the records of `jids` in one master's job banks. */
function jobBytes(lmdbDir: string, jids: ReadonlySet<string>): number {
  const root = open({ path: lmdbDir, readOnly: true, maxDbs: 64, compression: false });
  let bytes = 0;
  try {
    for (const bank of BANKS) {
      const db = root.openDB<Buffer, string>({ name: bank, encoding: "binary" });
      for (const { key, value } of db.getRange()) {
        const jid = key.includes("/") ? key.slice(0, key.indexOf("/")) : key;
        if (jids.has(jid)) bytes += Buffer.byteLength(key) + value.byteLength;
      }
    }
  } finally {
    void root.close();
  }
  return bytes;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const why = await skipReason(LB, HOSTS);
  if (why) return [{ figure: "job placement", value: NaN, unit: "", note: `skipped: ${why}` }];
  const JOBS = opts.full ? 1000 : 300;
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-bench-placement", privateCachedir: true, extra: { runner_returns: false } });
  const minions: TestMinion[] = [];
  const rows: BenchRow[] = [];
  const cfgs = h.masters.map((m) => loadMasterConfig(m.confDir));
  const clients = cfgs.map((c) => new LocalClient(c));
  const run = (i: number, fn: string, ...args: string[]) => h.clusterRunner(i, fn, args);
  const cpu = () => h.masters.reduce((a, m) => a + (cpuSecondsOf(`/proc/${m.proc!.pid}/stat`) ?? NaN), 0);
  const lookup = async (i: number, jid: string): Promise<number> => {
    const t0 = performance.now();
    const r = await controlCall(cfgs[i]!.sock_dir, { op: "run", fun: "jobs.lookup_jid", arg: [jid], kwarg: {} });
    const ms = performance.now() - t0;
    if (r.type !== "return" || Object.keys(r.ret as object).length !== MINIONS.length) throw new Error(`lookup_jid ${jid} on m${i + 1}: ${JSON.stringify(r).slice(0, 200)}`);
    return ms;
  };
  /** publishes `n` jobs, a fifth on each master in turn, 16 at once (never two masters at once: jids) */
  const publish = async (tag: string, n: number): Promise<string[]> => {
    const jids: string[] = [];
    for (const [o, c] of clients.entries()) {
      let next = 0;
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          for (;;) {
            const k = next++;
            if (k >= n / clients.length) return;
            const r = await c.pub({ tgt: "bench-p*", fun: "test.echo", arg: [`${tag}-${o}-${k}`], timeoutS: 30 });
            jids.push(r.jid as string);
          }
        }),
      );
    }
    return jids;
  };
  const storage = (jids: string[]) => {
    const set = new Set(jids);
    return cfgs.reduce((a, c) => a + jobBytes(String(c.brine_lmdb_dir ?? path.join(c.cachedir, "brine-node", c.id, "brine-lmdb")), set), 0);
  };
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const lmdbDirs = cfgs.map((c) => String(c.brine_lmdb_dir ?? path.join(c.cachedir, "brine-node", c.id, "brine-lmdb")));
  /** every job of `jids` held with all its returns by exactly `copies` masters, and no outbox holding anything */
  const inPlace = (jids: string[], copies: number): boolean => {
    const set = new Set(jids);
    const all = lmdbDirs.map((d) => census(d, set));
    const held = new Map<string, number>();
    for (const c of all) for (const j of c.loads) held.set(j, (held.get(j) ?? 0) + 1);
    const returns = all.reduce((a, c) => a + c.returns, 0);
    const outbox = all.reduce((a, c) => a + c.outbox, 0);
    return outbox === 0 && jids.every((j) => held.get(j) === copies) && returns === jids.length * MINIONS.length * copies;
  };
  /** the five masters' CPU rate while nothing is published, CPU s per s */
  const idleRate = async (): Promise<number> => {
    const c = cpu();
    const t = performance.now();
    await new Promise((r) => setTimeout(r, 10_000));
    return (cpu() - c) / ((performance.now() - t) / 1000);
  };
  const loadavg = () => readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  try {
    await h.waitLeader([0, 1, 2, 3, 4], 5, 60_000);
    const keys = await testKeys(MINIONS.length);
    MINIONS.forEach((id, i) => minions.push(minionThrough(LB, id, keys[i]!)));
    await Promise.all(minions.map((m) => m.start()));
    await until("the minions to answer", async () => {
      const got = new Set<string>();
      for await (const r of clients[0]!.cmdIter({ tgt: "bench-p*", fun: "test.ping", timeoutS: 10 })) if (!("missing" in r)) got.add(r.id);
      return got.size === MINIONS.length ? true : undefined;
    }, 60_000, 1000);
    await run(3, "ring_create", "jobs", "m1,m2,m3");
    for (const i of [0, 1, 2]) await until(`m${i + 1} to host ring jobs`, async () => ((await run(i, "ring_info", "jobs")).epoch >= 0 ? true : undefined), 30_000);
    await run(4, "ring_set", "jobs", "members=voters", "replicas=2");
    await until("m1 to shard ring jobs", async () => ((await run(0, "ring_info", "jobs")).node_count === 3 ? true : undefined), 30_000);

    // --- broadcast
    const bIdle = await idleRate();
    let c0 = cpu();
    let t0 = performance.now();
    const bLoad = loadavg();
    const bJids = await publish("b", JOBS);
    await until("every broadcast job and return on every master", async () => (inPlace(bJids, 5) ? true : undefined), 300_000, 1000);
    const bCpu = cpu() - c0;
    const bWall = (performance.now() - t0) / 1000;
    const bBytes = storage(bJids);
    const returns = JOBS * MINIONS.length;
    const bLookups: number[] = [];
    for (const jid of bJids.filter((_, i) => i % Math.floor(JOBS / 20) === 0)) bLookups.push(await lookup(3, jid));

    // --- placement
    await run(0, "route_set", "jobs", "jobs");
    for (const i of [0, 1, 2, 3, 4]) await until(`m${i + 1} to see the route`, async () => ((await run(i, "routes")).routes.jobs === "jobs" ? true : undefined), 15_000);
    const pIdle = await idleRate();
    c0 = cpu();
    t0 = performance.now();
    const pLoad = loadavg();
    const pJids = await publish("p", JOBS);
    await until("every placed job and return on its two owners, outboxes empty", async () => (inPlace(pJids, 2) ? true : undefined), 300_000, 1000);
    const pCpu = cpu() - c0;
    const pWall = (performance.now() - t0) / 1000;
    const pBytes = storage(pJids);
    const check = await run(0, "placement_check", "jobs", "limit=5000");
    // the broadcast phase's jobs stay on every master (no rebalancing of a route newly set): only this phase's are compared
    const phase = new Set(pJids);
    const off = (check.violations as { jid: string }[]).filter((v) => phase.has(v.jid));
    if (off.length > 0 || !pJids.every((j) => check.jids[j]?.length === 2)) throw new Error(`placement_check disagrees: ${JSON.stringify(off).slice(0, 300)}`);
    const pLookups: number[] = [];
    for (const jid of pJids.filter((_, i) => i % Math.floor(JOBS / 20) === 0)) pLookups.push(await lookup(3, jid));
    const net = (c: number, idle: number, wall: number) => Math.round(((c - idle * wall) / returns) * 1e6);

    const note = `${JOBS} jobs × ${MINIONS.length} minions, 5 masters, ring on 3, replicas 2`;
    rows.push(
      { figure: "job cache bytes per return, all masters, broadcast", value: Math.round(bBytes / returns), unit: "B", better: "lower", note },
      { figure: "job cache bytes per return, all masters, placement", value: Math.round(pBytes / returns), unit: "B", better: "lower", note: `${(bBytes / pBytes).toFixed(2)}× less than broadcast (5 copies → 2)` },
      { figure: "masters' CPU per return until every copy is in place, broadcast", value: net(bCpu, bIdle, bWall), unit: "µs", better: "lower", note: `all five processes, publish to settled (${bWall.toFixed(1)} s), less the idle rate ${(bIdle * 1000).toFixed(0)} ms/s; raw ${Math.round((bCpu / returns) * 1e6)} µs; load ${bLoad}` },
      { figure: "masters' CPU per return until every copy is in place, placement", value: net(pCpu, pIdle, pWall), unit: "µs", better: "lower", note: `all five processes, publish to outboxes empty (${pWall.toFixed(1)} s), less the idle rate ${(pIdle * 1000).toFixed(0)} ms/s; raw ${Math.round((pCpu / returns) * 1e6)} µs; load ${pLoad}` },
      { figure: "jobs.lookup_jid on m4, jid in m4's own cache (broadcast), median", value: Math.round(median(bLookups)), unit: "ms", better: "lower", note: `${bLookups.length} calls through the control socket (a runner thread each); max ${Math.round(Math.max(...bLookups))} ms` },
      { figure: "jobs.lookup_jid on m4, jid on other masters (placement), median", value: Math.round(median(pLookups)), unit: "ms", better: "lower", note: `${pLookups.length} calls; every master asked over raft/placement and merged; max ${Math.round(Math.max(...pLookups))} ms` },
    );
  } finally {
    await Promise.all(minions.map((m) => m.stop()));
    await h.stop();
  }
  return rows;
}
