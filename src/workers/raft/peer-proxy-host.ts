/**
 * The Raft worker's half of the main thread's access to the peer channel: it serves PeerChannelProxy
 * (proxy.ts) over one MessagePort, on top of the PeerTransport this thread owns (its ROUTER on
 * cluster_pool_port, its DEALERs, handshakes and sessions). Raft does not go through here: RaftPeerLink
 * (raft-transport.ts) uses the same PeerTransport directly, so a Raft message crosses no thread.
 *
 * Invariants:
 * - a channel the main thread handles has exactly one handler on the transport, registered here; inbound
 *   requests wait for the main thread's answer (bounded by the transport's inboundRequestsMax per peer);
 * - every change of link state is pushed (`state`) before the event that caused it, and the state is
 *   refreshed at most every stateRefreshMs along with other traffic (queue depths in status()), so the
 *   proxy's sync isUp/upPeers/status never need a round trip;
 * - nothing here arms a timer per message: request timeouts are the transport's (its coarse timer), and
 *   the batcher flushes once per turn.
 *
 * The worker also runs synchronous LMDB commits. Nothing here depends on fine timing: ZMTP heartbeats are
 * libzmq's (its I/O thread), and the coarse timeouts (handshake 3 s, requests ≥ seconds) dwarf a commit.
 */
import type { MessagePort } from "node:worker_threads";
import { BrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import type { PeerTransport, PeerMessage } from "./peer/peer-transport.js";
import { NO_STAGES, type StageSink } from "../../shared/metrics/stage-clock.js";
import { NO_PAYLOAD, PortBatcher, dispatchBatch, errorFields, reviveError, type HostState, type PortBatch, type Waiter, type ToHost, type ToProxy } from "./peer-proxy-wire.js";

/** the longest a pushed status (queue depths, bytes) may trail the transport while traffic flows, ms */
export const stateRefreshMs = 1000;
/** log lines about refused sends per window, and the window, ms */
const sendRefusalLogsPerWindow = 5;
const sendRefusalLogWindowMs = 10_000;

const log = getLogger("brine.cluster.peer");

export class PeerChannelHost {
  private readonly out: PortBatcher<ToProxy>;
  private readonly offs = new Map<string, () => void>();
  /** inbound requests the main thread's handlers have not answered yet, by the id given them here */
  private readonly waiting = new Map<number, Waiter>();
  private nextId = 1;
  private sendsRefused = 0;
  private statePushedAt = 0;
  private closed = false;
  private readonly budget = new LogBudget(sendRefusalLogsPerWindow, sendRefusalLogWindowMs, (l) => log.warning(l));

  /** `cut`: the fault injection's set of cut-off peers, applied to Raft by the caller (RaftPeerLink). */
  constructor(
    port: MessagePort,
    private readonly transport: PeerTransport,
    private readonly cut: (ids: string[]) => void,
    stages: StageSink = NO_STAGES,
  ) {
    this.out = new PortBatcher<ToProxy>(port);
    port.on("message", (b: PortBatch<ToHost>) => {
      const t = stages.now();
      dispatchBatch(b, (m, p) => this.onMessage(m, p), log, "host");
      stages.add("proxy.call", t);
    });
    transport.events.on("peerUp", (id, info) => {
      this.pushState();
      this.push({ k: "up", id, address: info.address, sessionId: info.sessionId });
    });
    transport.events.on("peerDown", (id, reason) => {
      this.pushState();
      this.push({ k: "down", id, reason });
    });
    transport.events.on("refused", (info) => this.push({ k: "refused", info }));
    this.pushState();
  }

  private push(msg: ToProxy): void {
    if (Date.now() - this.statePushedAt >= stateRefreshMs) this.pushState();
    this.out.push(msg);
  }

  private pushState(): void {
    this.statePushedAt = Date.now();
    const state: HostState = { port: this.transport.port, status: this.transport.status(), sendsRefused: this.sendsRefused };
    this.out.push({ k: "state", state });
  }

  private onMessage(msg: ToHost, p: Uint8Array[]): void {
    const t = this.transport;
    switch (msg.k) {
      case "send":
        try {
          t.send(msg.to, msg.ch, p[msg.p]!, msg.now ? { now: true } : undefined);
        } catch (e) {
          // one-way: the main thread's send() has returned; count it where the proxy can read it
          this.sendsRefused++;
          this.budget.line(`peer channel: ${msg.ch} to ${msg.to} dropped: ${(e as Error).message}`);
        }
        return;
      case "req":
        this.answer(msg.id, t.request(msg.to, msg.ch, p[msg.p]!, msg.ms));
        return;
      case "res":
        this.settle(msg.id)?.resolve(msg.p === NO_PAYLOAD ? new Uint8Array(0) : p[msg.p]!);
        return;
      case "err":
        this.settle(msg.id)?.reject(reviveError(msg));
        return;
      case "on":
        if (!this.offs.has(msg.ch)) this.offs.set(msg.ch, t.on(msg.ch, (m) => this.toMain(m)));
        return;
      case "off":
        this.offs.get(msg.ch)?.();
        this.offs.delete(msg.ch);
        return;
      case "start":
        this.answer(
          msg.id,
          t.start().then(() => {
            this.pushState();
            return undefined;
          }),
        );
        return;
      case "add":
        // the join may have added it in this thread already (join-host.ts): one link per peer
        if (msg.ep.id === undefined || !t.status().some((st) => st.id === msg.ep.id)) t.addPeer(msg.ep);
        this.pushState();
        return;
      case "cut":
        this.cut(msg.ids);
        return;
      case "close":
        this.answer(msg.id, this.close());
        return;
    }
  }

  /** Posts the outcome of `work` as the answer to the main thread's call `id`. */
  private answer(id: number, work: Promise<Uint8Array | undefined>): void {
    work.then(
      (v) => this.out.push({ k: "res", id, p: v === undefined ? NO_PAYLOAD : this.out.payload(v) }),
      (e: unknown) => this.out.push({ k: "err", id, ...errorFields(e) }),
    );
  }

  private settle(id: number): Waiter | undefined {
    const w = this.waiting.get(id);
    this.waiting.delete(id);
    return w;
  }

  /** An inbound message or request on a channel the main thread handles. */
  private toMain(m: PeerMessage): Promise<Uint8Array> | undefined {
    if (this.closed) throw new BrineError("CLUSTER_PEER_CLOSED");
    const p = this.out.payload(m.payload);
    if (!m.request) {
      this.push({ k: "msg", from: m.from, ch: m.channel, p });
      return undefined;
    }
    return new Promise<Uint8Array>((resolve, reject) => {
      const id = this.nextId++;
      this.waiting.set(id, { resolve, reject });
      this.push({ k: "ireq", id, from: m.from, ch: m.channel, p });
    });
  }

  /** Closes the transport (pending requests of both sides fail with CLUSTER_PEER_CLOSED). */
  async close(): Promise<undefined> {
    if (this.closed) return undefined;
    this.closed = true;
    for (const off of this.offs.values()) off();
    this.offs.clear();
    for (const w of this.waiting.values()) w.reject(new BrineError("CLUSTER_PEER_CLOSED"));
    this.waiting.clear();
    await this.transport.close();
    this.pushState();
    return undefined;
  }
}
