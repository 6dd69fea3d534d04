/**
 * Every bound the Raft worker shell enforces, named with its unit. The Raft core counts time in ticks; the
 * worker turns one shared timer into ticks for every group, so a tick is the same length for all of them.
 */
import type { RaftLimits } from "./core/limits.js";
import { BrineError } from "../../shared/errors.js";

export interface WorkerLimits {
  /**
   * Length of one tick, ms. 50 ms is Salt's service heartbeat (_HEARTBEAT_INTERVAL): with heartbeatTicks 1
   * and electionTicksMin 10 a follower waits 500-1000 ms before campaigning, inside the ≤ 1 s failover
   * target (reference-points.md B7) and close to Salt's 750-1500 ms.
   */
  tickMs: number;
  /** the Raft core's limits for every group this node runs (ticks are `tickMs` long) */
  raft: Partial<RaftLimits>;
  /**
   * Ticks a group must go without requests, entries, results or messages other than heartbeats before its
   * leader puts it to rest (RawNode.quiesce: no heartbeats, no election timers; README "Resting groups").
   */
  quiesceAfterTicks: number;
  /** applied entries since the last snapshot that trigger a new snapshot and log compaction, count */
  snapshotEveryEntries: number;
  /** entries kept behind a snapshot when compacting, so a briefly lagging follower needs no snapshot, count */
  snapshotKeepEntries: number;
  /** apply outcomes remembered per group for proposals whose result arrives after their entry applied, count */
  applyOutcomesKept: number;
  /** LMDB map size of the Raft environment, bytes */
  lmdbMapBytes: number;
}

export const DEFAULT_WORKER_LIMITS: Readonly<WorkerLimits> = Object.freeze({
  tickMs: 50,
  raft: Object.freeze({
    electionTicksMin: 10,
    heartbeatTicks: 1,
    // 100 ticks = 5 s: a proposal or read that cannot be settled by then gets a coded error, never a hang
    requestDeadlineTicks: 100,
  }),
  quiesceAfterTicks: 20,
  snapshotEveryEntries: 8192,
  snapshotKeepEntries: 1024,
  applyOutcomesKept: 4096,
  lmdbMapBytes: 1024 * 1024 * 1024,
});

/**
 * How long a caller (main thread, runner thread) waits for one API call before giving up, ms. It is the
 * request deadline plus slack for a durable commit, so a call normally ends with the core's own coded
 * outcome and this bound only fires when the worker is wedged.
 */
export function clientCallTimeoutMs(l: WorkerLimits = DEFAULT_WORKER_LIMITS): number {
  return (l.raft.requestDeadlineTicks ?? 100) * l.tickMs + 10_000;
}

/**
 * The election timeout of `cluster_election_min`/`cluster_election_max` (ms, Salt 3008's names) in ticks of
 * `tickMs`: a follower campaigns after a random time in [electionTicksMin, 2 × electionTicksMin) ticks, so the
 * only upper end taken is twice the lower one (Salt's defaults, 750/1500, are); the lower end is rounded to
 * whole ticks and kept above the one-tick heartbeat. Absent options: undefined (the worker's default).
 */
export function electionTicksOf(cfg: { cluster_election_min?: unknown; cluster_election_max?: unknown }, tickMs: number = DEFAULT_WORKER_LIMITS.tickMs): number | undefined {
  const min = cfg.cluster_election_min;
  const max = cfg.cluster_election_max;
  if (min === undefined && max === undefined) return undefined;
  const lo = typeof min === "number" ? min : typeof max === "number" ? max / 2 : NaN;
  if (!Number.isFinite(lo) || lo <= 0) throw new BrineError("CONFIG_INVALID", `cluster_election_min: must be a number of ms, got ${JSON.stringify(min)}`);
  if (max !== undefined && max !== 2 * lo) {
    throw new BrineError("CONFIG_INVALID", `cluster_election_max: brine draws the election timeout in [min, 2 × min), so it must be ${2 * lo} (2 × cluster_election_min ${lo}), got ${JSON.stringify(max)}`);
  }
  return Math.max(2, Math.round(lo / tickMs));
}
