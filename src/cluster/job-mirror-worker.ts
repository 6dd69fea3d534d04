/**
 * The job-cache mirror thread (one per clustered master): stores what peers' forwarded events say about jobs
 * into this master's own job cache, so `jobs.lookup_jid` and the job cache answer the same on every master
 * (Salt's EventMonitor mirrors `salt/job/*\/new` and `/ret/` the same way; salt-cluster.md §1):
 *
 *   salt/job/<jid>/new        -> the job's load and expected minions, unless this master has the load already
 *   salt/job/<jid>/ret/<id>   -> the return (refused, as locally, when one for (jid, id) exists: no duplicates)
 *
 * It runs beside the request workers (the main thread does no decoding); lmdb-js shares the environment
 * within the process, so writes join the same group commits.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { MasterConfig } from "../config/defaults.js";
import { EventStreamReader } from "../events/event-frame.js";
import { configureLogging, getLogger } from "../log.js";
import { validId, validJid } from "../protocol/ids.js";
import { JobCache, type ReturnRecord } from "../store/job-cache.js";
import { openStore } from "../store/lmdb-env.js";

export interface JobMirrorInit {
  cfg: MasterConfig;
  log: { level: string; file: string | null; fileLevel: string | null };
}

/** main → mirror: forwarded event frames; mirror → main: {done: n} after they are durable */
export interface JobMirrorBatch {
  seq: number;
  frames: Uint8Array[];
}

const init = workerData as JobMirrorInit;
configureLogging(init.log);
const log = getLogger("brine.cluster.mirror");
const store = openStore(init.cfg);
const jobs = new JobCache(store);
const RET = /^salt\/job\/([^/]+)\/ret\/(.+)$/;
const NEW = /^salt\/job\/([^/]+)\/new$/;

async function mirror(frames: Uint8Array[]): Promise<void> {
  const writes: Promise<unknown>[] = [];
  for (const f of frames) {
    let events;
    try {
      events = new EventStreamReader().push(Buffer.from(f.buffer, f.byteOffset, f.byteLength));
    } catch (e) {
      log.warning(`a forwarded event did not decode: ${(e as Error).message}`);
      continue;
    }
    for (const { tag, data } of events) {
      if (data === null || typeof data !== "object") continue;
      const r = RET.exec(tag);
      if (r) {
        const [, jid, id] = r as unknown as [string, string, string];
        if (!validJid(jid) || !validId(id) || !("return" in data)) continue;
        if (!init.cfg.job_cache || jobs.isNocache(jid)) continue;
        writes.push(jobs.saveReturn(jid, id, data as ReturnRecord, Boolean(init.cfg.job_cache_store_endtime)));
        continue;
      }
      const n = NEW.exec(tag);
      if (n) {
        const jid = n[1]!;
        if (!validJid(jid) || jobs.getLoad(jid)) continue;
        const { minions, missing: _m, _stamp, ...load } = data as Record<string, unknown>;
        const ids = Array.isArray(minions) ? minions.filter((x): x is string => typeof x === "string") : undefined;
        writes.push(jobs.saveLoad(jid, { ...load, jid, ret: (load as { ret?: unknown }).ret ?? "" }, ids));
      }
    }
  }
  await Promise.all(writes);
}

parentPort!.on("message", (b: JobMirrorBatch) => {
  mirror(b.frames)
    .catch((e) => log.error(`mirroring forwarded job events failed: ${(e as Error).message}`))
    .finally(() => parentPort!.postMessage({ done: b.seq }));
});
