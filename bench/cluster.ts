/**
 * The master-cluster benchmark.
 *
 * 1. Returns/s: brine-swarm's `ping` scenario (N minions, a few jobs one after the other) against one brine
 *    master, then against three masters (own processes on 127.0.0.11-13) behind a real HAProxy on
 *    127.0.0.1:4505/4506 — the same machine runs every master, HAProxy and the swarm, so the figure says what
 *    the cluster costs on one box more than what it gains on three.
 * 2. Raft over the real peer channel (ZeroMQ + libsodium sessions, LMDB fsync on every node): three masters on
 *    127.0.0.31-33, each its own process as deployed (this file in `--raft-master` mode, driven over the IPC
 *    channel; the timing runs inside the leader's process); commit latency of sequential proposals on the
 *    leader (p50, p99; inside the leader's worker twice: the first commits after start, code still cold, and a
 *    window after HOT_PROPOSALS more, set against the floor), and the leader-failover time: the leader is cut off from its peers (ClusterService.isolate, as a partition or a
 *    crash looks to the others) and the clock runs until both others agree on a new leader; and leader crashes
 *    (`failover`): the leader's process killed, timed to the first commit in a new term (killRun).
 *    What the commit latency is made of: a commit is the leader's append (its own fsync in parallel) → a
 *    follower's fsync → the acknowledgement back → apply. The same run with the Raft LMDB on tmpfs (fsync
 *    free) gives the part that is not fsync; a linearizable read on the leader (one heartbeat round to a
 *    quorum, no write) gives the round trip through the peer channel and the pumps alone; the raw LMDB
 *    commit is this disk's fsync. The earlier shape, three masters in the bench process (so their three main
 *    threads are one), is kept as a labelled row.
 *
 * Skips (with a note row) what cannot run here: no haproxy, ports taken.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { MasterConfig } from "../src/shared/config/defaults.js";
import { runSwarm } from "../tools/swarm/swarm.js";
import type { SwarmReport } from "../tools/swarm/report.js";
import { ClusterHarness, skipReason } from "../tools/local-cluster.js";
import { startTestMaster, freePort } from "../test/helpers/master.js";
import { startBrineMaster } from "./swarm.js";
import { rawLmdbCommitMs } from "./raft-worker.js";
import { floorRun as commitFloorRun, openFloor } from "./commit-floor.js";
import { interleavedPairs, median, pairLines, pairsRow, type BrineSegment, type CommitPair } from "./commit-floor-pairs.js";
import { COMMIT_LATENCY_SAMPLES } from "../src/shared/metrics/latency-window.js";
import { byNameDelta, perfRecord, threadsLine } from "./thread-sched.js";
import { forkMember, HOT_PROPOSALS, memberOf, WARM_PROPOSALS, wallMs, type RaftMember, type SchedSample } from "./cluster-member.js";
import type { BenchOptions, BenchRow } from "./types.js";
import type { LatencySummary } from "../src/shared/metrics/latency-window.js";
import { stageDelta, type StageTotals } from "../src/shared/metrics/stage-clock.js";

const LB = "127.0.0.1";
const HOSTS = ["127.0.0.11", "127.0.0.12", "127.0.0.13"];
const RAFT_HOSTS = ["127.0.0.31", "127.0.0.32", "127.0.0.33"];

const round2 = (x: number): number => Math.round(x * 100) / 100;

function pct(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function swarmPing(master: string, retPort: number, rootKeyFile: string, n: number, jobs: number, masterPid?: number): Promise<SwarmReport> {
  return runSwarm({
    scenario: "ping",
    master,
    retPort,
    minions: n,
    procs: Math.max(1, Math.min(4, Math.ceil(n / 1500))),
    rootKeyFile,
    ...(masterPid ? { masterPid } : {}),
    idPrefix: "clbench-",
    acceptanceWaitMs: 1000,
    randomReauthDelayMs: 0,
    jobTimeoutMs: 60_000,
    count: jobs,
    progress: false,
  });
}

async function returnsRows(n: number, jobs: number): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const single = await startBrineMaster();
  let one: SwarmReport;
  try {
    one = await swarmPing("127.0.0.1", single.retPort, single.rootKeyFile, n, jobs, single.pid);
  } finally {
    await single.stop();
  }
  rows.push({ figure: `single master, ${n} minions: returns rate`, value: one.returns_per_s ?? 0, unit: "returns/s", better: "higher", note: `${one.returned}/${one.expected_returns} returns, ${one.errors} errors` });

  const why = await skipReason(LB, HOSTS);
  if (why) {
    rows.push({ figure: "3 masters behind HAProxy: skipped", value: NaN, unit: "", note: why });
    return rows;
  }
  const h = await ClusterHarness.start({ lbHost: LB, hosts: HOSTS, clusterId: "brine-bench", extra: { log_level_logfile: "warning" } });
  try {
    await h.waitLeader([0, 1, 2], 3, 60_000);
    const cache = path.join(h.shared, "cache");
    const key = readdirSync(cache).find((f) => /^\..+_key$/.test(f))!;
    const three = await swarmPing(LB, 4506, path.join(cache, key), n, jobs);
    rows.push({
      figure: `3 masters + HAProxy, ${n} minions: returns rate`,
      value: three.returns_per_s ?? 0,
      unit: "returns/s",
      better: "higher",
      note: `${three.returned}/${three.expected_returns} returns, ${three.errors} errors; ${(((three.returns_per_s ?? 0) / (one.returns_per_s || 1)) * 100).toFixed(0)}% of the single master on ${os.cpus().length} cores shared by all`,
    });
  } finally {
    await h.stop();
  }
  return rows;
}

/** tmpfs, where fsync costs nothing: the Raft LMDB there shows what a commit costs without the disk */
const TMPFS = "/dev/shm";

