/**
 * A state-sync engine (src/workers/state-sync/engine.ts) driven as the main thread drives it, its peer requests
 * answered by the test (`rig`), and two such engines back to back (`pair`), for test/state-sync/engine*.test.ts.
 */
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { cbor } from "../../src/shared/cbor.js";
import { openStore, type Store } from "../../src/lib/store/lmdb-env.js";
import { StateSyncEngine } from "../../src/workers/state-sync/engine.js";
import { type FromEngine, type PeerReport, type ToEngine } from "../../src/workers/state-sync/messages.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { stateSyncCfg } from "./state-sync-pair.js";
import { type ManifestEntry } from "../../src/workers/state-sync/manifest.js";
import { closeKeyDbs } from "../../src/lib/pki/key-store.js";

export const sha = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex");

export interface Rig {
  root: string;
  cfg: MasterConfig;
  store: Store;
  engine: StateSyncEngine;
  main: MessagePort;
  requests: { op: string; [k: string]: unknown }[];
  syncFrom(peer: string, channels: string[]): Promise<PeerReport>;
  /** a request from peer "p1" to the engine; its answer, decoded */
  serve(msg: unknown): Promise<any>;
  close(): Promise<void>;
}

/** An engine whose peer "p1" answers with `answer` (throw: the peer's error). */
export function rig(answer: (m: { op: string; [k: string]: unknown }) => unknown, extra: Record<string, unknown> = {}): Rig {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-statesync-"));
  // a pair's configuration (state-sync-pair.ts), as the rig has always had it: cluster "c", no job cache
  const cfg = stateSyncCfg("m1", root, { cluster_id: "c", job_cache: undefined, ...extra });
  mkdirSync(path.join(root, "srv", "salt"), { recursive: true });
  const store = openStore(cfg);
  const { port1, port2 } = new MessageChannel();
  const engine = new StateSyncEngine(cfg, "m1", store, port2, { autoKeys: false });
  const requests: Rig["requests"] = [];
  const calls = new Map<number, (v: unknown) => void>();
  port1.on("message", (m: FromEngine) => {
    if (m.k === "req") {
      const msg = cbor.decode(m.p) as { op: string };
      requests.push(msg);
      Promise.resolve()
        .then(() => answer(msg))
        .then(
          (v) => port1.postMessage({ k: "res", id: m.id, p: cbor.encode(v) as Uint8Array } satisfies ToEngine),
          (e: Error) => port1.postMessage({ k: "err", id: m.id, code: "CLUSTER_PEER_REMOTE", text: e.message } satisfies ToEngine),
        );
    } else if (m.k === "res" || m.k === "err") calls.get(m.id)?.(m.k === "res" ? m.v : new Error(m.text));
  });
  port1.postMessage({ k: "peers", up: ["p1"], known: ["p1"] } satisfies ToEngine);
  let id = 0;
  return {
    root,
    cfg,
    store,
    engine,
    main: port1,
    requests,
    syncFrom: (peer, channels) =>
      new Promise((resolve, reject) => {
        const n = ++id;
        calls.set(n, (v) => (v instanceof Error ? reject(v) : resolve(v as PeerReport)));
        port1.postMessage({ k: "call", id: n, call: { op: "syncFrom", peer, channels } } satisfies ToEngine);
      }),
    serve: (msg) =>
      new Promise((resolve, reject) => {
        const n = ++id;
        calls.set(n, (v) => (v instanceof Error ? reject(v) : resolve(cbor.decode(v as Uint8Array))));
        port1.postMessage({ k: "in", id: n, from: "p1", p: cbor.encode(msg) as Uint8Array, req: true } satisfies ToEngine);
      }),
    close: async () => {
      await engine.close();
      await closeKeyDbs();
      port1.close();
      await store.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

/** The items of a fetch request as ranges: a whole item (its path alone) is all of it from 0. */
export function fetchItems(m: Record<string, unknown>): { p: string; off: number; len: number }[] {
  return (m.items as unknown[]).map((it) => (typeof it === "string" ? { p: it, off: 0, len: Number.MAX_SAFE_INTEGER } : (it as { p: string; off: number; len: number })));
}

/** A peer serving `files` (item path → content) on one channel, with an optional hook on each fetch. */
export function servePeer(files: Record<string, Buffer>, onGet?: (p: string, off: number, len: number, data: Buffer) => Buffer | undefined) {
  const entries: ManifestEntry[] = Object.entries(files).map(([p, b]) => ({ p, s: b.length, h: sha(b), m: 0o644, t: 1000 }));
  return (m: { op: string; [k: string]: unknown }) => {
    if (m.op === "manifest") return { entries, more: false };
    if (m.op === "get") {
      const items = fetchItems(m);
      return {
        pieces: items.map((it) => {
          const whole = files[it.p]!;
          let data = whole.subarray(it.off, it.off + it.len);
          const swapped = onGet?.(it.p, it.off, it.len, data);
          if (swapped) data = swapped;
          return { p: it.p, off: it.off, data, ph: sha(whole.subarray(it.off, it.off + it.len)) };
        }),
      };
    }
    throw new Error(`unexpected ${m.op}`);
  };
}


/** Two engines back to back: `puller`'s peer "p1" is `server` (each request relayed to it as from "p1"), with the requests and reply bytes counted. */
export function pair(extraServer: Record<string, unknown> = {}): { server: Rig; puller: Rig; bytes: () => number; close: () => Promise<void> } {
  const server = rig(() => {
    throw new Error("the server asks nothing");
  }, extraServer);
  let bytes = 0;
  const puller = rig(async (m) => {
    bytes += (cbor.encode(m) as Uint8Array).byteLength;
    const reply = await server.serve(m);
    bytes += (cbor.encode(reply) as Uint8Array).byteLength;
    return reply;
  });
  return { server, puller, bytes: () => bytes, close: async () => Promise.all([server.close(), puller.close()]).then(() => undefined) };
}
