/**
 * One master of the cluster bench's Raft run (bench/cluster.ts), wherever it lives: in the bench's process
 * (memberOf) or in a process of its own as deployed (forkMember: this file in `--raft-master` mode, driven
 * over the IPC channel); what the bench asks of it (RaftMember) and the timing that runs in its process.
 */
import { fork } from "node:child_process";
import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { MasterConfig } from "../src/shared/config/defaults.js";
import { CLUSTER_RING } from "../src/shared/sab-ring/layout.js";
import { startTestMaster, type TestMaster } from "../test/helpers/master.js";
import { diskWriteBytes } from "./commit-floor.js";
import { processSched } from "./thread-sched.js";
import type { NodeStatus } from "../src/workers/raft/api.js";
import type { LatencySummary } from "../src/shared/metrics/latency-window.js";
import type { StageTotals } from "../src/shared/metrics/stage-clock.js";

/** A master's counters at one moment (see PerCommit). */
export interface SchedSample {
  raft?: { runNs: number; waitNs: number };
  stages?: StageTotals;
  /** the Raft worker's durable commits (LMDB transaction + fsync), its last 256 */
  durableCommit?: LatencySummary;
  process: { runNs: number; waitNs: number; byName: Record<string, number> };
  fsyncs: number;
  /** of them, a leader's own appends committed in the background (`brine_raft_leader_write: background`) */
  backgroundCommits: number;
  /** /proc/self/io write_bytes: what the process sent to the block layer so far */
  diskBytes?: number;
}



export async function schedOf(raft: Proposer): Promise<SchedSample> {
  const st = await raft.status();
  return { ...(st.thread ? { raft: st.thread } : {}), ...(st.stages ? { stages: st.stages } : {}), ...(st.durableCommit ? { durableCommit: st.durableCommit } : {}), process: processSched(), fsyncs: st.commits, backgroundCommits: st.backgroundCommits, diskBytes: diskWriteBytes() };
}

/** What the measurement needs of the leader's Raft worker client (RaftClient). */
export interface Proposer {
  propose(group: string, entry: { kind: "ROUTE"; value: { data_type: string; ring_id: null } } | { kind: "RING_REGISTRY"; value: { ring_id: string; founding_voters: string[] } }): Promise<unknown>;
  read(group: string, query: "routing"): Promise<unknown>;
  status(): Promise<NodeStatus>;
}

/** The commits on the leader before its warm window: the cold window's figure. */
export interface Warmed {
  /** the leader's Raft worker's own view of the first commits after start (the code not yet optimised by V8) */
  inWorkerCold: LatencySummary | undefined;
  /** proposals made */
  proposed: number;
}

/** The warm window on the leader. */
export interface Measured {
  /** commit latencies timed by the caller on the leader's main thread, ms, sorted */
  commits: number[];
  /** the leader's Raft worker's own view of them (proposal taken → result) */
  inWorker: LatencySummary | undefined;
  /** proposals made (the per-commit CPU figures cover them) */
  proposed: number;
}

/** Proposals made before the cold window (the first commits after start, the code still cold). */
export const WARM_PROPOSALS = 20;
/**
 * Proposals between the cold window and the warm one: V8 optimises the commit path's functions only after
 * enough calls (a commit runs a few hundred JS functions once each), and the first few hundred commits after
 * start run much of it in the interpreter and baseline code. The warm window is what a master that commits
 * steadily pays; one that commits rarely runs colder code, closer to the cold window's figure. 6,000: after
 * 1,500 (the count until session 16) V8's compiler threads still spent 120-350 µs per commit of a follower's
 * warm window (TurboFan compiling the commit path's functions, by perf), after 6,000 they are done (20-45 µs
 * per commit left in V8's and libuv's threads; bench/RESULTS.md, session 16). BRINE_BENCH_HOT sets another
 * count (the masters inherit the bench's environment).
 */
export const HOT_PROPOSALS = Number(process.env.BRINE_BENCH_HOT ?? 6000);

const proposeRoute = (raft: Proposer, i: number) => raft.propose(CLUSTER_RING, { kind: "ROUTE", value: { data_type: `bench${i % 8}`, ring_id: null } });

/**
 * WARM_PROPOSALS sequential proposals, then `n` (the cold window), then HOT_PROPOSALS more. Runs in the process
 * of the master whose client it is: in a master process, on its main thread.
 */
async function warmCommits(raft: Proposer, n: number): Promise<Warmed> {
  for (let i = 0; i < WARM_PROPOSALS; i++) await proposeRoute(raft, i);
  for (let i = 0; i < n; i++) await proposeRoute(raft, i);
  const inWorkerCold = (await raft.status()).groups.find((g) => g.group === CLUSTER_RING)?.commitLatency;
  for (let i = 0; i < HOT_PROPOSALS; i++) await proposeRoute(raft, i);
  return { inWorkerCold, proposed: WARM_PROPOSALS + n + HOT_PROPOSALS };
}

