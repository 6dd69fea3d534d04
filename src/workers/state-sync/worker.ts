/**
 * The mirror thread (one per clustered master): stores what peers send into this master's own stores, so
 * `jobs.lookup_jid`, the job cache, the minion data cache, the mine and the session keys answer the same on
 * every master (Salt's EventMonitor mirrors `salt/job/*\/new` and `/ret/` the same way; salt-cluster.md §1):
 *
 * - the job records peers forward with their events, only those their origin verified (job-records.ts);
 * - what peers share about minions (src/workers/state-sync/: data cache, mine, session keys, their presence
 *   reports), and this master's copy read back in chunks for a peer's bulk sync (the job cache too).
 *
 * - the state-sync channels (engine.ts): keys, denied keys, file_roots, pillar_roots and job-cache banks pulled
 *   from peers by manifest, and served to them.
 *
 * It runs beside the request workers (the main thread does no decoding); lmdb-js shares the environment
 * within the process, so writes join the same group commits.
 */
import { parentPort, type MessagePort } from "node:worker_threads";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { getLogger } from "../../shared/log.js";
import { openStore } from "../../lib/store/lmdb-env.js";
import { NonceSet } from "../../shared/nonce-set.js";
import { clusterNodeIdOf } from "../../shared/node-ids.js";
import { PresenceBoard, type PresenceReport } from "../../lib/store/presence-board.js";
import { SyncStore, type SyncCursor } from "./sync-store.js";
import { threadInit } from "../../shared/thread-kit.js";
import { StateSyncEngine } from "./engine.js";
import { RingReader } from "../../shared/sab-ring/reader.js";

export interface JobMirrorInit {
  cfg: MasterConfig;
  /** this master's replay nonce set (src/shared/nonce-set.ts): served to and filled by bulk syncs */
  nonces?: SharedArrayBuffer;
  /** the shared ring buffer: while `jobs` is routed to a ring, peers' job records are not stored (job-records.ts) */
  ring?: SharedArrayBuffer;
  log: { level: string; file: string | null; fileLevel: string | null };
  /** the state-sync channels' port to the main thread (engine.ts; state-sync-link.ts relays it to the peers) */
  stateSync?: MessagePort;
}

/** main → mirror: forwarded job event frames the origin verified; mirror → main: {done: n} after they are durable */
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

/** main → mirror: when the newest job in this master's cache was created; answered with `ms` (absent: none) */
export interface NewestJob {
  seq: number;
  newestJob: true;
}

export type MirrorMessage = JobMirrorBatch | SyncApply | SyncServe | SyncChunk | PresenceStore | NewestJob;

export interface MirrorReply {
  done: number;
  bytes?: Uint8Array;
  next?: SyncCursor | null;
  ms?: number;
  error?: string;
}

const init = threadInit<JobMirrorInit>();
const log = getLogger("brine.cluster.mirror");
const store = openStore(init.cfg);
const sync = new SyncStore(init.cfg, store, clusterNodeIdOf(init.cfg), Date.now, init.nonces ? new NonceSet(init.nonces) : undefined);
const presence = new PresenceBoard(store);
if (init.stateSync) new StateSyncEngine(init.cfg, clusterNodeIdOf(init.cfg), store, init.stateSync);
if (init.ring) {
  const ring = new RingReader(init.ring);
  sync.jobRecords.placed = () => ring.route("jobs") !== null;
}

async function handle(m: MirrorMessage): Promise<MirrorReply> {
  if ("frames" in m) {
    await sync.jobRecords.storeEvents(m.frames);
    return { done: m.seq };
  }
  if ("newestJob" in m) {
    const ms = sync.jobRecords.newestMs();
    return ms === undefined ? { done: m.seq } : { done: m.seq, ms };
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