interface RaftRun {
  /** commit latencies, ms, sorted */
  commits: number[];
  /** linearizable reads on the leader, ms, sorted */
  reads: number[];
  /** BURST_PROPOSALS proposals on the leader, BURST_IN_FLIGHT at a time: committed entries per second */
  burstPerS: number;
  /** leader failovers, ms, sorted */
  failovers: number[];
  inWorker: LatencySummary | undefined;
  /** the first commits after start (see Measured) */
  inWorkerCold: LatencySummary | undefined;
  /** proposals made in all */
  proposed: number;
  /** of them, the warm window's */
  window: number;
  /** per commit of the warm window: the leader's and the followers' (mean) CPU and fsyncs */
  perCommit?: { leader: PerCommit; followers: PerCommit };
  /** the same over every proposal, the code's warm-up included */
  perCommitWhole?: { leader: PerCommit; followers: PerCommit };
  /** brine's segments and the floor's in turns, after the warm window (bench/commit-floor-pairs.ts) */
  pairs?: CommitPair[];
}

/** What one master spent per commit: µs on a CPU and waiting for one, its Raft thread's and all threads'. */
interface PerCommit {
  raftRunUs: number;
  raftWaitUs: number;
  processRunUs: number;
  processWaitUs: number;
  /** µs on a CPU per commit by thread name (see processSched; "node" includes the Raft thread) */
  threadsUs?: Record<string, number>;
  /** durable commits of the Raft worker (one fsync each) per proposal */
  fsyncs: number;
  /** of them, the leader's own appends committed on LMDB's write thread (`brine_raft_leader_write: background`) */
  backgroundFsyncs: number;
  /** bytes the whole process sent to the block layer (/proc/<pid>/io write_bytes) per proposal */
  diskBytes?: number;
  /** the Raft worker's durable commit (LMDB transaction + fsync), p50 over its last 256, ms */
  durableP50Ms?: number;
  /** of raftRunUs, what the Raft thread spends with nothing proposed (ticks, heartbeats) over as long, per commit */
  raftIdleUs?: number;
  /** the Raft thread's stages (NodeStatus.stages) per commit, and the same with nothing proposed over as long */
  stages?: StageTotals;
  idleStages?: StageTotals;
}

/** how long the Raft threads' background is sampled before the commits, ms */
const IDLE_WINDOW_MS = 2000;


/** (b - a) per commit, for `n` commits. */
function perCommit(a: SchedSample, b: SchedSample, n: number): PerCommit {
  const us = (x: number, y: number) => (y - x) / 1000 / n;
  return {
    raftRunUs: us(a.raft?.runNs ?? 0, b.raft?.runNs ?? 0),
    raftWaitUs: us(a.raft?.waitNs ?? 0, b.raft?.waitNs ?? 0),
    processRunUs: us(a.process.runNs, b.process.runNs),
    processWaitUs: us(a.process.waitNs, b.process.waitNs),
    threadsUs: byNameDelta(a.process.byName, b.process.byName, n),
    fsyncs: (b.fsyncs - a.fsyncs) / n,
    backgroundFsyncs: (b.backgroundCommits - a.backgroundCommits) / n,
    ...(a.diskBytes !== undefined && b.diskBytes !== undefined ? { diskBytes: (b.diskBytes - a.diskBytes) / n } : {}),
    ...(b.durableCommit ? { durableP50Ms: b.durableCommit.p50Ms } : {}),
    ...(a.stages && b.stages ? { stages: stageDelta(a.stages, b.stages, n) } : {}),
  };
}

/** The mean of several masters' stage figures (stages absent on one count as zero there). */
function meanStages(xs: (StageTotals | undefined)[]): StageTotals | undefined {
  const have = xs.filter((x): x is StageTotals => x !== undefined);
  if (have.length === 0) return undefined;
  const out: StageTotals = {};
  for (const x of have) for (const [k, t] of Object.entries(x)) {
    const o = (out[k] ??= { us: 0, n: 0 });
    o.us += t.us / have.length;
    o.n += t.n / have.length;
  }
  return out;
}

/**
 * One line per stage, µs per commit (runs per commit), busiest first, with the idle background of the same
 * stage over as long in brackets; counters (peer.in.<channel>, raft.out.<type>) as runs only.
 */
