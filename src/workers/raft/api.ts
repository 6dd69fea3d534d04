/**
 * The Raft worker's messages, as the main thread and runner threads call it (one port each), in the one RPC
 * style between brine's threads (src/shared/port-calls.ts, docs/ARCHITECTURE.md "One RPC style"): a call is
 * `{k, id, ...}`, answered by `{k: "res", id, v}` or `{k: "err", id, code, text}`, so a BrineError keeps its
 * code across the thread boundary. RaftClient (client.ts) is the calling side; worker.ts serves it.
 */
import type { ListJobsFilter } from "../../lib/store/job-filter.js";
import type { StageTotals } from "../../shared/metrics/stage-clock.js";
import type { LeaderView } from "./leader-progress.js";
import type { ErrCode } from "../../shared/errors.js";
import type { PortError } from "../../shared/port-calls.js";
import type { ClusterEntry } from "./state-machines/entries.js";
import type { ConfChangeKind, Role } from "./core/types.js";
import type { MessagePort } from "node:worker_threads";
import type { GroupKind } from "./backend.js";
import type { LatencyHistogram, LatencySummary } from "../../shared/metrics/latency-window.js";
import type { HeldJobsAnswer } from "./held-jobs.js";
import type { ClusterJob, ClusterJobList } from "./job-placement.js";
import type { MinionAnswer, MinionQuery } from "../../shared/minion-placement.js";
import type { ShedArgs, ShedResult } from "../../lib/store/shed.js";
import type { JoinAttempt } from "./join-host.js";

/** entries in one `propose` call, count (bounds one structured-clone message) */
export const proposeEntriesMax = 10_000;

/** A membership change of one group, by stable node id (one at a time: thesis §4.1). */
export interface MembershipChange {
  kind: ConfChangeKind;
  node_id: string;
}

/** What applying a committed entry did to the group's state machines (apply.ts), when known. */
export type AppliedAs = "applied" | "refused" | "stale" | "unknown";

/**
 * A committed proposal. Unlike Salt's fan-out runners, the caller learns that the entry committed, where,
 * and whether the state machines took it (a valid entry can still be refused against the current state,
 * e.g. re-founding an active ring with other founders).
 */
export interface ProposeResult {
  group: string;
  index: number;
  term: number;
  /** the entry (or change) as proposed */
  value: ClusterEntry | MembershipChange;
  applied: AppliedAs;
  refusal?: { code: ErrCode; message: string };
}

/** A ProposeResult without the echo of what the caller already holds (what proposeMany sends back). */
export type ProposeReceipt = Omit<ProposeResult, "value">;

/**
 * What a read returns, by group kind:
 *   cluster: "membership" (MembershipSnapshot), "registry" (RingRegistrySnapshot), "routing" (RoutingSnapshot)
 *   ring:    "membership", "ring_config" (RingConfigSnapshot)
 */
export type ReadQuery = "membership" | "registry" | "routing" | "ring_config";

export interface ReadOptions {
  /**
   * Serve this node's applied state without a ReadIndex round: possibly stale, but available without a
   * leader. Default false (linearizable).
   */
  stale?: boolean;
}

export interface ReadResult {
  group: string;
  /** the read index (linearizable) or this node's applied index (stale) the value reflects at least */
  index: number;
  linearizable: boolean;
  value: unknown;
}

export interface GroupStatus {
  group: string;
  kind: GroupKind;
  role: Role;
  /** stable node id of the leader this node knows, null if none */
  leaderId: string | null;
  term: number;
  commit: number;
  applied: number;
  firstIndex: number;
  lastIndex: number;
  snapshotIndex: number;
  voters: string[];
  learners: string[];
  /** the group's ring epoch in its replicated ring table */
  ringEpoch: number;
  quiesced: boolean;
  pendingRequests: number;
  /**
   * the last COMMIT_LATENCY_SAMPLES proposals made on this node that committed: from the worker taking the
   * proposal to its result (committed by a quorum, applied here); absent before the first
   */
  commitLatency?: LatencySummary;
  /** every proposal made on this node that committed, in fixed buckets (the metrics endpoint) */
  commitHistogram?: LatencyHistogram;
  /** elections this node started for the group (became candidate) since the worker started */
  elections?: number;
  /** leader only: how it replicates to each other member (probe: one append per answer; replicate: pipelined) */
  progress?: Record<string, { state: "probe" | "replicate" | "snapshot"; match: number; next: number }>;
}

/**
 * How a leader writes its own new entries, once its appends have left (`brine_raft_leader_write`):
 * - "waited": on the Raft thread, one synchronous transaction, as a follower writes (and as the floor's leader
 *   does in bench/commit-floor.ts). The thread is blocked for the fsync; its followers' answers wait in the
 *   socket meanwhile, and the commit needs the leader's copy or the second follower's anyway.
 * - "background": one lmdb-js batch, committed and fsynced on LMDB's write thread while the Raft thread reads
 *   its followers' answers (Raft thesis §10.2.1). Two thread hops more (there and back); on a box of two shared
 *   cores each waits for a CPU, and the leader's fsync then took 1.0-1.5 ms at the p50 against 0.7-1.0 ms
 *   waited for (bench/RESULTS.md, session 22). It pays where the leader's disk is the slow one: its followers
 *   commit without it.
 */
export type LeaderWrite = "waited" | "background";

