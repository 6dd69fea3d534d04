/**
 * Requests on their way to the leader, and the answers back. On the origin, requests waiting in the
 * RequestTracker are sent when a Ready is built: appended at once if this node leads, otherwise forwarded
 * to the leader in batches (proposals up to maxSizePerMsgBytes per MsgProp, one conf change per message,
 * all reads in one MsgReadIndex). On the leader, a forwarded batch is appended (or refused) and answered
 * with the index it got; a re-delivered batch gets the same answer instead of a second copy. A node that is
 * not the leader refuses forwarded requests so their origin retries elsewhere.
 *
 * Every answer echoes the origin's request ids, incarnation and batch: the origin ignores answers meant for
 * a previous life or an older attempt.
 */
import type { ErrCode } from "../../../shared/errors.js";
import type { RaftLimits } from "./limits.js";
import type { RaftLog } from "./log.js";
import type { RequestTracker } from "./proposals.js";
import type { ReadRequest } from "./read-index.js";
import type { Entry, Message, NodeId, RequestId, RequestKind, Role } from "./types.js";
import { NONE, newMessage } from "./types.js";

/** Leader-side memory of forwarded proposal batches already appended, so a re-delivered MsgProp is not appended twice. */
const seenProposalsMax = 4096;

/** What the request flow needs of the state machine (Raft). */
export interface ForwardingHost {
  readonly id: NodeId;
  readonly incarnation: number;
  readonly limits: RaftLimits;
  readonly term: number;
  readonly role: Role;
  readonly lead: NodeId;
  readonly leadTransferee: NodeId;
  readonly log: RaftLog;
  readonly tracker: RequestTracker;
  send(m: Message): void;
  isRemoved(): boolean;
  acceptProposal(ents: Entry[]): { ok: true; index: number } | { ok: false; code: ErrCode; detail: string; retry: boolean };
  handleReadIndex(req: ReadRequest): void;
  waitsForCommit(id: NodeId, index: number): void;
}

/** The answer to a forwarded request, echoing what identifies it at the origin. */
export function answerTo(
  from: NodeId,
  type: "MsgPropResp" | "MsgReadIndexResp",
  to: NodeId,
  req: { requests: number[]; incarnation: number; batch: number },
): Message {
  return { ...newMessage(type, from, to, 0), requests: req.requests, incarnation: req.incarnation, batch: req.batch };
}

export class Forwarding {
  /** forwarded batches this leader appended, by origin/incarnation/batch: the index they got */
  private readonly seenProposals = new Map<string, number>();

  constructor(private readonly r: ForwardingHost) {}

  /** A new term or role: the memory of appended batches belongs to the previous leadership. */
  reset(): void {
    this.seenProposals.clear();
  }

  // ------------------------------------------------------------------ origin side

  /** Whether flush() would do anything now (waiting requests and somewhere to send them). */
  canFlush(): boolean {
    const r = this.r;
    if (!r.tracker.hasWaiting()) return false;
    if (r.isRemoved()) return true;
    // During a leadership transfer the requests wait for the next leader rather than fail.
    if (r.role === "leader") return r.leadTransferee === NONE;
    return r.lead !== NONE;
  }

  /**
   * Sends requests that were waiting for a leader: appended here if we lead, forwarded (batched) if we know
   * the leader, left waiting otherwise.
   */
  flush(): void {
    const r = this.r;
    if (!this.canFlush()) return;
    if (r.isRemoved()) {
      const gone = this.takeBatch(() => true, NONE);
      r.tracker.reject(gone.ids, gone.batch, "RAFT_NOT_VOTER", `node ${r.id} is not a member of this group`);
      return;
    }
    const to = r.role === "leader" ? r.id : r.lead;
    const props = r.tracker.takeWaiting((k) => k === "propose", to);
    // Batches of at most maxSizePerMsgBytes, so one burst cannot make an unbounded message.
    let start = 0;
    let bytes = 0;
    for (let k = 0; k <= props.length; k++) {
      const p = props[k];
      if (k > start && (p === undefined || bytes + p.data.length > r.limits.maxSizePerMsgBytes)) {
        this.sendRequests(to, "normal", props.slice(start, k));
        start = k;
        bytes = 0;
      }
      if (p) bytes += p.data.length;
    }
    // One conf change per message: the leader refuses a second one in flight anyway.
    for (const p of r.tracker.takeWaiting((k) => k === "conf", to)) this.sendRequests(to, "conf", [p]);
    const reads = r.tracker.takeWaiting((k) => k === "read", to);
    if (reads.length === 0) return;
    const ids = reads.map((p) => p.id);
    const batch = r.tracker.stamp(ids);
    const req: ReadRequest = { from: r.id, requests: ids, batch, incarnation: r.incarnation, key: `${r.id}/${r.incarnation}/${batch}` };
    if (to === r.id) r.handleReadIndex(req);
    else r.send({ ...newMessage("MsgReadIndex", r.id, to, 0), requests: ids, incarnation: r.incarnation, batch });
  }

