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
import { dataTypeOf } from "../../shared/minion-placement.js";
import { RingReader } from "../../shared/sab-ring/reader.js";
import { BrineError, isBrineError } from "../../shared/errors.js";
import { portError, type PortError } from "../../shared/port-calls.js";
import { ownBytes } from "../../shared/cbor.js";

export interface JobMirrorInit {
  cfg: MasterConfig;
  /** this master's replay nonce set (src/shared/nonce-set.ts): served to and filled by bulk syncs */
  nonces?: SharedArrayBuffer;
  /** the shared ring buffer: while `jobs` is routed to a ring, peers' job records are not stored (job-records.ts) */
  ring?: SharedArrayBuffer;
  log: { level: string; file: string | null; fileLevel: string | null };
  /** the state-sync channels' port to the main thread (engine.ts; state-sync-link.ts relays it to the peers) */
  stateSync?: MessagePort;
  /** test hook (MirrorThreadOptions): the engine fills its heap to the thread's bound after installing this many items */
  testOomAfterItems?: number;
}

/**
 * main → mirror, in the one port-call style (src/shared/port-calls.ts): every message is a call with an `id`,
 * answered once what it carries is stored (or read), so the main thread can bound what waits here by bytes.
 */
export type ToMirror =
  /** forwarded job event frames the origin verified, to store in the job cache */
  | { k: "jobs"; id: number; frames: Uint8Array[] }
  /** a peer's cache-sync record batches (live) to store */
  | { k: "records"; id: number; from: string; records: Uint8Array[] }
  /** a peer's bulk-sync pull request: answered with the reply bytes */
  | { k: "serve"; id: number; request: Uint8Array }
  /** the reply to our pull from `from`: answered with the cursor of the next chunk (null: done) */
  | { k: "chunk"; id: number; from: string; chunk: Uint8Array }
  /** a peer's list of the minions it sees connected */
  | { k: "presence"; id: number; report: PresenceReport }
  /** when the newest job in this master's cache was created: answered with ms, or null for none */
  | { k: "newestJob"; id: number }
  /**
   * the master stops (not a call: no answer): the thread refuses later messages, the state-sync channels stop and close
   * their manifests, and the thread exits by itself (the host waits for its exit, bounded, and terminates it only
   * then): a terminate landing inside an LMDB transaction's callback aborts the whole process (napi_throw)
   */
  | { k: "close" };

/** mirror → main: the answer to call `id` (`v` by kind: serve → bytes, chunk → cursor, newestJob → ms; else null). */
export type FromMirror = { k: "res"; id: number; v: Uint8Array | SyncCursor | number | null } | ({ k: "err"; id: number } & PortError);

const init = threadInit<JobMirrorInit>("state-sync");
const log = getLogger("brine.cluster.mirror");
const store = openStore(init.cfg);
const sync = new SyncStore(init.cfg, store, clusterNodeIdOf(init.cfg), Date.now, init.nonces ? new NonceSet(init.nonces) : undefined);
const presence = new PresenceBoard(store);
const engine = init.stateSync ? new StateSyncEngine(init.cfg, clusterNodeIdOf(init.cfg), store, init.stateSync, init.testOomAfterItems !== undefined ? { testOomAfterItems: init.testOomAfterItems } : {}) : undefined;
let closing = false;
if (init.ring) {
  const ring = new RingReader(init.ring);
  sync.jobRecords.placed = () => ring.route("jobs") !== null;
  sync.minionsPlaced = (bank) => ring.route(dataTypeOf(bank)) !== null;
}

async function handle(m: ToMirror): Promise<Uint8Array | SyncCursor | number | null> {
  switch (m.k) {
    case "jobs":
      await sync.jobRecords.storeEvents(m.frames);
      return null;
    case "newestJob":
      return sync.jobRecords.newestMs() ?? null;
    case "records":
      await sync.apply(m.from, m.records);
      return null;
    case "serve":
      return sync.serve(m.request);
    case "chunk": {
      const r = await sync.applyChunk(m.from, m.chunk);
      if ("error" in r) throw new BrineError("MIRROR_BAD_CHUNK", r.error);
      return r.next;
    }
    case "presence":
      await presence.store(m.report);
      return null;
    default:
      throw new BrineError("THREAD_CALL", `the mirror thread does not know ${JSON.stringify((m as { k?: unknown }).k)}`);
  }
}

/** The master stops: nothing more is taken, the manifests close, then the thread ends itself, outside any transaction. */
function close(): void {
  if (closing) return;
  closing = true;
  void (engine?.close() ?? Promise.resolve())
    .catch((e: unknown) => log.warning(`the state-sync channels did not close cleanly: ${(e as Error)?.message ?? String(e)}`))
    .finally(() => process.exit(0));
}

parentPort!.on("message", (m: ToMirror) => {
  if (m?.k === "close") return close();
  if (closing) {
    parentPort!.postMessage({ k: "err", id: m.id, ...portError(new BrineError("THREAD_GONE", "the state-sync thread is stopping"), "THREAD_GONE") } satisfies FromMirror);
    return;
  }
  handle(m).then(
    (v) => {
      // reply bytes are an encoder's view: posted in a buffer of their own, transferred (cbor.ts ownBytes)
      if (v instanceof Uint8Array) {
        const own = ownBytes(v);
        parentPort!.postMessage({ k: "res", id: m.id, v: own } satisfies FromMirror, [own.buffer]);
      } else parentPort!.postMessage({ k: "res", id: m.id, v } satisfies FromMirror);
    },
    (e: unknown) => {
      if (!isBrineError(e, "MIRROR_BAD_CHUNK")) log.error(`the mirror thread failed on a ${String(m?.k)} message: ${(e as Error)?.message ?? String(e)}`);
      parentPort!.postMessage({ k: "err", id: m.id, ...portError(e, "THREAD_CALL") } satisfies FromMirror);
    },
  );
});