export interface NodeStatus {
  nodeId: string;
  raftId: number;
  tickMs: number;
  groups: GroupStatus[];
  /** last error from publishing to the shared ring buffer, null if none */
  ringError: string | null;
  /** durable commits (fsyncs) since start, and log entries they carried: the group-commit ratio */
  commits: number;
  entriesWritten: number;
  /** the last durable commits' duration (one LMDB transaction, its fsync included): p50, p99 over them, ms */
  durableCommit?: LatencySummary;
  /** how a leader writes its own new entries (`brine_raft_leader_write`), and how many commits went in the background */
  leaderWrite: LeaderWrite;
  backgroundCommits: number;
  /**
   * The Raft worker thread's scheduler figures since it started (Linux /proc/thread-self/schedstat), ns:
   * time on a CPU, and time runnable but waiting for one (a starved Raft thread shows here). Absent elsewhere.
   */
  thread?: { runNs: number; waitNs: number };
  /**
   * Where the Raft thread's time went since it started, stage by stage (src/shared/metrics/stage-clock.ts):
   * µs of wall time inside each and how often it ran; `loop.active`/`loop.idle` are the event loop's
   * utilisation. Nested stages (raft.encode and peer.enqueue inside a pump send, peer.seal and peer.zmqSend
   * inside pump.flush or pump.sendLater, peer.open and raft.decode inside peer.in) count in their parent too. Absent from a GroupManager's own status (the worker adds it).
   */
  stages?: StageTotals;
}

/**
 * What a caller posts to the Raft worker (its parentPort, or a port handed over with `connect`). Every call
 * has an `id` and is answered by a `FromRaft` with the same id; `connect` is one-way.
 */
export type ToRaft =
  /** answered once the worker has restored every group from disk and published the ring: NodeStatus */
  | { k: "ready"; id: number }
  /**
   * Each entry becomes its own log entry, in one message (one each way instead of one per entry); at most
   * proposeEntriesMax entries. Answered with EntryOutcome[] in order; the call itself fails only as a whole
   * (too many, unknown group before any entry, worker stopping).
   */
  | { k: "propose"; id: number; group: string; entries: ClusterEntry[] }
  /** a membership change: ProposeResult */
  | { k: "member"; id: number; group: string; change: MembershipChange }
  | { k: "read"; id: number; group: string; query: ReadQuery; opts: ReadOptions }
  | { k: "status"; id: number }
  /** founds the cluster group with these voters if this node has none yet: false if it already had one */
  | { k: "bootstrap"; id: number; founders: string[] }
  /** hosts an empty cluster group that a leader will fill (joining an existing cluster): false if one existed */
  | { k: "join"; id: number }
  /**
   * The jids each master of the cluster holds in its job cache (this one and every other member of group
   * "cluster", asked over the peer channel; held-jobs.ts), newest `max` each; a master that could not be
   * asked has {error}. Single master or no peer channel: only this one. Record<nodeId, HeldJobsAnswer>.
   */
  | { k: "jobsHeld"; id: number; max: number }
  /**
   * One isolated-filesystem join exchange through the peer at host:port (join-host.ts): admitted (the keys,
   * cluster.pem and the AES key are installed), no cluster there, refused (by which side, why), or unreachable.
   */
  | { k: "joinAttempt"; id: number; host: string; port: number; timeoutMs: number }
  /**
   * One job as the cluster holds it: this master's copy merged with every other member's (peer channel
   * `raft/placement`, job-placement.ts), with the masters that could not be asked. For the jobs.* runners.
   */
  | { k: "jobRead"; id: number; jid: string }
  /** every member's newest `max` jobs (load, expected minions, end time), merged by jid: ClusterJobList */
  | { k: "jobList"; id: number; max: number; filter?: ListJobsFilter }
  /**
   * The cluster's minion data (grains/pillar, mine) wherever it lives (peer channel `raft/minions`,
   * minion-placement.ts): the newest records of ids, a target's matches among the ids other masters hold, or
   * every id held. For request workers (through the main thread) and runners, while `grains`/`mine` are placed.
   */
  | { k: "minionQuery"; id: number; q: MinionQuery }
  /** runs cluster.shed_unowned on every other master of the cluster (raft/shed): node id -> its ShedResult */
  | { k: "shedPeers"; id: number; args: ShedArgs }
  /** the cluster group's leader's view of every member's replication (here, or asked over raft/progress): LeaderView */
  | { k: "leaderProgress"; id: number }
  /** serve this protocol on `port` too (a runner thread's end of a MessageChannel; transferred) */
  | { k: "connect"; port: MessagePort }
  /**
   * the master is stopping: hand the leadership of every group led here to its best successor, resolving
   * when they took it or after one election timeout (close does it too; calling it first lets the cluster
   * move on while the master drains)
   */
  | { k: "handOff"; id: number }
  /** hands leadership off (as handOff), stops ticking, fails every waiting request with RAFT_STOPPED, closes LMDB, releases the ring buffer */
  | { k: "close"; id: number };

/** The worker's answer to a call: its value, or the error with its catalogue code and exact text. */
export type FromRaft = { k: "res"; id: number; v: unknown } | ({ k: "err"; id: number } & PortError);

/** One entry of a `propose` call: committed (its receipt) or refused. */
export type EntryOutcome = { ok: true; r: ProposeReceipt } | ({ ok: false } & PortError);

/** The answer each call kind resolves to (what RaftClient returns). */
export interface RaftAnswers {
  ready: NodeStatus;
  propose: EntryOutcome[];
  member: ProposeResult;
  read: ReadResult;
  status: NodeStatus;
  bootstrap: boolean;
  join: boolean;
  jobsHeld: Record<string, HeldJobsAnswer>;
  joinAttempt: JoinAttempt;
  jobRead: ClusterJob;
  jobList: ClusterJobList;
  minionQuery: MinionAnswer;
  shedPeers: Record<string, ShedResult>;
  leaderProgress: LeaderView;
  handOff: void;
  close: void;
}
