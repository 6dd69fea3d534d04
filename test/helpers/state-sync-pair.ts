/**
 * Two masters' state-sync, for test/state-sync:
 * - `stateSyncPair`: their threads, each started as a master starts it (src/main-thread/state-sync-host.ts
 *   MirrorThread) and linked through its own StateSyncLink, the peer channel between them replaced by a direct call;
 * - `startEngine` and `relayEngines`: their engines run in the test's own thread on MessageChannels (of this build, or
 *   of another commit's build), the puller's peer requests relayed to the server as the main thread relays them
 *   (CBOR bytes both ways), with hooks on each request and reply that cross (what is on the wire, an older puller).
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import { MessageChannel, type MessagePort } from "node:worker_threads";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { MirrorThread, type MirrorThreadOptions } from "../../src/main-thread/state-sync-host.js";
import { StateSyncLink, type StateSyncChannel } from "../../src/main-thread/cluster/state-sync-link.js";
import type { PeerHandler } from "../../src/workers/raft/peer/peer-types.js";
import { StateSyncEngine } from "../../src/workers/state-sync/engine.js";
import { openStore } from "../../src/lib/store/lmdb-env.js";
import type { FromEngine, PeerReport, ToEngine } from "../../src/workers/state-sync/messages.js";

/** Master `name`'s configuration under `root`, as its state-sync thread reads it; `extra` replaces or adds options. */
export function stateSyncCfg(name: string, root: string, extra: Record<string, unknown> = {}): MasterConfig {
  return {
    id: name,
    cachedir: path.join(root, "cache"),
    pki_dir: path.join(root, "pki"),
    cluster_pki_dir: path.join(root, "pki"),
    cluster_id: "pair",
    job_cache: true,
    brine_lmdb_map_bytes: 64 * 1024 * 1024,
    file_roots: { base: [path.join(root, "srv", "salt")] },
    pillar_roots: { base: [path.join(root, "srv", "pillar")] },
    ...extra,
  } as unknown as MasterConfig;
}

/** One master's end of a two-master peer channel: requests and notes go straight to the other's handler. */
class DirectChannel implements StateSyncChannel {
  other!: DirectChannel;
  private handler: PeerHandler | undefined;
  constructor(readonly name: string) {}
  send(_peer: string, _channel: string, payload: Uint8Array): void {
    void Promise.resolve(this.other.handler?.({ from: this.name, payload, request: false } as never)).catch(() => undefined);
  }
  async request(_peer: string, _channel: string, payload: Uint8Array): Promise<Uint8Array> {
    if (!this.other.handler) throw new Error("peer not listening");
    return (await this.other.handler({ from: this.name, payload, request: true } as never)) as Uint8Array;
  }
  upPeers(): string[] {
    return [this.other.name];
  }
  on(_channel: string, h: PeerHandler): () => void {
    this.handler = h;
    return () => (this.handler = undefined);
  }
}

export interface Side {
  name: string;
  root: string;
  /** the first root of saltenv base */
  roots: string;
  link: StateSyncLink;
  thread: MirrorThread;
}

/** Masters "a" and "b" under `root` (`root/a`, `root/b`), each with the thread options given; both threads up. */
export async function stateSyncPair(root: string, opts: { a?: MirrorThreadOptions; b?: MirrorThreadOptions } = {}): Promise<{ a: Side; b: Side; stop(): Promise<void> }> {
  const ca = new DirectChannel("a");
  const cb = new DirectChannel("b");
  ca.other = cb;
  cb.other = ca;
  const side = (name: "a" | "b", ch: DirectChannel, peer: string): Side => {
    const r = path.join(root, name);
    mkdirSync(path.join(r, "srv", "salt"), { recursive: true });
    const link = new StateSyncLink(ch, () => [peer]);
    const thread = new MirrorThread(stateSyncCfg(name, r), undefined, () => link.newPort(), undefined, opts[name] ?? {});
    return { name, root: r, roots: path.join(r, "srv", "salt"), link, thread };
  };
  const a = side("a", ca, "b");
  const b = side("b", cb, "a");
  await Promise.all([a.thread.newestJobMs(), b.thread.newestJobMs()]); // both threads are up
  return {
    a,
    b,
    async stop() {
      a.link.close();
      b.link.close();
      await Promise.all([a.thread.stop(), b.thread.stop()]);
    },
  };
}

