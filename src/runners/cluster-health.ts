/**
 * `salt-run cluster.health` (beyond Salt): this master's view of the cluster, built by the pure
 * src/shared/cluster-health.ts from the Raft worker's status of group `cluster`, the peer-health board and the
 * state-sync thread's status file (`cachedir/brine-state-sync/status.json`, when it exists). The `ready` it
 * reports is decided by the same rule as the readiness file (src/main-thread/readiness.ts).
 */
import { clusterHealth, type HealthFacts } from "../shared/cluster-health.js";
import { readStateSyncStatus } from "../shared/state-sync-status.js";
import { readHealth } from "../shared/peer-health.js";
import { CLUSTER_RING } from "../shared/sab-ring/layout.js";
import type { RunnerContext } from "./context.js";

/** The report, or undefined on a master without `cluster_id` (the caller answers NOT_CLUSTERED). */
export async function healthReport(ctx: RunnerContext): Promise<Record<string, unknown> | undefined> {
  const c = ctx.cluster;
  if (!c) return undefined;
  const status = await c.raft.status();
  const group = status.groups.find((g) => g.group === CLUSTER_RING);
  const board = c.health ? readHealth(c.health) : undefined;
  const stateSync = readStateSyncStatus(ctx.cfg.cachedir);
  // a follower asks the leader for every member's replication (the leader answers from its own status)
  let leaderView: HealthFacts["leaderView"];
  if (group && group.role !== "leader" && group.leaderId) {
    leaderView = await c.raft.leaderProgress().catch((e: Error) => ({ error: e.message }));
  }
  return clusterHealth({
    clustered: true,
    serving: true,
    nodeId: c.nodeId,
    ...(group ? { group } : {}),
    ...(board ? { links: board.peers } : {}),
    ...(board?.joining ? { joining: board.joining } : {}),
    ...(stateSync ? { stateSync } : {}),
    ...(leaderView ? { leaderView } : {}),
    now: Date.now(),
  });
}
