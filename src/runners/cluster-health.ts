/**
 * `salt-run cluster.health` (beyond Salt): this master's view of the cluster, built by the pure
 * src/shared/cluster-health.ts from the Raft worker's status of group `cluster`, the peer-health board and the
 * state-sync thread's status file (`cachedir/brine-state-sync/status.json`, when it exists). The `ready` it
 * reports is decided by the same rule as the readiness file (src/main-thread/readiness.ts).
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../shared/log.js";
import { checkStateSyncStatus, clusterHealth, type HealthFacts } from "../shared/cluster-health.js";
import { readHealth } from "../shared/peer-health.js";
import { CLUSTER_RING } from "../shared/sab-ring/layout.js";
import type { RunnerContext } from "./context.js";

const log = getLogger("brine.runner.cluster");

/** Where the state-sync thread reports its last transfer per channel and peer. */
export function stateSyncStatusFile(cachedir: string): string {
  return path.join(cachedir, "brine-state-sync", "status.json");
}

/** The state-sync status file: undefined when absent, else its checked content or what is wrong with it. */
export function readStateSyncStatus(cachedir: string): HealthFacts["stateSync"] {
  const file = stateSyncStatusFile(cachedir);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    return { error: `${file}: ${(e as Error).message}` };
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    return { error: `${file}: not JSON (${(e as Error).message})` };
  }
  const checked = checkStateSyncStatus(parsed);
  if ("error" in checked) log.warning(`cluster.health: ${file}: ${checked.error}`);
  return "error" in checked ? { error: `${file}: ${checked.error}` } : checked;
}

/** The report, or undefined on a master without `cluster_id` (the caller answers NOT_CLUSTERED). */
export async function healthReport(ctx: RunnerContext): Promise<Record<string, unknown> | undefined> {
  const c = ctx.cluster;
  if (!c) return undefined;
  const status = await c.raft.status();
  const group = status.groups.find((g) => g.group === CLUSTER_RING);
  const board = c.health ? readHealth(c.health) : undefined;
  const stateSync = readStateSyncStatus(ctx.cfg.cachedir);
  return clusterHealth({
    clustered: true,
    serving: true,
    nodeId: c.nodeId,
    ...(group ? { group } : {}),
    ...(board ? { links: board.peers } : {}),
    ...(board?.joining ? { joining: board.joining } : {}),
    ...(stateSync ? { stateSync } : {}),
    now: Date.now(),
  });
}
