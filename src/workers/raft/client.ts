/**
 * The caller's side of the Raft worker API (main thread or a runner thread): a comlink proxy over one
 * endpoint, with what comlink lacks made explicit:
 * - a failed Outcome becomes a BrineError with its code again;
 * - a call never hangs: it fails with RAFT_STOPPED when the endpoint closes (the worker exited, or the port's
 *   other side went away) and with RAFT_UNKNOWN after clientCallTimeoutMs (the outcome of a proposal is then
 *   unknown, as the code says);
 * - proposals made in the same turn are coalesced: every propose() queued before the next microtask checkpoint
 *   goes to the worker in one proposeMany message (each entry still gets its own log entry and its own
 *   result). A round trip through comlink costs tens of microseconds of both threads' time; per proposal it
 *   would cap a busy caller far below what the worker's group commit can take.
 */
import * as Comlink from "comlink";
import type { MessagePort, Worker } from "node:worker_threads";
import { BrineError } from "../../shared/errors.js";
import type { ClusterEntry } from "./state-machines/entries.js";
import { PROPOSE_MANY_MAX, type MembershipChange, type NodeStatus, type Outcome, type ProposeResult, type RaftWorkerApi, type ReadOptions, type ReadQuery, type ReadResult } from "./api.js";
import { nodeEndpoint } from "./comlink-node.js";
import { clientCallTimeoutMs } from "./limits.js";
import type { HeldJobsAnswer } from "./held-jobs.js";
import type { ClusterJob, ClusterJobList } from "./job-placement.js";
import type { ShedArgs, ShedResult } from "../../lib/store/shed.js";
import type { JoinAttempt } from "./join-host.js";

/** How often calls in flight are checked against their deadline, ms (one timer per client, not per call). */
const DEADLINE_SWEEP_MS = 500;

interface Queued {
  entry: ClusterEntry;
  resolve(r: ProposeResult): void;
  reject(e: BrineError): void;
}

interface InFlight {
  what: string;
  deadline: number;
  reject(e: BrineError): void;
}

export class RaftClient {
  private readonly api: Comlink.Remote<RaftWorkerApi>;
  private readonly pending = new Map<number, InFlight>();
  private nextCall = 1;
  private sweeper: NodeJS.Timeout | undefined;
  private closed: BrineError | undefined;
  private readonly endpoint: MessagePort | Worker;
  /** proposals waiting for this turn's flush, by group */
  private queued = new Map<string, Queued[]>();

  /**
   * `endpoint`: the Worker itself (main thread) or a MessagePort connected to the worker. Its "close" (port)
   * or "exit" (worker) event fails every call in flight.
   */
  constructor(
    endpoint: MessagePort | Worker,
    private readonly timeoutMs = clientCallTimeoutMs(),
  ) {
    this.endpoint = endpoint;
    this.api = Comlink.wrap<RaftWorkerApi>(nodeEndpoint(endpoint));
    const gone = () => this.shut(new BrineError("RAFT_STOPPED", "the raft worker is gone"));
    endpoint.once("close", gone);
    endpoint.once("exit", gone);
  }

  private shut(e: BrineError): void {
    if (this.closed) return;
    this.closed = e;
    for (const c of this.pending.values()) c.reject(e);
    this.pending.clear();
    this.stopSweeper();
  }

