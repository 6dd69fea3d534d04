/**
 * Fault injection's view of the peer channel (brine_cluster_chaos_file). Peers in `cut` are unreachable both
 * ways: sends to them are dropped, requests to them fail with CLUSTER_PEER_DOWN, nothing from them reaches a
 * handler (a request from one is answered with an error instead of holding a slot), and they are not up.
 * The main thread's view (forwarding, cache sync, the AES key) is one over its proxy; the cluster service pushes
 * the same cut set to the Raft worker, where Raft's own traffic is dropped by RaftPeerLink and everything else the
 * worker sends or serves (job and minion-data placement, held jobs and sheds, leader progress, ring forwarding)
 * goes through one over the transport.
 */
import { BrineError } from "./errors.js";
import type { PeerHandler, SendOptions } from "../workers/raft/peer/peer-types.js";

/** What a view needs of the channel under it (the main thread's PeerChannelProxy, the worker's PeerTransport). */
export interface PeerChannelLike {
  send(peerId: string, channel: string, payload: Uint8Array, opts?: SendOptions): void;
  isUp(peerId: string): boolean;
  request(peerId: string, channel: string, payload: Uint8Array, timeoutMs: number): Promise<Uint8Array>;
  upPeers(): string[];
  on(channel: string, handler: PeerHandler): () => void;
}

export class FilteredChannel {
  cut = new Set<string>();

  constructor(private readonly t: PeerChannelLike) {}

  send(peerId: string, channel: string, payload: Uint8Array, opts?: SendOptions): void {
    if (this.cut.has(peerId)) return;
    this.t.send(peerId, channel, payload, opts);
  }

  isUp(peerId: string): boolean {
    return !this.cut.has(peerId) && this.t.isUp(peerId);
  }

  async request(peerId: string, channel: string, payload: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    if (this.cut.has(peerId)) throw new BrineError("CLUSTER_PEER_DOWN", `${peerId} is cut off (fault injection)`);
    return this.t.request(peerId, channel, payload, timeoutMs);
  }

  upPeers(): string[] {
    return this.t.upPeers().filter((p) => !this.cut.has(p));
  }

  on(channel: string, handler: PeerHandler): () => void {
    const h: PeerHandler = (m) => {
      if (!this.cut.has(m.from)) return handler(m);
      // as a partition would: nothing arrives (a request gets an error instead of holding a slot forever)
      if (m.request) throw new BrineError("CLUSTER_PEER_DOWN", `${m.from} is cut off (fault injection)`);
      return undefined;
    };
    return this.t.on(channel, h);
  }
}
