/**
 * A request worker (Piscina). Owns: a MasterContext (cached KeyObjects, session keys, LMDB handles).
 * Receives batches of raw request bodies, answers each with exactly one reply body. All frames of a
 * batch run concurrently so their job-cache writes share LMDB transactions (group commit); replies
 * are only produced after their writes are durable.
 */
import { workerData } from "piscina";
import { BroadcastChannel, threadId } from "node:worker_threads";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { configureLogging, getLogger } from "../../shared/log.js";
import { STALE_REPLY } from "./replies.js";
import { MasterContext, newEffects, type Effects, type SharedBuffers } from "./context.js";
import { handleRequest, lastAnsweredAtOnce, lastCmdSlot } from "./request.js";
import { installSubsystems } from "./subsystems.js";
import type { BatchResult, BatchTask, CleanupResult, LateReplies, MaintenanceTask, PresenceResult, ReadyResult } from "./task.js";
import { batchHoldMsMax } from "./limits.js";
import { localPresent } from "./presence.js";
import { installSyncOutbox } from "../../shared/sync-outbox.js";
import { isClustered } from "../../shared/shared-fs.js";
import { NonceAppender } from "../../shared/nonce-journal.js";
import { packNonces } from "../../shared/nonce-set.js";
import { lmdbDir } from "../../lib/store/lmdb-env.js";
import { purgeKeylessMinions } from "./keyless-purge.js";
import { pruneSaltJobFiles, saltJobFilesOn } from "../../lib/store/salt-job-files.js";

interface WorkerInit {
  cfg: MasterConfig;
  shared: SharedBuffers;
  log: { level: string; file: string | null; fileLevel: string | null };
  /** the lane's BroadcastChannel name, for replies that come after their batch's result (LateReplies) */
  lateChannel: string;
}

const init = workerData as WorkerInit;
const log = getLogger("brine.worker");
configureLogging(init.log);
const ctx = new MasterContext(init.cfg, init.shared);
await installSubsystems(ctx);
/** clustered: this thread's data cache, mine and session key writes, for the peers (BatchResult.sync) */
const syncOutbox = installSyncOutbox(ctx);
/** the replay nonce journal (src/shared/nonce-journal.ts): this thread appends what its batches accepted */
const nonceAppender = new NonceAppender(lmdbDir(ctx.cfg), ctx.nonces);
const clustered = isClustered(ctx.cfg);
/** this lane's channel for late replies; posting only (unref: it never keeps the thread alive) */
const lateChannel = new BroadcastChannel(init.lateChannel);
lateChannel.unref();

export default async function run(task: BatchTask | MaintenanceTask): Promise<BatchResult | CleanupResult | PresenceResult | ReadyResult> {
  // this module's top level (the context, the subsystems) has run: the thread serves
  if (task.kind === "ready") return { thread: threadId };
  if (task.kind === "presence") {
    return { present: localPresent(ctx.cfg, ctx.store, ctx.acceptedIds(), (id) => ctx.minionCache.get(id)?.grains as Record<string, unknown> | undefined) };
  }
  if (task.kind === "cleanup") {
    let removed = 0;
    for (let n = -1; n !== 0; ) {
      n = await ctx.jobs.cleanup(ctx.cfg.keep_jobs_seconds, task.nowMs);
      removed += n;
    }
    removed += await purgeKeylessMinions(ctx);
    removed += await ctx.auth().tokens.sweep(); // expired eauth tokens (Salt removes them only when presented)
    if (saltJobFilesOn(ctx.cfg)) removed += pruneSaltJobFiles(ctx.cfg.cachedir, ctx.cfg.keep_jobs_seconds, task.nowMs);
    return { removed };
  }
  const fx = newEffects();
  const now = Date.now();
  let stale = 0;
  const n = task.frames.length;
  const replies: Uint8Array[] = new Array(n);
  let settled = 0;
  /** set once the batch's result went with some replies missing: each arrives on its own (LateReplies) */
  let onLate: ((index: number, reply: Uint8Array) => void) | undefined;
  let allDone!: () => void;
  const done = new Promise<void>((r) => (allDone = r));
  // per frame: its metrics command slot and start; one clock read per frame, a second for one that waits
  const cmds = new Uint8Array(n);
  const starts = new Float64Array(n);
  let mark = performance.now();
  const settle = (i: number, reply: Uint8Array) => {
    replies[i] = reply;
    if (onLate) onLate(i, reply);
    else if (++settled === n) allDone();
  };
  for (let i = 0; i < n; i++) {
    if (task.staleMs > 0 && now - task.arrivals[i]! > task.staleMs) {
      stale++;
      settle(i, STALE_REPLY);
      continue;
    }
    const f = task.frames[i]!;
    starts[i] = mark;
    const p = handleRequest(ctx, Buffer.from(f.buffer, f.byteOffset, f.byteLength), fx, task.sources?.[i] ?? undefined);
    mark = performance.now();
    cmds[i] = lastCmdSlot();
    if (lastAnsweredAtOnce()) {
      ctx.metrics.request(cmds[i]!, ((mark - starts[i]!) * 1000) | 0);
      void p.then((r) => settle(i, r));
    } else {
      void p.then((r) => {
        ctx.metrics.request(cmds[i]!, ((performance.now() - starts[i]!) * 1000) | 0);
        settle(i, r);
      });
    }
  }
  if (stale) ctx.metrics.laneRefused(0, 1, stale); // clear lane (the only one with staleMs), reason stale
  if (stale) log.warning(`${stale} sign-in request(s) waited over ${task.staleMs} ms; answered retry-later without work`);
  if (settled < n) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([done, new Promise<void>((r) => (timer = setTimeout(r, batchHoldMsMax)))]);
    clearTimeout(timer);
  }
  if (settled === n) return { replies, ...takeEffects(fx) };
  // one slow request does not hold the batch: the others' replies go now, the slow ones when ready
  const late: number[] = [];
  for (let i = 0; i < n; i++) {
    if (replies[i] === undefined) {
      late.push(i);
      replies[i] = NO_REPLY_YET;
    }
  }
  let ready: { index: number; reply: Uint8Array }[] = [];
  onLate = (index, reply) => {
    ready.push({ index, reply });
    if (ready.length === 1) {
      setImmediate(() => {
        const out: LateReplies = { batch: task.batch, replies: ready, ...takeEffects(fx) };
        ready = [];
        lateChannel.postMessage(out);
      });
    }
  };
  return { replies, late, ...takeEffects(fx) };
}

const NO_REPLY_YET = new Uint8Array(0);

/**
 * The effects fired so far, moved out of `fx` (frames still running keep adding to it). The dispatched
 * requests' nonces go to the journal here: on disk before any reply they cover leaves, and to the peers.
 */
function takeEffects(fx: Effects): Omit<BatchResult, "replies" | "late"> {
  const sync = syncOutbox?.drain();
  const nonces = fx.nonces.length ? packNonces(fx.nonces) : undefined;
  if (nonces) nonceAppender.append(nonces);
  const out: Omit<BatchResult, "replies" | "late"> = {
    events: fx.events,
    publishes: fx.publishes,
    ...(sync ? { sync } : {}),
    ...(fx.runs.length ? { runs: fx.runs } : {}),
    ...(fx.verified.length ? { verified: fx.verified } : {}),
    ...(nonces && clustered ? { nonces } : {}),
  };
  fx.events = [];
  fx.publishes = [];
  fx.runs = [];
  fx.verified = [];
  fx.nonces = [];
  return out;
}