  private stopSweeper(): void {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /** Fails calls past their deadline; runs only while calls are in flight, and never keeps a thread alive. */
  private sweep(): void {
    const now = Date.now();
    for (const [id, c] of this.pending) {
      if (c.deadline > now) break; // insertion order is deadline order
      this.pending.delete(id);
      c.reject(new BrineError("RAFT_UNKNOWN", `${c.what}: no answer from the raft worker within ${this.timeoutMs} ms`));
    }
    if (this.pending.size === 0) this.stopSweeper();
  }

  private call<T>(what: string, invoke: () => Promise<Outcome<T>>): Promise<T> {
    if (this.closed) return Promise.reject(this.closed);
    return new Promise<T>((resolve, reject) => {
      const id = this.nextCall++;
      this.pending.set(id, { what, deadline: Date.now() + this.timeoutMs, reject });
      if (!this.sweeper) {
        this.sweeper = setInterval(() => this.sweep(), DEADLINE_SWEEP_MS);
        this.sweeper.unref();
      }
      invoke().then(
        (o) => {
          if (!this.pending.delete(id)) return; // already failed (deadline, close)
          if (o.ok) resolve(o.value);
          else reject(toError(o));
        },
        (e: Error) => {
          if (this.pending.delete(id)) reject(new BrineError("RAFT_STOPPED", `${what}: ${e.message}`));
        },
      );
    });
  }

  ready(): Promise<NodeStatus> {
    return this.call("ready", () => this.api.ready());
  }
  propose(group: string, entry: ClusterEntry): Promise<ProposeResult> {
    if (this.closed) return Promise.reject(this.closed);
    return new Promise<ProposeResult>((resolve, reject) => {
      if (this.queued.size === 0) queueMicrotask(() => this.flushProposals());
      let q = this.queued.get(group);
      if (!q) this.queued.set(group, (q = []));
      q.push({ entry, resolve, reject });
    });
  }

  /** Sends this turn's proposals, one proposeMany per group (and per PROPOSE_MANY_MAX entries). */
  private flushProposals(): void {
    const queued = this.queued;
    this.queued = new Map();
    for (const [group, all] of queued) {
      for (let at = 0; at < all.length; at += PROPOSE_MANY_MAX) {
        const part = all.slice(at, at + PROPOSE_MANY_MAX);
        const entries = part.map((q) => q.entry);
        this.call("propose", () => this.api.proposeMany(group, entries)).then(
          (outcomes) => outcomes.forEach((o, k) => (o.ok ? part[k]!.resolve({ ...o.value, value: entries[k]! }) : part[k]!.reject(toError(o)))),
          (e: BrineError) => part.forEach((q) => q.reject(e)),
        );
      }
    }
  }
  /** Each entry committed (ProposeResult) or refused (BrineError), in order; see RaftWorkerApi.proposeMany. */
  async proposeMany(group: string, entries: ClusterEntry[]): Promise<(ProposeResult | BrineError)[]> {
    const outcomes = await this.call("proposeMany", () => this.api.proposeMany(group, entries));
    return outcomes.map((o, k) => (o.ok ? { ...o.value, value: entries[k]! } : toError(o)));
  }
  changeMembership(group: string, change: MembershipChange): Promise<ProposeResult> {
    return this.call("changeMembership", () => this.api.changeMembership(group, change));
  }
  read(group: string, query: ReadQuery, opts: ReadOptions = {}): Promise<ReadResult> {
    return this.call("read", () => this.api.read(group, query, opts));
  }
  status(): Promise<NodeStatus> {
    return this.call("status", () => this.api.status());
  }
  jobsHeld(max: number): Promise<Record<string, HeldJobsAnswer>> {
    return this.call("jobsHeld", () => this.api.jobsHeld(max));
  }
  joinAttempt(host: string, port: number, timeoutMs: number): Promise<JoinAttempt> {
    return this.call("joinAttempt", () => this.api.joinAttempt(host, port, timeoutMs));
  }
  jobRead(jid: string): Promise<ClusterJob> {
    return this.call("jobRead", () => this.api.jobRead(jid));
  }
  jobList(): Promise<ClusterJobList> {
    return this.call("jobList", () => this.api.jobList());
  }
  shedPeers(args: ShedArgs): Promise<Record<string, ShedResult>> {
    return this.call("shedPeers", () => this.api.shedPeers(args));
  }
  bootstrap(founders: string[]): Promise<boolean> {
    return this.call("bootstrap", () => this.api.bootstrap(founders));
  }
  join(): Promise<boolean> {
    return this.call("join", () => this.api.join());
  }
  close(): Promise<void> {
    return this.call("close", () => this.api.close());
  }

  /** Serves the API on `port` too (fire and forget: messages posted to the other end queue until then). */
  connect(port: MessagePort): void {
    if (this.closed) throw this.closed;
    void this.api.connect(Comlink.transfer(port, [port as never]));
  }

  /** Stops using the endpoint; calls in flight fail with RAFT_STOPPED. Closes it if it is a port. */
  dispose(): void {
    this.shut(new BrineError("RAFT_STOPPED", "client disposed"));
    this.api[Comlink.releaseProxy]();
    if ("close" in this.endpoint && typeof this.endpoint.close === "function") (this.endpoint as MessagePort).close();
  }
}

/** A failed Outcome as the BrineError it was in the worker (same code, same message). */
function toError(o: { code: BrineError["code"]; message: string }): BrineError {
  const e = new BrineError(o.code);
  e.message = o.message;
  return e;
}