export function stageLines(p: PerCommit): string[] {
  const s = p.stages;
  if (!s) return [];
  const idle = p.idleStages ?? {};
  const timed = Object.entries(s).filter(([k, t]) => t.us > 0 || (idle[k]?.us ?? 0) > 0).sort((a, b) => b[1].us - a[1].us);
  const counted = Object.entries(s).filter(([k, t]) => t.us === 0 && (idle[k]?.us ?? 0) === 0 && !k.startsWith("loop."));
  const lines = timed.map(([k, t]) => `${k.padEnd(16)} ${t.us.toFixed(1).padStart(8)} µs ${t.n.toFixed(2).padStart(6)}×   (idle ${(idle[k]?.us ?? 0).toFixed(1)} µs ${(idle[k]?.n ?? 0).toFixed(2)}×)`);
  if (counted.length > 0) lines.push(`counts per commit: ${counted.sort((a, b) => b[1].n - a[1].n).map(([k, t]) => `${k} ${t.n.toFixed(2)} (idle ${(idle[k]?.n ?? 0).toFixed(2)})`).join(", ")}`);
  return lines;
}

function meanOf(xs: PerCommit[]): PerCommit {
  const m = (f: (p: PerCommit) => number) => xs.reduce((s, p) => s + f(p), 0) / xs.length;
  const stages = meanStages(xs.map((p) => p.stages));
  const idleStages = meanStages(xs.map((p) => p.idleStages));
  const threadsUs: Record<string, number> = {};
  for (const p of xs) for (const [k, v] of Object.entries(p.threadsUs ?? {})) threadsUs[k] = (threadsUs[k] ?? 0) + v / xs.length;
  return { raftRunUs: m((p) => p.raftRunUs), raftWaitUs: m((p) => p.raftWaitUs), processRunUs: m((p) => p.processRunUs), processWaitUs: m((p) => p.processWaitUs), threadsUs, fsyncs: m((p) => p.fsyncs), backgroundFsyncs: m((p) => p.backgroundFsyncs), diskBytes: m((p) => p.diskBytes ?? 0), durableP50Ms: m((p) => p.durableP50Ms ?? 0), raftIdleUs: m((p) => p.raftIdleUs ?? 0), ...(stages ? { stages } : {}), ...(idleStages ? { idleStages } : {}) };
}

/**
 * The Raft threads keep their stage clocks (`brine_raft_stage_clock`) only when asked, BRINE_BENCH_STAGES=1,
 * since the clocks cost CPU on every commit (session 14); the idle part always asks (it counts frames by them).
 */
let raftStages = process.env.BRINE_BENCH_STAGES === "1";
/** BRINE_BENCH_LEADER_WRITE=background: the masters' `brine_raft_leader_write` (the default, "waited", otherwise) */
const leaderWrite = process.env.BRINE_BENCH_LEADER_WRITE === "background" ? "background" : undefined;

function masterConfig(i: number, ports: number[], root: string, raftDir?: (i: number) => string): Partial<MasterConfig> {
  return {
    id: `r${i + 1}`,
    interface: RAFT_HOSTS[i]!,
    cluster_id: "brine-raft-bench",
    cluster_peers: RAFT_HOSTS.map((h, j) => `${h}:${ports[j]}`).filter((_, j) => j !== i),
    cluster_pool_port: ports[i]!,
    cluster_pki_dir: path.join(root, "pki"),
    worker_threads: 1,
    ...(raftDir ? { brine_raft_lmdb_dir: raftDir(i) } : {}),
    ...(raftStages ? { brine_raft_stage_clock: true } : {}),
    ...(leaderWrite ? { brine_raft_leader_write: leaderWrite } : {}),
  };
}


/**
 * raftRun, again (twice at most) when a master could not bind: the ports come from freePort(), and another
 * process may take one between the probe and the bind.
 */
async function raftRunRetried(...args: Parameters<typeof raftRun>): Promise<RaftRun> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await raftRun(...args);
    } catch (e) {
      if (attempt >= 3 || !/EADDRINUSE|already in use/i.test((e as Error).message)) throw e;
    }
  }
}

/**
 * Three masters; `processes`: each in its own process (as deployed: one master per host), else all in this
 * one (their main threads are then one thread). `raftDir(i)`: where master i keeps its Raft LMDB (default:
 * under its cachedir).
 */
