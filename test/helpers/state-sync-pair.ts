/**
 * Two masters' state-sync threads, each started as a master starts it (src/main-thread/state-sync-host.ts MirrorThread)
 * and linked through its own StateSyncLink, the peer channel between them replaced by a direct call (test/state-sync).
 */
import { mkdirSync } from "node:fs";
import path from "node:path";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { MirrorThread, type MirrorThreadOptions } from "../../src/main-thread/state-sync-host.js";
import { StateSyncLink, type StateSyncChannel } from "../../src/main-thread/cluster/state-sync-link.js";
import type { PeerHandler } from "../../src/workers/raft/peer/peer-types.js";

export function stateSyncCfg(name: string, root: string): MasterConfig {
  return {
    id: name,
    cachedir: path.join(root, "cache"),
    pki_dir: path.join(root, "pki"),
    cluster_pki_dir: path.join(root, "pki"),
    cluster_id: "pair",
    brine_lmdb_map_bytes: 64 * 1024 * 1024,
    file_roots: { base: [path.join(root, "srv", "salt")] },
    pillar_roots: { base: [path.join(root, "srv", "pillar")] },
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
