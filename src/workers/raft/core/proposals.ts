/**
 * Request tracking: every proposal, conf change and read made on this node gets exactly one outcome, within
 * requestDeadlineTicks. Salt's Raft raised NotLeader on a follower and lost proposals made while there was no
 * leader; here a request waits for a leader, is forwarded to it (batched), and its fate is settled by what
 * actually commits at the index the leader assigned it.
 *
 * Lifecycle of a proposal:  waiting -> forwarded -> appended -> success | rejected | unknown
 *   waiting:   no usable leader yet; sent as soon as one is known. Deadline: RAFT_NO_LEADER (never sent, so
 *              certainly not committed: safe to retry).
 *   forwarded: sent to a leader, no answer yet. A "not appended, retry" answer returns it to waiting.
 *              Deadline: RAFT_UNKNOWN (the send or the answer may have been lost).
 *   appended:  the leader put it at (index, term). When index commits: same term means success, another
 *              term means a new leader overwrote it (RAFT_REJECTED, certainly not committed). Deadline, or a
 *              snapshot that skips index: RAFT_UNKNOWN.
 * Lifecycle of a read:  waiting -> forwarded -> indexed -> success once applied through the read index.
 *
 * Pure: no timers. The tracker counts ticks it is given; Raft drives it.
 */
import type { ErrCode } from "../../../shared/errors.js";
import type { Entry, NodeId, RequestId, RequestKind, RequestResult } from "./types.js";

type PendingState = "waiting" | "forwarded" | "appended" | "indexed" | "done";

interface Pending {
  id: RequestId;
  kind: RequestKind;
  /** entry data for propose/conf; empty for reads */
  data: Uint8Array;
  deadline: number;
  state: PendingState;
  /** appended: assigned position; indexed: read index */
  index: number;
  term: number;
  /** forwarded: the leader it went to */
  to: NodeId;
  /** the send attempt (batch) it is part of; answers to older attempts are ignored */
  attempt: number;
}

export class RequestTracker {
  private now = 0;
  private nextId = 1;
  private attempts = 0;
  /** insertion order == deadline order (every request gets the same deadline offset) */
  private readonly pending = new Map<RequestId, Pending>();
  /** may hold entries that have since left "waiting" (they are skipped); waitingCount counts live ones */
  private waiting: Pending[] = [];
  private waitingCount = 0;
  /** appended proposals by assigned index (two ids may share an index across terms) */
  private readonly byIndex = new Map<number, RequestId[]>();
  /** reads with a read index, waiting for the node to apply through it */
  private indexed: Pending[] = [];
  private results: RequestResult[] = [];

  constructor(
    private readonly deadlineTicks: number,
    private readonly maxPending: number,
  ) {}

  /** Registers a request. Over maxPending it fails at once (RAFT_REJECTED) rather than queue without bound. */
  add(kind: RequestKind, data: Uint8Array): RequestId {
    const id = this.nextId++;
    if (this.pending.size >= this.maxPending) {
      this.results.push({ id, kind, ok: false, code: "RAFT_REJECTED", detail: "too many requests pending on this node" });
      return id;
    }
    const p: Pending = { id, kind, data, deadline: this.now + this.deadlineTicks, state: "waiting", index: 0, term: 0, to: 0, attempt: 0 };
    this.pending.set(id, p);
    this.waiting.push(p);
    this.waitingCount++;
    return id;
  }

  get size(): number {
    return this.pending.size;
  }

  hasWaiting(): boolean {
    return this.waitingCount > 0;
  }

  hasResults(): boolean {
    return this.results.length > 0;
  }

  /**
   * Takes the waiting requests of the kinds `accept` selects, oldest first, and marks them sent to `to`
   * (the leader, possibly this node itself). The caller sends them or settles them at once.
   */
  takeWaiting(accept: (kind: RequestKind) => boolean, to: NodeId): { id: RequestId; kind: RequestKind; data: Uint8Array }[] {
    const out: Pending[] = [];
    const keep: Pending[] = [];
    for (const p of this.waiting) {
      if (p.state !== "waiting") continue;
      if (accept(p.kind)) {
        p.state = "forwarded";
        p.to = to;
        out.push(p);
      } else keep.push(p);
    }
    this.waiting = keep;
    this.waitingCount = keep.length;
    return out;
  }

  /**
   * Starts a send attempt for taken requests and returns its number. The receiver echoes it, so a duplicated
   * or late answer to an earlier attempt cannot settle or requeue a request that has been sent again.
   */
  stamp(ids: readonly RequestId[]): number {
    const attempt = ++this.attempts;
    for (const id of ids) {
      const p = this.pending.get(id);
      if (p) p.attempt = attempt;
    }
    return attempt;
  }

  private current(id: RequestId, attempt: number, state: PendingState): Pending | undefined {
    const p = this.pending.get(id);
    return p && p.state === state && p.attempt === attempt ? p : undefined;
  }

  /** Attempt `attempt` was not taken (no leader there, transfer in progress): wait for the next leader. */
  requeue(ids: readonly RequestId[], attempt: number): void {
    for (const id of ids) {
      const p = this.current(id, attempt, "forwarded");
      if (p) {
        this.waiting.push(p);
        this.waitingCount++;
        p.state = "waiting";
        p.to = 0;
      }
    }
  }

