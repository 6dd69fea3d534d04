/**
 * The caller's side of the Raft worker's messages (api.ts; main thread or a runner thread), over one endpoint
 * (the Worker itself, or a MessagePort whose other end the worker serves):
 * - a refused call rejects with a BrineError with the worker's code and text (src/shared/port-calls.ts);
 * - a call never hangs: it fails with RAFT_STOPPED when the endpoint closes (the worker exited, or the port's
 *   other side went away) and with RAFT_UNKNOWN after clientCallTimeoutMs (the outcome of a proposal is then
 *   unknown, as the code says), on this thread's one coarse timer for calls; ready() alone has no deadline;
 * - proposals made in the same turn are coalesced: every propose() queued before the next microtask checkpoint
 *   goes to the worker in one `propose` message (each entry still gets its own log entry and its own result).
 *   A round trip costs tens of microseconds of both threads' time; per proposal it would cap a busy caller
 *   far below what the worker's group commit can take.
 */
import type { ListJobsFilter } from "../../lib/store/job-filter.js";
import type { LeaderView } from "./leader-progress.js";
import type { MessagePort, Worker } from "node:worker_threads";
import { BrineError } from "../../shared/errors.js";
import { PortCalls, revivePortError, type CallWait } from "../../shared/port-calls.js";
import type { ClusterEntry } from "./state-machines/entries.js";
import { proposeEntriesMax, type EntryOutcome, type FromRaft, type MembershipChange, type NodeStatus, type ProposeResult, type RaftAnswers, type ReadOptions, type ReadQuery, type ReadResult, type ToRaft } from "./api.js";
import { clientCallTimeoutMs } from "./limits.js";
import type { HeldJobsAnswer } from "./held-jobs.js";
import type { ClusterJob, ClusterJobList } from "./job-placement.js";
import type { MinionAnswer, MinionQuery } from "../../shared/minion-placement.js";
import type { ShedArgs, ShedResult } from "../../lib/store/shed.js";
import type { JoinAttempt } from "./join-host.js";

interface Queued {
  entry: ClusterEntry;
  resolve(r: ProposeResult): void;
  reject(e: BrineError): void;
}

/** A call as posted, without its id (the client adds it). */
type Call = ToRaft extends infer T ? (T extends { id: number } ? Omit<T, "id"> : never) : never;

export class RaftClient {
  private readonly calls: PortCalls<unknown>;
  private closed: BrineError | undefined;
  /** proposals waiting for this turn's flush, by group */
  private queued = new Map<string, Queued[]>();

  /**
   * `endpoint`: the Worker itself (main thread) or a MessagePort connected to the worker. Its "close" (port)
   * or "exit" (worker) event fails every call in flight.
   */
  constructor(
    private readonly endpoint: MessagePort | Worker,
    private readonly timeoutMs = clientCallTimeoutMs(),
  ) {
    this.calls = new PortCalls<unknown>(timeoutMs, () => new BrineError("RAFT_UNKNOWN", `no answer from the raft worker within ${this.timeoutMs} ms`));
    endpoint.on("message", this.onMessage);
    const gone = () => this.shut(new BrineError("RAFT_STOPPED", "the raft worker is gone"));
    endpoint.once("close", gone);
    endpoint.once("exit", gone);
  }

  /** how long one call waits for its answer (a caller that waits longer asks in several calls), ms */
  get callTimeoutMs(): number {
    return this.timeoutMs;
  }

  private readonly onMessage = (m: FromRaft): void => {
    if (m.k === "res") this.calls.resolve(m.id, m.v);
    else if (m.k === "err") this.calls.reject(m.id, revivePortError(m, "RAFT_API_MISUSE"));
  };

  private shut(e: BrineError): void {
    if (this.closed) return;
    this.closed = e;
    this.calls.rejectAll(e);
  }

  private call<K extends keyof RaftAnswers>(msg: Extract<Call, { k: K }>, wait: CallWait = "deadline"): Promise<RaftAnswers[K]> {
    if (this.closed) return Promise.reject(this.closed);
    return this.calls.call((id) => this.endpoint.postMessage({ ...msg, id } as ToRaft), wait) as Promise<RaftAnswers[K]>;
  }