async function raftRun(processes: boolean, proposals: number, failovers: number, raftDir?: (i: number) => string, pairs = 0): Promise<RaftRun> {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-raftbench-"));
  const masters: RaftMember[] = [];
  try {
    const ports = await Promise.all(RAFT_HOSTS.map((h) => freePort(h)));
    const starting: Promise<RaftMember>[] = [];
    for (let i = 0; i < 3; i++) {
      const cfg = masterConfig(i, ports, root, raftDir);
      // in one process one after the other (as before); processes at once, as a cluster starts
      if (processes) starting.push(forkMember(cfg.id!, cfg));
      else masters.push(memberOf(await startTestMaster(cfg)));
    }
    masters.push(...(await Promise.all(starting)));
    const leaderOf = async (ms: RaftMember[]) => {
      const ids = await Promise.all(ms.map((m) => m.leader()));
      return ids.every((x) => x !== null && x === ids[0]) ? ids[0]! : undefined;
    };
    const waitLeader = async (ms: RaftMember[], not?: string, timeoutMs = 20_000) => {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const l = await leaderOf(ms);
        if (l && l !== not) return l;
        if (Date.now() > end) throw new Error("no leader");
        await new Promise((r) => setTimeout(r, 2));
      }
    };
    let leader = await waitLeader(masters);
    const byId = (id: string) => masters.find((m) => m.id === id)!;

    // commit latency: one proposal at a time on the leader, timed in the leader's process
    // the Raft threads' background (ticks, heartbeats) with nothing proposed, to tell it from the commits' cost
    const idle0 = await Promise.all(masters.map((m) => m.sched()));
    const idleStart = performance.now();
    await new Promise((r) => setTimeout(r, IDLE_WINDOW_MS));
    const idle1 = await Promise.all(masters.map((m) => m.sched()));
    const idleMs = performance.now() - idleStart;
    // the commits before the warm window; the CPU figures cover the warm window only (the code's warm-up,
    // V8's compiler threads above all, is in the whole run's figures)
    const start = await Promise.all(masters.map((m) => m.sched()));
    const { inWorkerCold, proposed: warmed } = await byId(leader).warm(proposals);
    // BRINE_BENCH_PERF=<dir>: each master's process under `perf record` during the warm window (perfRecord)
    const perfDir = process.env.BRINE_BENCH_PERF;
    const perfs = perfDir ? masters.filter((m) => m.pid).map((m) => perfRecord(m.pid!, path.join(perfDir, `${m.id === leader ? "leader" : "follower"}-${m.id}.data`))) : [];
    const before = await Promise.all(masters.map((m) => m.sched()));
    const windowStart = performance.now();
    const { commits, inWorker, proposed: n } = await byId(leader).measure(proposals);
    const windowMs = performance.now() - windowStart;
    const after = await Promise.all(masters.map((m) => m.sched()));
    for (const p of perfs) await p.stop();
    const per = masters.map((m, i) => {
      const p = perCommit(before[i]!, after[i]!, n);
      const idleRaftNsPerMs = ((idle1[i]!.raft?.runNs ?? 0) - (idle0[i]!.raft?.runNs ?? 0)) / idleMs;
      // the idle stages scaled to the commit window, per commit: what the same stage costs with nothing proposed
      const a = idle0[i]!.stages;
      const b = idle1[i]!.stages;
      const idleStages = a && b ? stageDelta(a, b, (idleMs / windowMs) * n) : undefined;
      return { id: m.id, p: { ...p, raftIdleUs: (idleRaftNsPerMs * windowMs) / 1000 / n, ...(idleStages ? { idleStages } : {}) }, whole: perCommit(start[i]!, after[i]!, warmed + n) };
    });
    const perCommitOf = { leader: per.find((x) => x.id === leader)!.p, followers: meanOf(per.filter((x) => x.id !== leader).map((x) => x.p)) };
    const perCommitWhole = { leader: per.find((x) => x.id === leader)!.whole, followers: meanOf(per.filter((x) => x.id !== leader).map((x) => x.whole)) };
    let proposed = warmed + n;
    let commitPairs: CommitPair[] | undefined;
    if (pairs > 0) {
      // one segment = the worker's latency window (its status' p50 then covers that segment's commits alone)
      const seg = COMMIT_LATENCY_SAMPLES;
      const brine = async (k: number): Promise<BrineSegment> => {
        const a = await Promise.all(masters.map((m) => m.sched()));
        const { inWorker } = await byId(leader).measure(k);
        const b = await Promise.all(masters.map((m) => m.sched()));
        if (!inWorker || inWorker.samples !== k) throw new Error(`the leader's worker timed ${inWorker?.samples ?? 0} commits of a segment of ${k}`);
        const pc = masters.map((_, i) => perCommit(a[i]!, b[i]!, k));
        const fol = pc.filter((_, i) => masters[i]!.id !== leader);
        return { p50Ms: inWorker.p50Ms, leaderRaftUs: pc[masters.findIndex((m) => m.id === leader)]!.raftRunUs, followerRaftUs: median(fol.map((p) => p.raftRunUs)), followerAllUs: median(fol.map((p) => p.processRunUs)) };
      };
      const floor = await openFloor(os.tmpdir(), "zmq");
      try {
        await floor.segment(FLOOR_WARM);
        commitPairs = await interleavedPairs(brine, floor, pairs, seg);
      } finally {
        await floor.close();
      }
      proposed += pairs * seg;
    }
    const reads = await byId(leader).reads(proposals);
    const burstPerS = await byId(leader).burst(BURST_PROPOSALS, BURST_IN_FLIGHT);

    // failover: cut the leader off, time until the others agree on a new one; heal; repeat
    const fo: number[] = [];
    for (let k = 0; k < failovers; k++) {
      const others = masters.filter((m) => m.id !== leader);
      const t0 = Date.now();
      await Promise.all([byId(leader).isolate(others.map((m) => m.id)), ...others.map((o) => o.isolate([leader]))]);
      const next = await waitLeader(others, leader);
      fo.push(Date.now() - t0);
      await Promise.all(masters.map((m) => m.isolate([])));
      leader = await waitLeader(masters);
      await new Promise((r) => setTimeout(r, 500));
      leader = (await leaderOf(masters)) ?? next;
    }
    fo.sort((a, b) => a - b);
    return { commits, reads, burstPerS, inWorker, inWorkerCold, proposed, window: n, failovers: fo, perCommit: perCommitOf, perCommitWhole, ...(commitPairs ? { pairs: commitPairs } : {}) };
  } finally {
    for (const m of masters) await m.stop().catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  }
}

