/**
 * The master-cluster benchmark.
 *
 * 1. Returns/s: brine-swarm's `ping` scenario (N minions, a few jobs one after the other) against one brine
 *    master, then against three masters (own processes on 127.0.0.11-13) behind a real HAProxy on
 *    127.0.0.1:4505/4506 — the same machine runs every master, HAProxy and the swarm, so the figure says what
 *    the cluster costs on one box more than what it gains on three.
 * 2. Raft over the real peer channel (ZeroMQ + libsodium sessions, LMDB fsync on every node): three masters in
 *    this process on 127.0.0.31-33; commit latency of sequential proposals on the leader (p50, p99), and the
 *    leader-failover time: the leader is cut off from its peers (ClusterService.isolate, as a partition or a
 *    crash looks to the others) and the clock runs until both others agree on a new leader.
 *    What the commit latency is made of: a commit is the leader's append (its own fsync in parallel) → a
 *    follower's fsync → the acknowledgement back → apply. The same run with the Raft LMDB on tmpfs (fsync
 *    free) gives the part that is not fsync; a linearizable read on the leader (one heartbeat round to a
 *    quorum, no write) gives the round trip through the peer channel and the pumps alone; the raw LMDB
 *    commit is this disk's fsync.
 *
 * Skips (with a note row) what cannot run here: no haproxy, ports taken.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { runSwarm } from "../src/swarm/swarm.js";
import type { SwarmReport } from "../src/swarm/report.js";
import { ClusterHarness, skipReason } from "../src/cluster/local-cluster.js";
import { CLUSTER_RING } from "../src/shared/sab-ring/layout.js";
import { startTestMaster, freePort, type TestMaster } from "../test/helpers/master.js";
import { startBrineMaster } from "./swarm.js";
import { rawLmdbCommitMs } from "./raft-worker.js";
import type { BenchOptions, BenchRow } from "./types.js";

const LB = "127.0.0.1";
const HOSTS = ["127.0.0.11", "127.0.0.12", "127.0.0.13"];
const RAFT_HOSTS = ["127.0.0.31", "127.0.0.32", "127.0.0.33"];

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
  /** leader failovers, ms, sorted */
  failovers: number[];
}