  /**
   * The worker's status once it has started (restored every group from disk and published the ring). No
   * deadline: a start is local work (modules, keys, LMDB) that a loaded box makes slow, not a call that can be
   * lost, and a master that gave up on it would die for its box's load (a fresh-clone CI run at load 30 saw
   * starts past the 15 s call deadline). It fails only when the worker exits (RAFT_STOPPED).
   */
  ready(): Promise<NodeStatus> {
    return this.call({ k: "ready" }, "untilGone");
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

  /** Sends this turn's proposals, one `propose` message per group (and per proposeEntriesMax entries). */
  private flushProposals(): void {
    const queued = this.queued;
    this.queued = new Map();
    for (const [group, all] of queued) {
      for (let at = 0; at < all.length; at += proposeEntriesMax) {
        const part = all.slice(at, at + proposeEntriesMax);
        const entries = part.map((q) => q.entry);
        this.call({ k: "propose", group, entries }).then(
          (outcomes) => outcomes.forEach((o, k) => (o.ok ? part[k]!.resolve({ ...o.r, value: entries[k]! }) : part[k]!.reject(entryError(o)))),
          (e: BrineError) => part.forEach((q) => q.reject(e)),
        );
      }
    }
  }
  /** Each entry committed (ProposeResult) or refused (BrineError), in order; see ToRaft `propose`. */
  async proposeMany(group: string, entries: ClusterEntry[]): Promise<(ProposeResult | BrineError)[]> {
    const outcomes = await this.call({ k: "propose", group, entries });
    return outcomes.map((o, k) => (o.ok ? { ...o.r, value: entries[k]! } : entryError(o)));
  }
  changeMembership(group: string, change: MembershipChange): Promise<ProposeResult> {
    return this.call({ k: "member", group, change });
  }
  read(group: string, query: ReadQuery, opts: ReadOptions = {}): Promise<ReadResult> {
    return this.call({ k: "read", group, query, opts });
  }
  status(): Promise<NodeStatus> {
    return this.call({ k: "status" });
  }
  jobsHeld(max: number): Promise<Record<string, HeldJobsAnswer>> {
    return this.call({ k: "jobsHeld", max });
  }
  joinAttempt(host: string, port: number, timeoutMs: number): Promise<JoinAttempt> {
    return this.call({ k: "joinAttempt", host, port, timeoutMs });
  }
  jobRead(jid: string): Promise<ClusterJob> {
    return this.call({ k: "jobRead", jid });
  }
  /** the newest `max` jobs of every master, merged (`truncated` when there were more) */
  jobList(max: number, filter?: ListJobsFilter): Promise<ClusterJobList> {
    return this.call({ k: "jobList", max, ...(filter ? { filter } : {}) });
  }
  minionQuery(q: MinionQuery): Promise<MinionAnswer> {
    return this.call({ k: "minionQuery", q });
  }
  shedPeers(args: ShedArgs): Promise<Record<string, ShedResult>> {
    return this.call({ k: "shedPeers", args });
  }
  leaderProgress(): Promise<LeaderView> {
    return this.call({ k: "leaderProgress" });
  }
  bootstrap(founders: string[]): Promise<boolean> {
    return this.call({ k: "bootstrap", founders });
  }
  join(): Promise<boolean> {
    return this.call({ k: "join" });
  }
  /** See ToRaft "handOff": before a graceful stop. */
  handOff(): Promise<void> {
    return this.call({ k: "handOff" });
  }
  close(): Promise<void> {
    return this.call({ k: "close" });
  }

  /** The worker serves its messages on `port` too (one-way: messages posted to the other end queue until then). */
  connect(port: MessagePort): void {
    if (this.closed) throw this.closed;
    this.endpoint.postMessage({ k: "connect", port } satisfies ToRaft, [port]);
  }

  /** Stops using the endpoint; calls in flight fail with RAFT_STOPPED. Closes it if it is a port. */
  dispose(): void {
    this.shut(new BrineError("RAFT_STOPPED", "client disposed"));
    this.endpoint.off("message", this.onMessage);
    if ("close" in this.endpoint && typeof this.endpoint.close === "function") (this.endpoint as MessagePort).close();
  }
}

/** A refused entry as the BrineError it was in the worker (same code, same text). */
function entryError(o: Extract<EntryOutcome, { ok: false }>): BrineError {
  return revivePortError(o, "RAFT_API_MISUSE");
}
