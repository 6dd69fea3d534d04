/**
 * The main thread's relay for the state-sync channels (src/workers/state-sync/engine.ts decides and does every
 * transfer; this only moves bytes between its port and the peer channel, channel STATE_SYNC_CHANNEL):
 *
 * - the thread's peer requests (`req`) and one-way notes (`send`) go to the peer named; the answer or the error
 *   (with its code) goes back (`res`/`err`, the one port-call style of src/shared/port-calls.ts);
 * - a peer's message on the channel goes to the thread (`in`), and a request's answer back to the peer;
 * - which peers are up and known (`peers`), and each peer coming up (`up`), as the peer channel says;
 * - calls: `syncFrom(peer, channels)` for the join (a promise of what the transfer did), and a port per runner
 *   thread (`runnerPort`) on which `cluster.sync_roots` / `cluster.collect_from_peers` ask: each of its calls is
 *   relayed to the current thread as a `call`.
 *
 * Each state-sync thread started gets a port of its own (`newPort`, src/main-thread/state-sync-host.ts: the host
 * restarts a thread that ended). When a thread's port closes, the calls it had not answered fail with
 * STATE_SYNC_RESTARTING, and so do calls and peers' requests until the next thread's port is attached; that thread
 * is told which peers are up and pulls the key channels from each (what the last one installed is not fetched again).
 * A runner's call is the exception: one the thread did not answer because it ended (or asked while it was down) is
 * asked once of the next thread, when it is attached (within restartWaitForCallMsMax): sync_roots and
 * collect_from_peers are manifest-first transfers, so asking again fetches only what the first did not install. The
 * answer then says `again: true` (the runner marks each peer's report `restarted`: its counts are the second call's).
 */
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { BrineError, isBrineError } from "../../shared/errors.js";
import { portError, revivePortError } from "../../shared/port-calls.js";
import { handOver, ownBuffer } from "../../workers/raft/peer-proxy-wire.js";
import type { PeerHandler } from "../../workers/raft/peer/peer-types.js";
import { restartWaitForCallMsMax, type EngineCall, type FromEngine, type PeerReport, type RunnerAnswer, type RunnerAsk, type ToEngine } from "../../workers/state-sync/messages.js";

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
  /** runner calls waiting for the next thread's port (resolved by newPort, failed by close) */
  private readonly portWaiters = new Set<{ resolve: () => void; reject: (e: Error) => void }>();
  /** the links' ends of the runner threads' ports (closed with the link) */
  private readonly runnerPorts = new Set<MessagePort>();

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
    for (const w of this.portWaiters) w.resolve();
    this.portWaiters.clear();
    return port2;
  }

  /** Resolves when a thread's port is attached (at once if one is); fails after `ms`, or when the link closes. */
  private whenAttached(ms: number): Promise<void> {
    if (this.port) return Promise.resolve();
    if (this.closed) return Promise.reject(this.gone());
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.portWaiters.delete(w);
        reject(new BrineError("STATE_SYNC_RESTARTING", `the state-sync thread did not come back within ${ms / 1000} s; ask again`));
      }, ms);
      const w = {
        resolve: () => {
          clearTimeout(t);
          resolve();
        },
        reject: (e: Error) => {
          clearTimeout(t);
          reject(e);
        },
      };
      this.portWaiters.add(w);
    });
  }

  /**
   * A runner's call: relayed to the current thread; one it did not answer because it ended, or asked while no
   * thread runs, is asked once of the next thread (`again`: it was in flight on a thread that ended).
   */
  private async runnerCall(call: EngineCall): Promise<{ v: unknown; again: boolean }> {
    const sent = this.port !== undefined;
    try {
      return { v: await this.call(call), again: false };
    } catch (e) {
      if (this.closed || !isBrineError(e, "STATE_SYNC_RESTARTING")) throw e;
      await this.whenAttached(restartWaitForCallMsMax);
      if (sent) log.warning(`state-sync: the thread ended during a runner's ${call.op} (${call.channels.join(", ")}); asked again of the restarted thread`);
      return { v: await this.call(call), again: sent };
    }
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

  /**
   * A port for a runner thread: `{k: "call", id, call}` → `{k: "res", id, v, again?}` or `{k: "err", id, code, text}`
   * (RunnerAsk, RunnerAnswer), each call relayed to the current thread (runnerCall). The link keeps its end (unref'd:
   * it does not hold the master open) until the runner's end closes or the link does.
   */
  runnerPort(): MessagePort {
    const { port1, port2 } = new MessageChannel();
    port2.on("message", (a: RunnerAsk) => {
      this.runnerCall(a?.call).then(
        ({ v, again }) => port2.postMessage({ k: "res", id: a.id, v, ...(again ? { again: true as const } : {}) } satisfies RunnerAnswer),
        (e: unknown) => port2.postMessage({ k: "err", id: a?.id, ...portError(e, "STATE_SYNC_FAILED") } satisfies RunnerAnswer),
      );
    });
    port2.once("close", () => this.runnerPorts.delete(port2));
    port2.unref();
    this.runnerPorts.add(port2);
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

  /**
   * Posts to the thread. A message's bytes (`in`, `res`: a peer's, received from the Raft worker by transfer and
   * read by nobody here) go by transfer when they span a buffer of their own, else they are copied.
   */
  private post(m: ToEngine): void {
    if (this.closed || !this.port) return;
    const own = "p" in m ? ownBuffer(m.p) : undefined;
    this.port.postMessage(m, own ? [own] : []);
  }

  private onEngine(m: FromEngine): void {
    switch (m.k) {
      case "req":
        // the thread's bytes came by transfer and pass through: the peer channel's proxy may move them on as they are
        this.channel.request(m.to, STATE_SYNC_CHANNEL, handOver(m.p), m.ms).then(
          (p) => this.post({ k: "res", id: m.id, p }),
          (e: unknown) => this.post({ k: "err", id: m.id, ...portError(e, "CLUSTER_PEER_REMOTE") }),
        );
        return;
      case "send":
        try {
          this.channel.send(m.to, STATE_SYNC_CHANNEL, handOver(m.p));
        } catch (e) {
          dropLog.line(`state-sync note to ${m.to} dropped: ${(e as Error).message}`);
        }
        return;
      case "res":
      case "err": {
        const c = this.calls.get(m.id);
        this.calls.delete(m.id);
        // an answer to a peer's request is bytes that pass through, as above
        if (m.k === "res") c?.resolve(m.v instanceof Uint8Array ? handOver(m.v) : m.v);
        else c?.reject(revivePortError(m, "STATE_SYNC_FAILED"));
        return;
      }
    }
  }

  close(): void {
    this.off();
    this.closed = true;
    this.detach(this.port);
    for (const w of this.portWaiters) w.reject(this.gone());
    this.portWaiters.clear();
    for (const p of this.runnerPorts) p.close();
    this.runnerPorts.clear();
  }
}