/** Three masters in this process; `raftDir(i)`: where master i keeps its Raft LMDB (default: under its cachedir). */
async function raftRun(proposals: number, failovers: number, raftDir?: (i: number) => string): Promise<RaftRun> {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-raftbench-"));
  const masters: TestMaster[] = [];
  try {
    const ports = await Promise.all(RAFT_HOSTS.map((h) => freePort(h)));
    for (let i = 0; i < 3; i++) {
      masters.push(
        await startTestMaster({
          id: `r${i + 1}`,
          interface: RAFT_HOSTS[i]!,
          cluster_id: "brine-raft-bench",
          cluster_peers: RAFT_HOSTS.map((h, j) => `${h}:${ports[j]}`).filter((_, j) => j !== i),
          cluster_pool_port: ports[i]!,
          cluster_pki_dir: path.join(root, "pki"),
          worker_threads: 1,
          ...(raftDir ? { brine_raft_lmdb_dir: raftDir(i) } : {}),
        }),
      );
    }
    const leaderOf = async (ms: TestMaster[]) => {
      const st = await Promise.all(ms.map((m) => m.server.clusterNode!.raft.status()));
      const ids = st.map((s) => s.groups.find((g) => g.group === CLUSTER_RING)?.leaderId ?? null);
      return ids.every((x) => x !== null && x === ids[0]) ? ids[0]! : undefined;
    };
    const waitLeader = async (ms: TestMaster[], not?: string, timeoutMs = 20_000) => {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const l = await leaderOf(ms);
        if (l && l !== not) return l;
        if (Date.now() > end) throw new Error("no leader");
        await new Promise((r) => setTimeout(r, 2));
      }
    };
    let leader = await waitLeader(masters);
    const byId = (id: string) => masters.find((m) => m.cfg.id === id)!;

    // commit latency: one proposal at a time on the leader
    const raft = byId(leader).server.clusterNode!.raft;
    for (let i = 0; i < 20; i++) await raft.propose(CLUSTER_RING, { kind: "ROUTE", value: { data_type: "bench", ring_id: null } });
    const lat: number[] = [];
    for (let i = 0; i < proposals; i++) {
      const t0 = process.hrtime.bigint();
      await raft.propose(CLUSTER_RING, { kind: "ROUTE", value: { data_type: `bench${i % 8}`, ring_id: null } });
      lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    lat.sort((a, b) => a - b);
    // one heartbeat round to a quorum, nothing written: the peer channel's round trip plus the pumps
    const reads: number[] = [];
    for (let i = 0; i < proposals; i++) {
      const t0 = process.hrtime.bigint();
      await raft.read(CLUSTER_RING, "routing");
      reads.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    reads.sort((a, b) => a - b);

    // failover: cut the leader off, time until the others agree on a new one; heal; repeat
    const fo: number[] = [];
    for (let k = 0; k < failovers; k++) {
      const others = masters.filter((m) => m.cfg.id !== leader);
      const t0 = Date.now();
      byId(leader).server.clusterService!.isolate(others.map((m) => m.cfg.id));
      for (const o of others) o.server.clusterService!.isolate([leader]);
      const next = await waitLeader(others, leader);
      fo.push(Date.now() - t0);
      for (const m of masters) m.server.clusterService!.isolate([]);
      leader = await waitLeader(masters);
      await new Promise((r) => setTimeout(r, 500));
      leader = (await leaderOf(masters)) ?? next;
    }
    fo.sort((a, b) => a - b);
    return { commits: lat, reads, failovers: fo };
  } finally {
    for (const m of masters) await m.stop().catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  }
}

async function raftRows(proposals: number, failovers: number): Promise<BenchRow[]> {
  const load = () => `load ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} cores`;
  const disk = await raftRun(proposals, failovers);
  const diskLoad = load();
  const rows: BenchRow[] = [
    { figure: "raft commit over the peer channel (3 masters), p50", value: pct(disk.commits, 50), unit: "ms", target: 2, better: "lower", note: `${proposals} sequential proposals on the leader; leader fsync in parallel with the follower's, commit index written lazily; ${diskLoad}` },
    { figure: "raft commit over the peer channel (3 masters), p99", value: pct(disk.commits, 99), unit: "ms", better: "lower" },
    { figure: "  of which: linearizable read on the leader, p50", value: pct(disk.reads, 50), unit: "ms", better: "lower", note: "one heartbeat round to a quorum, no write: the peer channel's round trip and the pumps" },
  ];
  const tmp = path.join(TMPFS, `brine-raftbench-${process.pid}`);
  if (existsSync(TMPFS)) {
    try {
      const mem = await raftRun(proposals, 0, (i) => path.join(tmp, `m${i}`));
      const p50 = pct(mem.commits, 50);
      rows.push({ figure: "  of which: commit p50 with the Raft LMDB on tmpfs", value: p50, unit: "ms", better: "lower", note: `fsync free; so fsync is ${(pct(disk.commits, 50) - p50).toFixed(2)} ms of the p50 above; ${load()}` });
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  const fsDir = mkdtempSync(path.join(os.tmpdir(), "brine-raftbench-fsync-"));
  try {
    rows.push({ figure: "  of which: raw LMDB durable commit p50 (this disk)", value: await rawLmdbCommitMs(fsDir, 200), unit: "ms", better: "lower", note: "one small put, overlappingSync off, as the Raft environment" });
  } finally {
    rmSync(fsDir, { recursive: true, force: true });
  }
  rows.push({ figure: "leader failover (leader cut off), median", value: pct(disk.failovers, 50), unit: "ms", target: 1000, better: "lower", note: `${failovers} failovers, max ${disk.failovers.at(-1)} ms; election timeout 500-1000 ms` });
  return rows;
}

export async function run(opts: BenchOptions): Promise<BenchRow[]> {
  const n = opts.full ? 3000 : 600;
  const rows: BenchRow[] = [];
  rows.push(...(await raftRows(opts.full ? 2000 : 500, opts.full ? 10 : 5)));
  rows.push(...(await returnsRows(n, opts.full ? 5 : 3)));
  return rows;
}
