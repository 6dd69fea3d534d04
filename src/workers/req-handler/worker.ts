/**
 * A request worker (Piscina). Owns: a MasterContext (cached KeyObjects, session keys, LMDB handles).
 * Receives batches of raw request bodies, answers each with exactly one reply body. All frames of a
 * batch run concurrently so their job-cache writes share LMDB transactions (group commit); replies
 * are only produced after their writes are durable.
 */
import { workerData } from "piscina";
import type { MasterConfig } from "../../config/defaults.js";
import { configureLogging, getLogger } from "../../log.js";
import { STALE_REPLY } from "./replies.js";
import { MasterContext, newEffects, type SharedBuffers } from "../../master/context.js";
import { handleRequest } from "../../master/request.js";
import { installSubsystems } from "../../master/subsystems.js";
import type { BatchResult, BatchTask, CleanupResult, MaintenanceTask, PresenceResult } from "./task.js";
import { localPresent } from "../../master/presence.js";
import { installSyncOutbox } from "../../cluster/cache-sync/outbox.js";
import { isClustered } from "../../cluster/shared-fs.js";
import { NonceAppender } from "../../shared/nonce-journal.js";
import { packNonces } from "../../shared/nonce-set.js";
import { lmdbDir } from "../../store/lmdb-env.js";
import { purgeKeylessMinions } from "../../master/keyless-purge.js";
import { pruneSaltJobFiles, saltJobFilesOn } from "../../store/salt-job-files.js";

interface WorkerInit {
  cfg: MasterConfig;
  shared: SharedBuffers;
  log: { level: string; file: string | null; fileLevel: string | null };
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

export default async function run(task: BatchTask | MaintenanceTask): Promise<BatchResult | CleanupResult | PresenceResult> {
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
    removed += await ctx.auth().tokens.sweep();
    if (saltJobFilesOn(ctx.cfg)) removed += pruneSaltJobFiles(ctx.cfg.cachedir, ctx.cfg.keep_jobs_seconds, task.nowMs); // expired eauth tokens (Salt removes them only when presented)
    return { removed };
  }
  const fx = newEffects();
  const now = Date.now();
  let stale = 0;
  const replies = await Promise.all(
    task.frames.map((f, i) => {
      if (task.staleMs > 0 && now - task.arrivals[i]! > task.staleMs) {
        stale++;
        return STALE_REPLY;
      }
      return handleRequest(ctx, Buffer.from(f.buffer, f.byteOffset, f.byteLength), fx, task.sources?.[i] ?? undefined);
    }),
  );
  if (stale) log.warning(`${stale} sign-in request(s) waited over ${task.staleMs} ms; answered retry-later without work`);
  const sync = syncOutbox?.drain();
  // the dispatched requests' nonces: on disk before any reply of the batch leaves, and to the peers
  const nonces = fx.nonces.length ? packNonces(fx.nonces) : undefined;
  if (nonces) nonceAppender.append(nonces);
  return { replies, events: fx.events, publishes: fx.publishes, ...(sync ? { sync } : {}), ...(fx.runs.length ? { runs: fx.runs } : {}), ...(fx.verified.length ? { verified: fx.verified } : {}), ...(nonces && clustered ? { nonces } : {}) };
}