/** An engine and a store to run it on: this build's, or an earlier commit's (test/state-sync/mixed-version). */
export interface EngineBuild {
  Engine: new (cfg: MasterConfig, nodeId: string, store: never, port: MessagePort, opts: { autoKeys: boolean }) => { close(): unknown };
  openStore: (cfg: MasterConfig) => { close(): Promise<void> };
}

export const thisBuild: EngineBuild = { Engine: StateSyncEngine as unknown as EngineBuild["Engine"], openStore: openStore as unknown as EngineBuild["openStore"] };

/** One master's engine, its end of the engine's port (what the main thread holds). */
export interface EngineSide {
  id: string;
  root: string;
  port: MessagePort;
  close(): Promise<void>;
}

/** The engine of master `id` under `root`, in this thread, keys not watched (`autoKeys: false`). */
export function startEngine(id: string, root: string, build: EngineBuild = thisBuild): EngineSide {
  const cfg = stateSyncCfg(id, root);
  const store = build.openStore(cfg);
  const { port1, port2 } = new MessageChannel();
  const engine = new build.Engine(cfg, id, store as never, port2, { autoKeys: false });
  return {
    id,
    root,
    port: port1,
    close: async () => {
      await engine.close();
      port1.close();
      await store.close();
    },
  };
}

/** What a relay may do with each message that crosses it; `rid` is the request's id on the server's side. */
export interface RelayHooks {
  /** a peer request of the puller's: what the server gets instead (default: the same bytes) */
  request?(p: Uint8Array, rid: number): Uint8Array;
  /** the server's reply to request `rid` */
  reply?(p: Uint8Array, rid: number): void;
}

/** Relays `puller`'s peer requests to `server` and its replies back; `pull` asks the puller to sync channels from the server. */
export function relayEngines(puller: EngineSide, server: EngineSide, hooks: RelayHooks = {}): { pull(channels: string[]): Promise<PeerReport> } {
  let next = 1;
  const waiting = new Map<number, number>();
  const calls = new Map<number, (r: PeerReport | Error) => void>();
  puller.port.on("message", (m: FromEngine) => {
    if (m.k === "req") {
      const rid = next++;
      const p = hooks.request ? hooks.request(m.p, rid) : m.p;
      waiting.set(rid, m.id);
      server.port.postMessage({ k: "in", id: rid, from: puller.id, p, req: true } satisfies ToEngine);
    } else if (m.k === "res" || m.k === "err") calls.get(m.id)?.(m.k === "res" ? (m.v as PeerReport) : new Error(m.text));
  });
  server.port.on("message", (m: FromEngine) => {
    if (m.k !== "res" && m.k !== "err") return;
    const id = waiting.get(m.id)!;
    waiting.delete(m.id);
    if (m.k === "err") return puller.port.postMessage({ k: "err", id, code: m.code, text: m.text } satisfies ToEngine);
    const p = m.v as Uint8Array;
    hooks.reply?.(p, m.id);
    puller.port.postMessage({ k: "res", id, p } satisfies ToEngine);
  });
  puller.port.postMessage({ k: "peers", up: [server.id], known: [server.id] } satisfies ToEngine);
  server.port.postMessage({ k: "peers", up: [puller.id], known: [puller.id] } satisfies ToEngine);
  let callId = 1_000_000;
  return {
    pull: (channels) =>
      new Promise((resolve, reject) => {
        const id = callId++;
        calls.set(id, (r) => (r instanceof Error ? reject(r) : resolve(r)));
        puller.port.postMessage({ k: "call", id, call: { op: "syncFrom", peer: server.id, channels } } satisfies ToEngine);
      }),
  };
}
