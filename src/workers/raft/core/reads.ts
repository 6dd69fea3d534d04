/**
 * Linearizable reads (thesis §6.4), both ends of the flow. A leader serves a batch of reads at the commit
 * index it had when the batch arrived, once a heartbeat round shows that a quorum still follows it
 * (read-index.ts keeps those rounds); until it has committed an entry of its own term its commit index may
 * be stale, so reads wait for that first. The origin of a batch (the leader itself or a follower that
 * forwarded it) answers each read once it has applied through the read index (RequestTracker).
 *
 * A leader that steps down sends the reads it has not confirmed back to their origins, which retry them with
 * the next leader.
 */
import { answerTo } from "./forwarding.js";
import type { RaftLog } from "./log.js";
import type { ProgressTracker } from "./progress.js";
import type { RequestTracker } from "./proposals.js";
import { hasQuorum } from "./quorum.js";
import type { ReadRequest } from "./read-index.js";
import { ReadIndexQueue } from "./read-index.js";
import type { Message, NodeId, RequestId } from "./types.js";

/** What the read flow needs of the state machine (Raft). */
export interface ReadHost {
  readonly id: NodeId;
  readonly incarnation: number;
  readonly term: number;
  readonly log: RaftLog;
  readonly prs: ProgressTracker;
  readonly tracker: RequestTracker;
  send(m: Message): void;
  bcastHeartbeat(): void;
  /** follower `id` settles requests once it knows `index` is committed */
  waitsForCommit(id: NodeId, index: number): void;
}

/** The read batch a MsgReadIndex carries. */
export function readRequestOf(m: Message): ReadRequest {
  const incarnation = m.incarnation ?? 0;
  const batch = m.batch ?? 0;
  return { from: m.from, requests: m.requests ?? [], batch, incarnation, key: `${m.from}/${incarnation}/${batch}` };
}

export class Reads {
  private readonly rounds = new ReadIndexQueue();
  /** reads that arrived before this leader committed an entry of its term (its commit index may be stale) */
  private pending: ReadRequest[] = [];

  constructor(private readonly r: ReadHost) {}

  /** Whether any read waits for a round or for this leader's first commit (a group with one may not rest). */
  busy(): boolean {
    return this.pending.length > 0 || this.rounds.size > 0;
  }

  /** The key of the latest round, carried by heartbeats so their answers acknowledge it. */
  lastKey(): string | undefined {
    return this.rounds.lastKey();
  }

  /** Leader: a batch of reads (its own or forwarded) to serve. */
  request(req: ReadRequest): void {
    const r = this.r;
    // Until an entry of this term commits, our commit index may lag what the previous leader committed. A
    // sole voter too: with asynchronous storage writes it commits its first entry only once that is durable.
    if (r.log.termOrZero(r.log.committed) !== r.term) {
      this.pending.push(req);
      return;
    }
    if (r.prs.voters.size === 1 && r.prs.isVoter(r.id)) {
      this.answer(req, r.log.committed);
      return;
    }
    if (this.rounds.add(r.log.committed, req, r.id)) r.bcastHeartbeat();
  }

  /** Leader: the commit index moved; reads that waited for the first commit of this term are served now. */
  committed(): void {
    if (this.pending.length === 0) return;
    const waiting = this.pending;
    this.pending = [];
    for (const req of waiting) this.request(req);
  }

  /** Leader: a heartbeat answer acknowledging round `key`; a quorum releases it and every earlier round. */
  ack(from: NodeId, key: string): void {
    const acks = this.rounds.recvAck(from, key);
    if (!acks || !hasQuorum(this.r.prs.voters, (id) => acks.has(id))) return;
    for (const round of this.rounds.advance(key)) this.answer(round.req, round.index);
  }

  private answer(req: ReadRequest, index: number): void {
    const r = this.r;
    if (req.from === r.id) {
      if (req.incarnation === r.incarnation) this.indexed(req.requests, index, req.batch);
      return;
    }
    r.send({ ...answerTo(r.id, "MsgReadIndexResp", req.from, req), index });
    // the reader answers once it applied through `index`, so it must learn that `index` is committed
    r.waitsForCommit(req.from, index);
  }

  /** Stepping down: reads not yet confirmed go back to their origins to be retried with the next leader. */
  abandon(): void {
    const r = this.r;
    const rounds = [...this.rounds.drain().map((x) => x.req), ...this.pending];
    this.pending = [];
    for (const req of rounds) {
      if (req.from === r.id) {
        if (req.incarnation === r.incarnation) r.tracker.requeue(req.requests, req.batch);
        continue;
      }
      r.send({ ...answerTo(r.id, "MsgReadIndexResp", req.from, req), reject: true, reason: "RAFT_NO_LEADER" });
    }
  }

  /** Origin: the leader's answer to a forwarded batch. */
  onResponse(m: Message): void {
    const r = this.r;
    if ((m.incarnation ?? 0) !== r.incarnation) return; // answer to a previous life of this node
    const ids = m.requests ?? [];
    if (m.reject) r.tracker.requeue(ids, m.batch ?? 0);
    else this.indexed(ids, m.index, m.batch ?? 0);
  }

  /** A read index is known; reads this node has already applied through are answered right away. */
  private indexed(ids: readonly RequestId[], index: number, batch: number): void {
    this.r.tracker.readIndexed(ids, index, batch);
    this.r.tracker.onApplying(this.r.log.applying);
  }
}
