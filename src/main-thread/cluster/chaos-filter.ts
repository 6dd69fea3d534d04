/**
 * Fault injection's view of the peer channel on the main thread (brine_cluster_chaos_file): what
 * forwarding, cache sync and the AES key see. Peers in `cut` are unreachable both ways: sends to them are
 * dropped, requests to them fail with CLUSTER_PEER_DOWN, nothing from them reaches a handler (a request from
 * one is answered with an error instead of holding a slot), and they are not up. Raft traffic does not pass
 * here: the cluster service pushes the same cut set to the Raft worker (PeerChannelProxy.cut), where
 * RaftPeerLink drops it.
 */
import { BrineError } from "../../shared/errors.js";
import type { PeerHandler, SendOptions } from "../../workers/raft/peer/peer-types.js";
import type { PeerChannelProxy } from "./peer-proxy.js";

export class FilteredChannel {
  cut = new Set<string>();

  constructor(private readonly t: PeerChannelProxy) {}

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