/** `n` sequential proposals after warmCommits (the warm window), each timed on the calling thread (ms, sorted). */
async function windowCommits(raft: Proposer, n: number): Promise<Measured> {
  const commits: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await proposeRoute(raft, i);
    commits.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const inWorker = (await raft.status()).groups.find((g) => g.group === CLUSTER_RING)?.commitLatency;
  return { commits: commits.sort((a, b) => a - b), inWorker, proposed: n };
}

/** `n` sequential linearizable reads (one heartbeat round to a quorum, nothing written), ms, sorted. */
async function timeReads(raft: Proposer, n: number): Promise<number[]> {
  const reads: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    await raft.read(CLUSTER_RING, "routing");
    reads.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  return reads.sort((a, b) => a - b);
}

/** `n` proposals with `inFlight` of them pending at any time: committed entries per second on the calling thread. */
async function burstCommits(raft: Proposer, n: number, inFlight: number): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  const lane = async () => {
    while (next < n) await proposeRoute(raft, next++);
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  return n / ((performance.now() - t0) / 1000);
}

/** One master of the Raft run, wherever it lives. */
export interface RaftMember {
  id: string;
  /** its process, when it has one of its own */
  pid?: number;
  /** the cluster group's leader as this master sees it */
  leader(): Promise<string | null>;
  /** on the leader: the commits before the warm window (warmCommits) */
  warm(n: number): Promise<Warmed>;
  /** on the leader, after warm(n): the warm window (windowCommits) */
  measure(n: number): Promise<Measured>;
  reads(n: number): Promise<number[]>;
  /** on the leader: `n` proposals, `inFlight` at a time; committed entries per second (burstCommits) */
  burst(n: number, inFlight: number): Promise<number>;
  /** this master's CPU and fsync counters now (SchedSample) */
  sched(): Promise<SchedSample>;
  isolate(ids: string[]): Promise<void>;
  /**
   * Proposes every `everyMs` until one proposal commits in a term after `term` (a new leader's commit);
   * resolves with the wall-clock time of that commit (ms since the epoch, sub-ms) and its term.
   */
  commitAfter(term: number, everyMs: number): Promise<{ at: number; term: number }>;
  /** the cluster group's term as this master sees it */
  term(): Promise<number>;
  /** founds ring groups `ids` with `founders` (RING_REGISTRY entries, proposed on this master) */
  rings(ids: string[], founders: string[]): Promise<void>;
  /** this master's Raft groups: which, whether they rest */
  groups(): Promise<{ group: string; role: string; quiesced: boolean }[]>;
  /** SIGKILL (a crash) or SIGTERM (a graceful stop, as the salt-master CLI handles it); processes only */
  kill(signal?: "SIGKILL" | "SIGTERM"): Promise<void>;
  stop(): Promise<void>;
}


export function memberOf(m: TestMaster): RaftMember {
  return {
    id: m.cfg.id,
    leader: async () => (await m.server.clusterNode!.raft.status()).groups.find((g) => g.group === CLUSTER_RING)?.leaderId ?? null,
    warm: (n) => warmCommits(m.server.clusterNode!.raft, n),
    measure: (n) => windowCommits(m.server.clusterNode!.raft, n),
    reads: (n) => timeReads(m.server.clusterNode!.raft, n),
    burst: (n, inFlight) => burstCommits(m.server.clusterNode!.raft, n, inFlight),
    sched: () => schedOf(m.server.clusterNode!.raft),
    isolate: async (ids) => m.server.clusterService!.isolate(ids),
    commitAfter: (term, everyMs) => commitAfter(m.server.clusterNode!.raft, term, everyMs),
    term: async () => (await m.server.clusterNode!.raft.status()).groups.find((g) => g.group === CLUSTER_RING)?.term ?? 0,
    rings: async (ids, founders) => {
      for (const ring_id of ids) await m.server.clusterNode!.raft.propose(CLUSTER_RING, { kind: "RING_REGISTRY", value: { ring_id, founding_voters: founders } });
    },
    groups: async () => (await m.server.clusterNode!.raft.status()).groups.map((g) => ({ group: g.group, role: g.role, quiesced: g.quiesced })),
    kill: () => Promise.reject(new Error("kill: a master in the bench process cannot be killed alone")),
    stop: () => m.stop(),
  };
}

/** The wall clock, ms since the epoch with sub-ms precision (comparable between processes on one box). */
export const wallMs = (): number => performance.timeOrigin + performance.now();

/** See RaftMember.commitAfter: proposals on this master (forwarded to whoever leads), one every `everyMs`. */
async function commitAfter(raft: Proposer, term: number, everyMs: number): Promise<{ at: number; term: number }> {
  return new Promise((resolve, reject) => {
    let done = false;
    const give = setTimeout(() => finish(new Error("no commit in a new term within 30 s")), 30_000);
    const finish = (r: { at: number; term: number } | Error) => {
      if (done) return;
      done = true;
      clearInterval(every);
      clearTimeout(give);
      if (r instanceof Error) reject(r);
      else resolve(r);
    };
    const one = () =>
      raft.propose(CLUSTER_RING, { kind: "ROUTE", value: { data_type: "failover", ring_id: null } }).then(
        (r) => {
          const t = (r as { term: number }).term;
          if (t > term) finish({ at: wallMs(), term: t });
        },
        () => undefined, // no leader yet, forwarded to the dead one, or timed out: the next one is on its way
      );
    const every = setInterval(one, everyMs);
    void one();
  });
}

