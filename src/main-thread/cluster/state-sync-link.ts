/**
 * The main thread's relay for the state-sync channels (src/workers/state-sync/engine.ts decides and does every
 * transfer; this only moves bytes between its port and the peer channel, channel STATE_SYNC_CHANNEL):
 *
 * - the thread's peer requests (`req`) and one-way notes (`send`) go to the peer named; the answer or the error
 *   (with its code) goes back (`res`/`err`, the one port-call style of src/shared/port-calls.ts);
 * - a peer's message on the channel goes to the thread (`in`), and a request's answer back to the peer;
 * - which peers are up and known (`peers`), and each peer coming up (`up`), as the peer channel says;
 * - calls: `syncFrom(peer, channels)` for the join (a promise of what the transfer did), and a port per runner
 *   thread (`runnerPort`) on which `cluster.sync_roots` / `cluster.collect_from_peers` ask the thread directly.
 *
 * Each state-sync thread started gets a port of its own (`newPort`, src/main-thread/state-sync-host.ts: the host
 * restarts a thread that ended). When a thread's port closes, the calls it had not answered fail with
 * STATE_SYNC_RESTARTING, and so do calls and peers' requests until the next thread's port is attached; that thread
 * is told which peers are up and pulls the key channels from each (what the last one installed is not fetched again).
 */
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { BrineError } from "../../shared/errors.js";
import { portError, revivePortError } from "../../shared/port-calls.js";
import type { PeerHandler } from "../../workers/raft/peer/peer-types.js";
import type { EngineCall, FromEngine, PeerReport, RunnerAnswer, RunnerAsk, ToEngine } from "../../workers/state-sync/messages.js";

const log = getLogger("brine.cluster.state-sync");
const dropLog = new LogBudget(1, 10_000, (line) => log.warning(line), "state-sync notes");

export const STATE_SYNC_CHANNEL = "cl/state-sync";

/** What the link needs of the peer channel (ClusterService's filtered view). */
export interface StateSyncChannel {
  send(peerId: string, channel: string, payload: Uint8Array): void;
  request(peerId: string, channel: string, payload: Uint8Array, timeoutMs: number): Promise<Uint8Array>;
  upPeers(): string[];
  on(channel: string, handler: PeerHandler): () => void;
}

export class StateSyncLink {
  private nextId = 1;
  /** this side's calls (a peer's request `in`, `call`) the thread has not answered yet */
  private readonly calls = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly off: () => void;
  /** this side's end of the current thread's port (undefined: no thread running) */
  private port: MessagePort | undefined;
  /** threads attached so far */
  private attached = 0;
  private closed = false;

  constructor(
    private readonly channel: StateSyncChannel,
    /** every peer this master knows of (configured or learned), up or not */
    private readonly knownPeers: () => string[],
  ) {
    this.off = channel.on(STATE_SYNC_CHANNEL, (m) => {
      if (!m.request) {
        this.post({ k: "in", id: 0, from: m.from, p: m.payload, req: false });
        return undefined;
      }
      if (!this.port) return Promise.reject(this.gone());
      const id = this.nextId++;
      return new Promise<Uint8Array>((resolve, reject) => {
        this.calls.set(id, { resolve: (v) => resolve(v instanceof Uint8Array ? v : new Uint8Array(0)), reject });
        this.post({ k: "in", id, from: m.from, p: m.payload, req: true });
      });
    });
  }

  /**
   * A port for a state-sync thread starting (its init data carries the returned end): this side's end replaces the
   * last thread's. A thread after the first is told which peers are up and pulls the key channels from each.
   */
  newPort(): MessagePort {
    const { port1, port2 } = new MessageChannel();
    this.detach(this.port);
    this.port = port1;
    port1.on("message", (m: FromEngine) => this.onEngine(m));
    port1.on("close", () => this.detach(port1));
    this.peersChanged();
    if (this.attached++ > 0) for (const p of this.channel.upPeers()) this.post({ k: "up", peer: p });
    return port2;
  }

  private gone(): BrineError {
    return this.closed ? new BrineError("THREAD_GONE", "the master is stopping") : new BrineError("STATE_SYNC_RESTARTING");
  }

  /** `port`'s thread ended (or is replaced): the calls it had not answered fail. */
  private detach(port: MessagePort | undefined): void {
    if (!port || port !== this.port) return;
    this.port = undefined;
    port.close();
    const e = this.gone();
    for (const c of this.calls.values()) c.reject(e);
    this.calls.clear();
  }

  /** Call when a peer's session changes (and at start). */
  peersChanged(): void {
    this.post({ k: "peers", up: this.channel.upPeers(), known: this.knownPeers() });
  }

  /** A peer's session came up (or a partition from it healed): the thread pulls its keys. */
  peerUp(peer: string): void {
    this.peersChanged();
    this.post({ k: "up", peer });
  }

  /** Pulls `channels` (state-sync channel names) from `peer`; resolves with what the transfer did. */
  syncFrom(peer: string, channels: string[]): Promise<PeerReport> {
    return this.call({ op: "syncFrom", peer, channels }) as Promise<PeerReport>;
  }

  /** A port for a runner thread: `{k: "call", id, call}` → `{k: "res", id, v}` or `{k: "err", id, code, text}` (engine.ts, RunnerAsk). */
  runnerPort(): MessagePort {
    const { port1, port2 } = new MessageChannel();
    if (this.port) this.port.postMessage({ k: "port", port: port2 } satisfies ToEngine, [port2]);
    else {
      // no thread running (it is being restarted): every call on this port is answered so, here
      port2.on("message", (a: RunnerAsk) => port2.postMessage({ k: "err", id: a?.id, ...portError(this.gone(), "STATE_SYNC_RESTARTING") } satisfies RunnerAnswer));
      port2.unref();
    }
    return port1;
  }

  private call(call: EngineCall): Promise<unknown> {
    if (this.closed || !this.port) return Promise.reject(this.gone());
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.calls.set(id, { resolve, reject });
      this.post({ k: "call", id, call });
    });
  }

  private post(m: ToEngine): void {
    if (!this.closed) this.port?.postMessage(m);
  }

  private onEngine(m: FromEngine): void {
    switch (m.k) {
      case "req":
        this.channel.request(m.to, STATE_SYNC_CHANNEL, m.p, m.ms).then(
          (p) => this.post({ k: "res", id: m.id, p }),
          (e: unknown) => this.post({ k: "err", id: m.id, ...portError(e, "CLUSTER_PEER_REMOTE") }),
        );
        return;
      case "send":
        try {
          this.channel.send(m.to, STATE_SYNC_CHANNEL, m.p);
        } catch (e) {
          dropLog.line(`state-sync note to ${m.to} dropped: ${(e as Error).message}`);
        }
        return;
      case "res":
      case "err": {
        const c = this.calls.get(m.id);
        this.calls.delete(m.id);
        if (m.k === "res") c?.resolve(m.v);
        else c?.reject(revivePortError(m, "STATE_SYNC_FAILED"));
        return;
      }
    }
  }

  close(): void {
    this.off();
    this.closed = true;
    this.detach(this.port);
  }
}
