/**
 * The job-cache mirror thread (one per clustered master): stores what peers' forwarded events say about jobs
 * into this master's own job cache, so `jobs.lookup_jid` and the job cache answer the same on every master
 * (Salt's EventMonitor mirrors `salt/job/*\/new` and `/ret/` the same way; salt-cluster.md §1):
 *
 *   salt/job/<jid>/new        -> the job's load and expected minions, unless this master has the load already
 *   salt/job/<jid>/ret/<id>   -> the return (refused, as locally, when one for (jid, id) exists: no duplicates)
 *
 * It also stores what peers share about minions (src/cluster/cache-sync/: data cache, mine, session keys, their
 * presence reports) and reads this master's copy back in chunks for a peer's bulk sync.
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
import { clusterNodeIdOf } from "../workers/raft/node-ids.js";
import { PresenceBoard, type PresenceReport } from "./cache-sync/presence-board.js";
import { SyncStore, type SyncCursor } from "./cache-sync/sync-store.js";

export interface JobMirrorInit {
  cfg: MasterConfig;
  log: { level: string; file: string | null; fileLevel: string | null };
}

/** main → mirror: forwarded event frames; mirror → main: {done: n} after they are durable */
export interface JobMirrorBatch {
  seq: number;
  frames: Uint8Array[];
}

/** main → mirror: a peer's cache-sync record batches (live, or a bulk-sync chunk) to store */
export interface SyncApply {
  seq: number;
  from: string;
  records: Uint8Array[];
}

/** main → mirror: a peer's bulk-sync pull request; answered with the reply bytes (`bytes`) */
export interface SyncServe {
  seq: number;
  serve: Uint8Array;
}

/** main → mirror: the reply to our pull from `from`; answered with the next cursor (`next`) */
export interface SyncChunk {
  seq: number;
  from: string;
  chunk: Uint8Array;
}

/** main → mirror: a peer's list of the minions it sees connected */
export interface PresenceStore {
  seq: number;
  presence: PresenceReport;
}

export type MirrorMessage = JobMirrorBatch | SyncApply | SyncServe | SyncChunk | PresenceStore;

export interface MirrorReply {
  done: number;
  bytes?: Uint8Array;
  next?: SyncCursor | null;
  error?: string;
}

const init = workerData as JobMirrorInit;
configureLogging(init.log);
const log = getLogger("brine.cluster.mirror");
const store = openStore(init.cfg);
const jobs = new JobCache(store);
const sync = new SyncStore(init.cfg, store, clusterNodeIdOf(init.cfg));
const presence = new PresenceBoard(store);
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

async function handle(m: MirrorMessage): Promise<MirrorReply> {
  if ("frames" in m) {
    await mirror(m.frames);
    return { done: m.seq };
  }
  if ("records" in m) {
    await sync.apply(m.from, m.records);
    return { done: m.seq };
  }
  if ("serve" in m) return { done: m.seq, bytes: sync.serve(m.serve) };
  if ("chunk" in m) {
    const r = await sync.applyChunk(m.from, m.chunk);
    return "error" in r ? { done: m.seq, error: r.error } : { done: m.seq, next: r.next };
  }
  await presence.store(m.presence);
  return { done: m.seq };
}

parentPort!.on("message", (m: MirrorMessage) => {
  handle(m).then(
    (r) => parentPort!.postMessage(r),
    (e: Error) => {
      log.error(`the mirror thread failed on a ${"frames" in m ? "job event" : "cache-sync"} message: ${e.message}`);
      parentPort!.postMessage({ done: m.seq, error: e.message } satisfies MirrorReply);
    },
  );
});