/** What an idle cluster costs (idleRun): per master, its Raft thread's CPU and the Raft frames it sends, per second. */
interface IdleFigures {
  /** the Raft threads' busiest stages per second (wall µs, runs), mean of the three */
  busiest: string[];
  raftUsPerS: number[];
  framesPerS: number[];
  groups: number;
  resting: number;
}

/**
 * An idle three-master cluster with `rings` ring groups hosted by all three (each a Raft group of three
 * voters, like the cluster group): after the commits that found them and a settling time longer than the
 * quiet period before a group rests, each master's Raft thread is sampled over `windowMs` with nothing
 * proposed. What is left is the shared tick and whatever the groups still send each other.
 */
async function idleRun(rings: number, windowMs: number): Promise<IdleFigures> {
  const stagesAsked = raftStages;
  raftStages = true;
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-raftidle-"));
  const masters: RaftMember[] = [];
  try {
    const ports = await Promise.all(RAFT_HOSTS.map((h) => freePort(h)));
    masters.push(...(await Promise.all(RAFT_HOSTS.map((_, i) => masterConfig(i, ports, root)).map((cfg) => forkMember(cfg.id!, cfg)))));
    const leader = await waitAgreedLeader(masters);
    const ids = Array.from({ length: rings }, (_, k) => `idle${k + 1}`);
    await masters.find((m) => m.id === leader)!.rings(ids, masters.map((m) => m.id));
    const want = 1 + rings;
    const end = Date.now() + 60_000;
    while ((await Promise.all(masters.map((m) => m.groups()))).some((gs) => gs.length < want || gs.some((g) => g.role !== "leader" && g.role !== "follower"))) {
      if (Date.now() > end) throw new Error(`the ${rings} ring groups did not start on every master`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await new Promise((r) => setTimeout(r, IDLE_SETTLE_MS));
    const a = await Promise.all(masters.map((m) => m.sched()));
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, windowMs));
    const b = await Promise.all(masters.map((m) => m.sched()));
    const s = (performance.now() - t0) / 1000;
    const groups = (await Promise.all(masters.map((m) => m.groups()))).flat();
    const frames = (x: SchedSample) => x.stages?.["peer.out.raft"]?.n ?? 0;
    // the Raft threads' busiest stages per second (mean of the three), wall µs
    const per = masters.map((_, i) => (a[i]!.stages && b[i]!.stages ? stageDelta(a[i]!.stages!, b[i]!.stages!, s) : {}));
    const stages = meanStages(per) ?? {};
    const busiest = Object.entries(stages)
      .filter(([k, t]) => t.us > 0 && !k.startsWith("loop."))
      .sort((x, y) => y[1].us - x[1].us)
      .slice(0, 5)
      .map(([k, t]) => `${k} ${t.us.toFixed(0)} µs ${t.n.toFixed(1)}×`);
    return {
      busiest,
      raftUsPerS: masters.map((_, i) => ((b[i]!.raft?.runNs ?? 0) - (a[i]!.raft?.runNs ?? 0)) / 1000 / s),
      framesPerS: masters.map((_, i) => (frames(b[i]!) - frames(a[i]!)) / s),
      groups: groups.length,
      resting: groups.filter((g) => g.quiesced).length,
    };
  } finally {
    raftStages = stagesAsked;
    for (const m of masters) await m.stop().catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  }
}

/** how long an idle cluster is left alone before it is sampled (the quiet period before a rest is 1 s), ms */
const IDLE_SETTLE_MS = 3000;

/** The leader all of `ms` agree on, if they do. */
async function agreedLeader(ms: RaftMember[]): Promise<string | undefined> {
  const ids = await Promise.all(ms.map((m) => m.leader()));
  return ids.every((x) => x !== null && x === ids[0]) ? ids[0]! : undefined;
}