/** Requests to a master process (the `--raft-master` mode of this file) and their answers. */
type ChildOp = { op: "leader" } | { op: "term" } | { op: "warm"; n: number } | { op: "measure"; n: number } | { op: "reads"; n: number } | { op: "burst"; n: number; inFlight: number } | { op: "sched" } | { op: "isolate"; ids: string[] } | { op: "commitAfter"; term: number; everyMs: number } | { op: "rings"; ids: string[]; founders: string[] } | { op: "groups" } | { op: "stop" };
type ChildCall = ChildOp & { seq: number };
type ChildAnswer = { seq: number; ok: true; value: unknown } | { seq: number; ok: false; error: string } | { ready: true } | { failed: string };

/** Master i as its own process (this file in `--raft-master` mode), driven over the IPC channel. */
export async function forkMember(id: string, cfg: Partial<MasterConfig>, root?: string): Promise<RaftMember> {
  const child = fork(fileURLToPath(import.meta.url), ["--raft-master", JSON.stringify(cfg), ...(root ? [root] : [])], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  const waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  let seq = 0;
  await new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`master ${id} exited (${code}) while starting`)));
    child.on("message", (a: ChildAnswer) => {
      if ("ready" in a) return resolve();
      if ("failed" in a) return reject(new Error(`master ${id}: ${a.failed}`));
      const w = waiting.get(a.seq);
      waiting.delete(a.seq);
      if (a.ok) w?.resolve(a.value);
      else w?.reject(new Error(`master ${id}: ${a.error}`));
    });
  });
  child.removeAllListeners("exit");
  const call = <T>(c: ChildOp): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      const s = ++seq;
      waiting.set(s, { resolve, reject });
      child.send({ ...c, seq: s });
    });
  return {
    id,
    ...(child.pid ? { pid: child.pid } : {}),
    leader: () => call({ op: "leader" }),
    warm: (n) => call({ op: "warm", n }),
    measure: (n) => call({ op: "measure", n }),
    reads: (n) => call({ op: "reads", n }),
    burst: (n, inFlight) => call({ op: "burst", n, inFlight }),
    sched: () => call({ op: "sched" }),
    isolate: (ids) => call({ op: "isolate", ids }),
    commitAfter: (term, everyMs) => call({ op: "commitAfter", term, everyMs }),
    term: () => call({ op: "term" }),
    rings: (ids, founders) => call({ op: "rings", ids, founders }),
    groups: () => call({ op: "groups" }),
    kill: async (signal = "SIGKILL") => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      child.kill(signal);
      await exited;
    },
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once("exit", r));
      // a master that does not stop in time is killed: the bench never leaves one behind
      const kill = setTimeout(() => child.kill("SIGKILL"), 20_000);
      await Promise.race([call({ op: "stop" }).catch(() => undefined), exited]);
      await exited;
      clearTimeout(kill);
    },
  };
}

/** `--raft-master CONFIG`: one master in this process, answering the parent's calls (forkMember). */
async function childMain(cfg: Partial<MasterConfig>, root?: string): Promise<void> {
  const send = (a: ChildAnswer) => process.send!(a);
  let m: TestMaster;
  try {
    if (root) mkdirSync(root, { recursive: true });
    m = await startTestMaster(cfg, root);
  } catch (e) {
    send({ failed: (e as Error).message });
    process.exit(1);
  }
  const me = memberOf(m);
  process.on("message", (c: ChildCall) => {
    const run = async (): Promise<unknown> => {
      switch (c.op) {
        case "leader":
          return me.leader();
        case "warm":
          return me.warm(c.n);
        case "measure":
          return me.measure(c.n);
        case "reads":
          return me.reads(c.n);
        case "burst":
          return me.burst(c.n, c.inFlight);
        case "sched":
          return me.sched();
        case "isolate":
          return me.isolate(c.ids);
        case "term":
          return me.term();
        case "commitAfter":
          return me.commitAfter(c.term, c.everyMs);
        case "rings":
          return me.rings(c.ids, c.founders);
        case "groups":
          return me.groups();
        case "stop":
          await me.stop();
          return null;
      }
    };
    run().then(
      (value) => {
        send({ seq: c.seq, ok: true, value: value ?? null });
        if (c.op === "stop") process.disconnect();
      },
      (e: Error) => send({ seq: c.seq, ok: false, error: e.message }),
    );
  });
  process.once("disconnect", () => setTimeout(() => process.exit(0), 100).unref());
  // SIGTERM stops the master as the salt-master CLI does (stopOnSignals): a graceful stop, then exit
  // (its files are kept: the bench starts it again from them)
  process.once("SIGTERM", () => void m.stop(true).finally(() => process.exit(0)));
  send({ ready: true });
}

if (process.argv[2] === "--raft-master" && process.send) void childMain(JSON.parse(process.argv[3]!) as Partial<MasterConfig>, process.argv[4]);