  /** Leader-assigned positions: ids[k] sits at (firstIndex + k, term). */
  appended(ids: readonly RequestId[], firstIndex: number, term: number, attempt: number): void {
    ids.forEach((id, k) => {
      const p = this.current(id, attempt, "forwarded");
      if (!p) return;
      p.state = "appended";
      p.index = firstIndex + k;
      p.term = term;
      const list = this.byIndex.get(p.index);
      if (list) list.push(id);
      else this.byIndex.set(p.index, [id]);
    });
  }

  /** Settles appended proposals whose index is handed out as committed. */
  onCommitted(entries: readonly Entry[]): void {
    if (this.byIndex.size === 0) return;
    for (const e of entries) {
      const ids = this.byIndex.get(e.index);
      if (!ids) continue;
      this.byIndex.delete(e.index);
      for (const id of ids) this.settleAppended(id, e.term);
    }
  }

  /**
   * Settles an appended proposal against the term that committed at its index (undefined: unknowable,
   * e.g. compacted or skipped by a snapshot).
   */
  settleAppended(id: RequestId, committedTerm: number | undefined): void {
    const p = this.pending.get(id);
    if (!p || p.state !== "appended") return;
    if (committedTerm === p.term) {
      this.finish(p, { id, kind: p.kind as "propose" | "conf", ok: true, index: p.index, term: p.term, value: p.data });
    } else if (committedTerm === undefined) {
      this.fail(p, "RAFT_UNKNOWN", `entry ${p.index} was covered by a snapshot before this node saw it commit`);
    } else {
      this.fail(p, "RAFT_REJECTED", `entry ${p.index} was overwritten by term ${committedTerm} (proposed in term ${p.term})`);
    }
  }

  /** A snapshot through `index` was handed out: proposals at or below it can no longer be checked. */
  onSnapshot(index: number): void {
    for (const [i, ids] of this.byIndex) {
      if (i > index) continue;
      this.byIndex.delete(i);
      for (const id of ids) this.settleAppended(id, undefined);
    }
  }

  /** A leader confirmed these reads at read index `index`. */
  readIndexed(ids: readonly RequestId[], index: number, attempt: number): void {
    for (const id of ids) {
      const p = this.current(id, attempt, "forwarded");
      if (!p || p.kind !== "read") continue;
      p.state = "indexed";
      p.index = index;
      this.indexed.push(p);
    }
  }

  /** The node has handed out everything through `applying`: release reads that can now be served. */
  onApplying(applying: number): void {
    if (this.indexed.length === 0) return;
    const keep: Pending[] = [];
    for (const p of this.indexed) {
      if (!this.pending.has(p.id)) continue;
      if (p.index <= applying) this.finish(p, { id: p.id, kind: "read", ok: true, index: p.index });
      else keep.push(p);
    }
    this.indexed = keep;
  }

  /** Final refusal of attempt `attempt` (by the leader, or by local checks). */
  reject(ids: readonly RequestId[], attempt: number, code: ErrCode, detail: string): void {
    for (const id of ids) {
      const p = this.current(id, attempt, "forwarded");
      if (p) this.fail(p, code, detail);
    }
  }

  /** One tick: expire requests whose deadline has come. */
  tick(): void {
    this.now++;
    for (const p of this.pending.values()) {
      if (p.deadline > this.now) break;
      this.expire(p);
    }
  }

  private expire(p: Pending): void {
    const ticks = `${this.deadlineTicks} ticks`;
    switch (p.state) {
      case "waiting":
        return this.fail(p, "RAFT_NO_LEADER", `no leader took the request within ${ticks}`);
      case "forwarded":
        if (p.kind === "read") return this.fail(p, "RAFT_NO_LEADER", `leader ${p.to} did not confirm the read within ${ticks}`);
        return this.fail(p, "RAFT_UNKNOWN", `forwarded to leader ${p.to}, no answer within ${ticks}`);
      case "appended":
        return this.fail(p, "RAFT_UNKNOWN", `appended at ${p.index} in term ${p.term}, not committed within ${ticks}`);
      case "indexed":
        return this.fail(p, "RAFT_NO_LEADER", `read index ${p.index} not applied within ${ticks}`);
      case "done":
        return;
    }
  }

  private fail(p: Pending, code: ErrCode, detail: string): void {
    this.finish(p, { id: p.id, kind: p.kind, ok: false, code, detail });
  }

  private finish(p: Pending, r: RequestResult): void {
    this.pending.delete(p.id);
    if (p.state === "waiting") this.waitingCount--;
    if (p.state === "appended") {
      const ids = this.byIndex.get(p.index);
      if (ids) {
        const rest = ids.filter((x) => x !== p.id);
        if (rest.length > 0) this.byIndex.set(p.index, rest);
        else this.byIndex.delete(p.index);
      }
    }
    p.state = "done";
    this.results.push(r);
  }

  /** Hands over the results gathered since the last call. */
  drainResults(): RequestResult[] {
    const r = this.results;
    this.results = [];
    return r;
  }
}