async function waitAgreedLeader(ms: RaftMember[], timeoutMs = 30_000): Promise<string> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const l = await agreedLeader(ms);
    if (l) return l;
    if (Date.now() > end) throw new Error("no leader");
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Leader crashes: three master processes; `n` times the leader is killed (`signal`: SIGKILL, a crash; SIGTERM, a
 * graceful stop as the salt-master CLI does it, which hands leadership over first) and the clock runs from
 * the kill to the first proposal that commits in a later term on a survivor (each survivor proposes every
 * 10 ms; its proposals wait for, or are forwarded to, whoever leads); the killed master is then started again
 * from its directories and rejoins before the next round. `election`: the cluster_election_* options.
 */
async function killRun(n: number, election: Partial<MasterConfig>, signal: "SIGKILL" | "SIGTERM" = "SIGKILL"): Promise<number[]> {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-failover-"));
  const members: RaftMember[] = [];
  try {
    const ports = await Promise.all(RAFT_HOSTS.map((h) => freePort(h)));
    const cfgs = RAFT_HOSTS.map((_, i) => ({ ...masterConfig(i, ports, root), ...election }));
    const dirs = cfgs.map((_, i) => path.join(root, `m${i}`));
    members.push(...(await Promise.all(cfgs.map((c, i) => forkMember(c.id!, c, dirs[i])))));
    const times: number[] = [];
    for (let k = 0; k < n; k++) {
      const leader = await waitAgreedLeader(members);
      await new Promise((r) => setTimeout(r, 500)); // steady heartbeats before the crash
      const i = members.findIndex((m) => m.id === leader);
      const term = await members[i]!.term();
      const others = members.filter((_, j) => j !== i);
      const t0 = wallMs();
      const runs = others.map((o) => o.commitAfter(term, 10));
      await members[i]!.kill(signal);
      const first = await Promise.any(runs);
      times.push(first.at - t0);
      await Promise.allSettled(runs);
      members[i] = await forkMember(cfgs[i]!.id!, cfgs[i]!, dirs[i]);
    }
    return times.sort((a, b) => a - b);
  } finally {
    for (const m of members) await m.stop().catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  }
}

/** killRun, again (twice at most) when a master could not bind (see raftRunRetried). */
async function killRunRetried(n: number, election: Partial<MasterConfig>, signal: "SIGKILL" | "SIGTERM" = "SIGKILL"): Promise<number[]> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await killRun(n, election, signal);
    } catch (e) {
      if (attempt >= 3 || !/EADDRINUSE|already in use/i.test((e as Error).message)) throw e;
    }
  }
}

/**
 * The leader's Raft worker's own timing of the same commits: the caller's two thread hops left out. `cold`:
 * the window of the first commits after start.
 */
function inWorkerRow(where: string, l: LatencySummary, cold = false): BenchRow {
  return {
    figure: `  of which: inside the leader's Raft worker${where}, p50`,
    value: l.p50Ms,
    unit: "ms",
    better: "lower",
    note: `proposal taken by the worker → committed by a quorum, applied, answered (its status' window: the last ${l.samples} commits${cold ? ` of the first ${WARM_PROPOSALS} + ${l.samples} or more after start, the code still cold` : `, after ${HOT_PROPOSALS} and more`}); p99 ${l.p99Ms.toFixed(2)} ms`,
  };
}

/** Entries the floor writes before its measured ones when it is the cluster bench's reference: its code as warm as the worker's. */
const FLOOR_WARM = 500;
/** Pairs of segments (brine's, the floor's) measured in turns after the warm window (BRINE_BENCH_PAIRS; 0: none). */
const COMMIT_PAIRS = Number(process.env.BRINE_BENCH_PAIRS ?? 12);
/** The throughput row: proposals on the leader, and how many of them pending at a time. */
const BURST_PROPOSALS = 4000;
const BURST_IN_FLIGHT = 64;

/**
 * The Raft rows. `parts` (env BRINE_BENCH_CLUSTER, comma-separated; default all): `processes` (three master
 * processes, the deployed shape, with failovers), `tmpfs` (the same on tmpfs), `inprocess` (three masters in
 * the bench process, the earlier figure), `idle` (what an idle cluster with ring groups costs, see idleRun),
 * `failover` (the leader killed, see killRun), `swarm` (the returns rows).
 */