  private takeBatch(accept: (k: RequestKind) => boolean, to: NodeId): { ids: RequestId[]; batch: number } {
    const ids = this.r.tracker.takeWaiting(accept, to).map((p) => p.id);
    return { ids, batch: this.r.tracker.stamp(ids) };
  }

  /** Appends the batch here (we lead) or forwards it to the leader. */
  private sendRequests(to: NodeId, type: "normal" | "conf", items: { id: RequestId; data: Uint8Array }[]): void {
    const r = this.r;
    const ids = items.map((p) => p.id);
    const batch = r.tracker.stamp(ids);
    const entries: Entry[] = items.map((p) => ({ term: 0, index: 0, type, data: p.data }));
    if (to !== r.id) {
      r.send({ ...newMessage("MsgProp", r.id, to, 0), entries, requests: ids, incarnation: r.incarnation, batch });
      return;
    }
    const res = r.acceptProposal(entries);
    if (res.ok) this.settleAppended(ids, res.index, r.term, batch);
    else if (res.retry) r.tracker.requeue(ids, batch);
    else r.tracker.reject(ids, batch, res.code, res.detail);
  }

  /** The leader's answer to a forwarded proposal batch. */
  onPropResp(m: Message): void {
    const r = this.r;
    if ((m.incarnation ?? 0) !== r.incarnation) return;
    const ids = m.requests ?? [];
    const batch = m.batch ?? 0;
    if (!m.reject) return this.settleAppended(ids, m.index, m.logTerm, batch);
    const reason = m.reason ?? "RAFT_REJECTED";
    if (reason === "RAFT_NO_LEADER") r.tracker.requeue(ids, batch);
    else r.tracker.reject(ids, batch, reason, m.context ?? `refused by leader ${m.from}`);
  }

  /** Records leader-assigned positions; those already handed out as committed are settled right away. */
  private settleAppended(ids: readonly RequestId[], firstIndex: number, term: number, batch: number): void {
    const { log, tracker } = this.r;
    tracker.appended(ids, firstIndex, term, batch);
    if (firstIndex > log.applying) return;
    ids.forEach((id, k) => {
      const index = firstIndex + k;
      if (index > log.applying) return;
      const known = index >= log.firstIndex() - 1 && index <= log.lastIndex();
      tracker.settleAppended(id, known ? log.term(index) : undefined);
    });
  }

  // ------------------------------------------------------------------ leader side

  /** A forwarded proposal batch (MsgProp) reached the leader. */
  onForwardedProposal(m: Message): void {
    const r = this.r;
    const req = { requests: m.requests ?? [], incarnation: m.incarnation ?? 0, batch: m.batch ?? 0 };
    const reply = (fields: Partial<Message>) => r.send({ ...answerTo(r.id, "MsgPropResp", m.from, req), ...fields });
    // A re-delivered batch (network duplicate, sender retry) gets the original answer instead of a second copy.
    const key = `${m.from}/${req.incarnation}/${req.batch}`;
    const seen = this.seenProposals.get(key);
    if (seen !== undefined) return reply({ index: seen, logTerm: r.term });
    const ents = (m.entries ?? []).map((e): Entry => ({ term: 0, index: 0, type: e.type, data: e.data }));
    const res = r.acceptProposal(ents);
    if (!res.ok) return reply({ reject: true, reason: res.retry ? "RAFT_NO_LEADER" : res.code, context: res.detail });
    // the proposer settles its requests when it learns that these entries committed
    r.waitsForCommit(m.from, res.index + ents.length - 1);
    this.seenProposals.set(key, res.index);
    if (this.seenProposals.size > seenProposalsMax) {
      this.seenProposals.delete(this.seenProposals.keys().next().value!);
    }
    reply({ index: res.index, logTerm: r.term });
  }

  /** A forwarded request reached a node that is not the leader: tell the origin to retry elsewhere. */
  refuse(m: Message): void {
    const req = { requests: m.requests ?? [], incarnation: m.incarnation ?? 0, batch: m.batch ?? 0 };
    const type = m.type === "MsgProp" ? "MsgPropResp" : "MsgReadIndexResp";
    this.r.send({ ...answerTo(this.r.id, type, m.from, req), reject: true, reason: "RAFT_NO_LEADER", context: "not the leader" });
  }
}
