/**
 * brine.stats: the figures of the metrics endpoint for a person, read in the runner thread from the same
 * places (the metrics board the main thread handed this thread, the Raft worker's status and the ring buffer
 * when clustered, presence, /proc): the same names, so what an operator reads here is what Prometheus scrapes.
 * Works whether or not `brine_metrics` serves the endpoint.
 */
import { readdirSync, readFileSync } from "node:fs";
import { gcExposed, probeHeaps } from "../shared/heap-probe.js";
import { summarizeSmaps } from "../shared/smaps.js";
import { MetricsBoard } from "../shared/metrics/board.js";
import { families, forPerson } from "../shared/metrics/families.js";
import { localPresent } from "../workers/req-handler/presence.js";
import { readStateSyncStatus } from "../shared/state-sync-status.js";
import { presenceGrainsOf, type RunnerContext, type RunnerFn } from "./context.js";
import { getLogger } from "../shared/log.js";

const log = getLogger("brine.runners");

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
  const connected = localPresent(ctx.cfg, ctx.minions.store, accepted, await presenceGrainsOf(ctx, accepted)).length;
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

/** How long `brine.memory` waits for the threads' heap answers, ms (a thread busy for longer is left out). */
const heapProbeWaitMs = 1_000;

function procText(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
}

/**
 * brine.memory [gc=True]: where the master process's resident memory is, by owner: /proc/self/status (VmRSS and its
 * anonymous/file parts), /proc/self/smaps summarised (each LMDB environment's resident pages, the brk heap,
 * glibc's other malloc arenas (one per thread that mallocs), the other anonymous mappings: V8 heaps, large malloc chunks, libzmq's buffers), and every thread's V8 heap.
 * With gc=True every thread first runs a full garbage collection (node must run with --expose-gc).
 */
async function memory(ctx: RunnerContext, gc: boolean): Promise<Record<string, unknown>> {
  if (gc && !gcExposed()) {
    const why = "brine.memory gc=True: this master's node runs without --expose-gc, so no thread collects its garbage first; the heap figures include garbage";
    log.warning(why);
    ctx.print(why);
  }
  const status = procText("/proc/self/status");
  const smaps = procText("/proc/self/smaps");
  if (status === undefined || smaps === undefined) throw new Error("brine.memory reads /proc/self/status and /proc/self/smaps (Linux); this system has neither");
  const kb = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? NaN);
  const threads = await probeHeaps("runner", heapProbeWaitMs, gc);
  threads.sort((a, b) => a.thread.localeCompare(b.thread) || a.threadId - b.threadId);
  return {
    rss_kb: kb("VmRSS"),
    rss_anon_kb: kb("RssAnon"),
    rss_file_kb: kb("RssFile"),
    gc_first: gc && gcExposed(),
    threads: Number(/^Threads:\s+(\d+)/m.exec(status)?.[1] ?? NaN),
    resident_kb: summarizeSmaps(smaps).residentKb,
    heaps: threads.map((h) => ({ thread: h.thread, thread_id: h.threadId, used_kb: Math.round(h.usedBytes / 1024), total_kb: Math.round(h.totalBytes / 1024), malloced_kb: Math.round(h.mallocedBytes / 1024), external_kb: Math.round(h.externalBytes / 1024), young_kb: Math.round(h.youngBytes / 1024) })),
  };
}

export const brineRunners: Record<string, RunnerFn> = {
  "brine.stats": async (ctx) => stats(ctx),
  "brine.memory": async (ctx, _args, kwargs) => memory(ctx, kwargs.gc === true || kwargs.gc === "True" || kwargs.gc === "true"),
};
