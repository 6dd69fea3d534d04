/**
 * The state-sync thread (one per clustered master): the state-sync channels (engine.ts) — keys, denied keys,
 * file_roots, pillar_roots and the job-cache banks pulled from peers by manifest, and served to them — on the port the
 * main thread's link relays to the peer channel (src/main-thread/cluster/state-sync-link.ts).
 *
 * Its transfers are bounded by design (manifest pages, fetch replies, requests in flight, bank items), and nothing of
 * unbounded size is decoded here: peers' job events and record batches, which may be 64 MiB, are the mirror thread's
 * (worker.ts). So it runs under a small V8 heap bound (src/main-thread/state-sync-host.ts stateSyncHeapLimits) that keeps
 * its memory flat whatever a pull's length. Messages from its host: only `close` (the master stops: the transfers stop,
 * the manifests close, and the thread exits by itself, outside any LMDB transaction).
 */
import { parentPort, type MessagePort } from "node:worker_threads";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { getLogger } from "../../shared/log.js";
import { openStore } from "../../lib/store/lmdb-env.js";
import { clusterNodeIdOf } from "../../shared/node-ids.js";
import { threadInit } from "../../shared/thread-kit.js";
import { StateSyncEngine } from "./engine.js";

export interface StateSyncInit {
  cfg: MasterConfig;
  log: { level: string; file: string | null; fileLevel: string | null };
  /** the state-sync channels' port to the main thread (engine.ts; state-sync-link.ts relays it to the peers) */
  stateSync: MessagePort;
  /** test hook (MirrorThreadOptions): the engine fills its heap to the thread's bound after installing this many items */
  testOomAfterItems?: number;
}

const init = threadInit<StateSyncInit>("state-sync");
const log = getLogger("brine.cluster.state-sync");
const engine = new StateSyncEngine(init.cfg, clusterNodeIdOf(init.cfg), openStore(init.cfg), init.stateSync, init.testOomAfterItems !== undefined ? { testOomAfterItems: init.testOomAfterItems } : {});
let closing = false;

parentPort!.on("message", (m: { k?: unknown }) => {
  if (m?.k !== "close" || closing) return;
  closing = true;
  void engine
    .close()
    .catch((e: unknown) => log.warning(`the state-sync channels did not close cleanly: ${(e as Error)?.message ?? String(e)}`))
    .finally(() => process.exit(0));
});