async function raftRows(proposals: number, failovers: number, parts: Set<string>): Promise<BenchRow[]> {
  const load = () => `load ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`;
  const rows: BenchRow[] = [];
  let diskP50: number | undefined;
  let fo: number[] = [];
  if (parts.has("processes")) {
    const disk = await raftRunRetried(true, proposals, failovers, undefined, COMMIT_PAIRS);
    diskP50 = pct(disk.commits, 50);
    fo = disk.failovers;
    rows.push(
      { figure: "raft commit over the peer channel (3 master processes), p50", value: diskP50, unit: "ms", target: 2, better: "lower", note: `${proposals} sequential proposals on the leader's main thread (its RaftClient), one master per process as deployed; ${load()}` },
      { figure: "raft commit over the peer channel (3 master processes), p99", value: pct(disk.commits, 99), unit: "ms", better: "lower" },
      { figure: "  of which: linearizable read on the leader, p50", value: pct(disk.reads, 50), unit: "ms", better: "lower", note: "one heartbeat round to a quorum, no write: the peer channel's round trip and the pumps" },
      { figure: `raft commits per second, ${BURST_IN_FLIGHT} in flight (3 master processes)`, value: Math.round(disk.burstPerS), unit: "entries/s", better: "higher", note: `${BURST_PROPOSALS} proposals on the leader's main thread, ${BURST_IN_FLIGHT} pending at a time (each pump iteration commits what queued meanwhile in one transaction); leader's own write: ${leaderWrite ?? "waited"}; ${load()}` },
    );
    if (disk.inWorker) {
      rows.push(inWorkerRow("", disk.inWorker));
      if (disk.inWorkerCold) rows.push(inWorkerRow(", the first commits after start", disk.inWorkerCold, true));
      // issue 17's goal, in one run: the floor (bench/commit-floor.ts, no brine code) measured right after,
      // its own code as warm as the worker's (FLOOR_WARM entries first)
      const fr = await commitFloorRun(os.tmpdir(), proposals, "zmq", FLOOR_WARM);
      const f = pct(fr.lat, 50);
      const cold = disk.inWorkerCold ? `; the first commits after start: ${disk.inWorkerCold.p50Ms.toFixed(3)} ms, ${(disk.inWorkerCold.p50Ms / f).toFixed(2)}× the floor` : "";
      rows.push({ figure: "  inside the leader's Raft worker / the box's commit floor, p50", value: Math.round((disk.inWorker.p50Ms / f) * 100) / 100, unit: "×", target: 1.5, better: "lower", note: `floor ${f.toFixed(3)} ms, p99 ${pct(fr.lat, 99).toFixed(3)} (3 processes, ZeroMQ + fsync'd LMDB, no brine code), measured right after; worker p99 ${disk.inWorker.p99Ms.toFixed(2)} ms (after ${WARM_PROPOSALS + HOT_PROPOSALS + proposals} commits)${cold}; ${load()}` });
      if (disk.pairs && disk.pairs.length > 0) {
        const ps = disk.pairs;
        rows.push(pairsRow(ps, COMMIT_LATENCY_SAMPLES));
        process.stderr.write(`\nCommit p50 in turns with the floor (pair, order, brine inside the leader's worker / floor):\n  ${pairLines(ps).join("\n  ")}\n`);
      }
      const pc = disk.perCommit;
      if (pc) {
        const fmt = (p: PerCommit) => `Raft thread ${p.raftRunUs.toFixed(0)} µs on a CPU (of which ${(p.raftIdleUs ?? 0).toFixed(0)} its idle background) + ${p.raftWaitUs.toFixed(0)} µs waiting for one; all threads ${p.processRunUs.toFixed(0)} + ${p.processWaitUs.toFixed(0)} µs (on a CPU by thread: ${threadsLine(p)}); ${p.fsyncs.toFixed(2)} fsyncs (p50 ${(p.durableP50Ms ?? 0).toFixed(2)} ms each; ${p.backgroundFsyncs.toFixed(2)} in the background); ${((p.diskBytes ?? 0) / 1024).toFixed(1)} KiB to the disk`;
        const w = disk.perCommitWhole;
        const whole = (p: PerCommit | undefined) => (p ? `; over all ${disk.proposed} commits, the code's warm-up included: all threads ${p.processRunUs.toFixed(0)} µs (${threadsLine(p)})` : "");
        rows.push(
          { figure: "  per commit, the leader's master: CPU µs (all threads)", value: Math.round(pc.leader.processRunUs), unit: "µs", better: "lower", note: `${fmt(pc.leader)} (the floor's leader process: ${fr.leaderRunUs.toFixed(0)} µs, its LMDB commit p50 ${fr.leaderTxnP50Ms.toFixed(2)} ms, ${(fr.leaderDiskBytes / 1024).toFixed(1)} KiB to the disk); /proc schedstat over the warm window's ${disk.window} commits${whole(w?.leader)}` },
          { figure: "  per commit, a follower's master: CPU µs (all threads)", value: Math.round(pc.followers.processRunUs), unit: "µs", better: "lower", note: `${fmt(pc.followers)} (the floor's follower process: ${fr.followerRunUs.toFixed(0)} µs, ${(fr.followerDiskBytes / 1024).toFixed(1)} KiB to the disk); mean of the two followers${whole(w?.followers)}` },
        );
        // the Raft thread stage by stage (NodeStatus.stages), on stderr: a table, not a figure
        for (const [who, p] of [["leader", pc.leader], ["follower (mean of 2)", pc.followers]] as const) {
          const lines = stageLines(p);
          if (lines.length > 0) process.stderr.write(`\nRaft thread stages per commit, ${who} (wall µs inside each; nested: raft.encode/peer.enqueue in pump.send*, peer.seal/peer.zmqSend in pump.flush and pump.sendLater, peer.open/raft.decode in peer.in):\n  ${lines.join("\n  ")}\n`);
        }
      }
    }
  }
  const tmp = path.join(TMPFS, `brine-raftbench-${process.pid}`);
  if (parts.has("tmpfs") && existsSync(TMPFS)) {
    try {
      const mem = await raftRunRetried(true, proposals, 0, (i) => path.join(tmp, `m${i}`));
      const p50 = pct(mem.commits, 50);
      rows.push({ figure: "  of which: commit p50 (p99) with the Raft LMDB on tmpfs", value: p50, unit: "ms", better: "lower", note: `p99 ${pct(mem.commits, 99).toFixed(2)} ms; fsync free${diskP50 !== undefined ? `; so fsync is ${(diskP50 - p50).toFixed(2)} ms of the p50 above` : ""}; ${load()}` });
      if (mem.inWorker) rows.push(inWorkerRow(" on tmpfs", mem.inWorker));
      if (mem.inWorkerCold) rows.push(inWorkerRow(" on tmpfs, the first commits after start", mem.inWorkerCold, true));
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  if (parts.has("processes")) {
    const fsDir = mkdtempSync(path.join(os.tmpdir(), "brine-raftbench-fsync-"));
    try {
      rows.push({ figure: "  of which: raw LMDB durable commit p50 (this disk)", value: await rawLmdbCommitMs(fsDir, 200), unit: "ms", better: "lower", note: "one small put, overlappingSync off, as the Raft environment" });
    } finally {
      rmSync(fsDir, { recursive: true, force: true });
    }
  }
  if (parts.has("inprocess")) {
    const one = await raftRunRetried(false, proposals, 0);
    rows.push(
      { figure: "raft commit, 3 masters in ONE process, p50", value: pct(one.commits, 50), unit: "ms", better: "lower", note: `not a deployment: the three main threads are one thread; p99 ${pct(one.commits, 99).toFixed(2)} ms, read p50 ${pct(one.reads, 50).toFixed(2)} ms; ${load()}` },
    );
  }
  if (fo.length > 0) rows.push({ figure: "leader failover (leader cut off), median", value: pct(fo, 50), unit: "ms", target: 1000, better: "lower", note: `${failovers} failovers, max ${fo.at(-1)} ms; election timeout 500-1000 ms` });
  if (parts.has("idle")) {
    // BRINE_BENCH_IDLE_RINGS: ring groups beside the cluster group (default 3)
    const rings = Number(process.env.BRINE_BENCH_IDLE_RINGS ?? 3);
    const windowMs = 10_000;
    const f = await idleRun(rings, windowMs);
    const mean = (xs: number[]) => xs.reduce((x, y) => x + y, 0) / xs.length;
    rows.push({ figure: `idle cluster (3 masters, ${rings} ring groups): Raft thread CPU per master`, value: Math.round(mean(f.raftUsPerS)), unit: "µs/s", better: "lower", note: `per master ${f.raftUsPerS.map((x) => x.toFixed(0)).join(" / ")} µs of CPU per second, ${f.framesPerS.map((x) => x.toFixed(1)).join(" / ")} Raft frames sent per second; ${f.resting} of ${f.groups} group replicas resting; busiest stages per second: ${f.busiest.join(", ")}; ${windowMs / 1000} s with nothing proposed, after ${IDLE_SETTLE_MS / 1000} s of settling; ${load()}` });
  }
  if (parts.has("failover")) {
    // at the default election timeout (cluster_election_min 500: 500-1000 ms; Salt 3008: 750-1500, etcd: 1000):
    // a crash, noticed by the survivors when its connections drop, and a graceful stop, which hands over first
    // BRINE_BENCH_KILLS: kills per signal; BRINE_BENCH_SIGNALS: which (comma-separated)
    const kills = Number(process.env.BRINE_BENCH_KILLS ?? 20);
    const signals = (process.env.BRINE_BENCH_SIGNALS ?? "SIGKILL,SIGTERM").split(",").filter((x): x is "SIGKILL" | "SIGTERM" => x === "SIGKILL" || x === "SIGTERM");
    for (const signal of signals) {
      const t = await killRunRetried(kills, {}, signal);
      const what = signal === "SIGKILL" ? "leader crash (SIGKILL)" : "leader stopped (SIGTERM)";
      rows.push({ figure: `${what} to a new leader's commit, median`, value: round2(pct(t, 50)), unit: "ms", target: 500, better: "lower", note: `${t.length} ${signal}s of the leader of 3 master processes; min ${round2(t[0]!)}, p90 ${round2(pct(t, 90))}, max ${round2(t.at(-1)!)} ms; default election timeout 500-1000 ms, heartbeat 50 ms; ${load()}` });
    }
  }
  return rows;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const n = opts.full ? 3000 : 600;
  const parts = new Set((process.env.BRINE_BENCH_CLUSTER ?? "processes,tmpfs,inprocess,idle,failover,swarm").split(",").map((x) => x.trim()));
  const rows: BenchRow[] = [];
  rows.push(...(await raftRows(opts.full ? 2000 : 500, opts.full ? 10 : 5, parts)));
  if (parts.has("swarm")) rows.push(...(await returnsRows(n, opts.full ? 5 : 3)));
  return rows;
}
