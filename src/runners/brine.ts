/**
 * brine.stats: the figures of the metrics endpoint for a person, read in the runner thread from the same
 * places (the metrics board the main thread handed this thread, the Raft worker's status and the ring buffer
 * when clustered, presence, /proc): the same names, so what an operator reads here is what Prometheus scrapes.
 * Works whether or not `brine_metrics` serves the endpoint.
 */
import { readdirSync } from "node:fs";
import { MetricsBoard } from "../shared/metrics/board.js";
import { families, forPerson } from "../shared/metrics/families.js";
import { localPresent } from "../workers/req-handler/presence.js";
import { readStateSyncStatus } from "../shared/state-sync-status.js";
import type { RunnerContext, RunnerFn } from "./context.js";

/** Open file descriptors of the master process (Linux: /proc/self/fd, less the one this read opens). */
function openFds(): number | undefined {
  try {
    return readdirSync("/proc/self/fd").length - 1;
  } catch {
    return undefined;
  }
}

async function stats(ctx: RunnerContext): Promise<Record<string, unknown>> {
  if (!ctx.metrics) throw new Error("this master handed the runner no metrics board");
  const board = new MetricsBoard(ctx.metrics).read();
  const accepted = ctx.keys.list("accepted");
  const connected = localPresent(ctx.cfg, ctx.minions.store, accepted, (id) => ctx.minions.get(id)?.grains as Record<string, unknown> | undefined).length;
  const raft = ctx.cluster ? await ctx.cluster.raft.status() : undefined;
  const ss = ctx.cluster ? readStateSyncStatus(ctx.cfg.cachedir) : undefined;
  const out = forPerson(
    families({
      board,
      connected,
      ...(raft ? { raft } : {}),
      ...(ctx.cluster ? { ring: ctx.cluster.ring } : {}),
      ...(ss && "status" in ss ? { stateSync: ss.status, now: Date.now() } : {}),
    }),
  );
  // the two process figures an operator asks first (prom-client's names on the endpoint)
  const fds = openFds();
  if (fds !== undefined) out.process_open_fds = fds;
  out.process_resident_memory_bytes = process.memoryUsage().rss;
  out.sampled_at = board.sampledAtMs ? new Date(board.sampledAtMs).toISOString() : null;
  return out;
}

export const brineRunners: Record<string, RunnerFn> = {
  "brine.stats": async (ctx) => stats(ctx),
};
