/**
 * Leader-side ReadIndex (thesis §6.4): a read is linearizable if it is served at an index the leader had
 * committed when the read arrived, after the leader has confirmed with a heartbeat round that a quorum still
 * follows it (so no newer leader can have committed anything the read would miss).
 *
 * Rounds are kept in arrival order; an acknowledgement of round k proves leadership at the time every earlier
 * round was registered too, so a quorum on round k releases all rounds up to k.
 *
 * This is the leader's bookkeeping only; the read flow around it (both ends) is in reads.ts.
 */
import type { NodeId } from "./types.js";

/** One batch of reads from one node: `requests` are the origin's request ids. */
export interface ReadRequest {
  from: NodeId;
  requests: number[];
  /** the origin's send attempt */
  batch: number;
  /** unique across the cluster: origin id, incarnation and batch */
  key: string;
  /** the origin's incarnation, echoed back so a restarted origin ignores answers meant for its previous life */
  incarnation: number;
}

export interface ReadRound {
  req: ReadRequest;
  /** the leader's commit index when the request arrived */
  index: number;
  acks: Set<NodeId>;
}

export class ReadIndexQueue {
  private readonly rounds = new Map<string, ReadRound>();

  /** Registers a round; a duplicate key (a re-delivered request) is ignored. Returns false if ignored. */
  add(index: number, req: ReadRequest, self: NodeId): boolean {
    if (this.rounds.has(req.key)) return false;
    this.rounds.set(req.key, { req, index, acks: new Set([self]) });
    return true;
  }

  /** Records a heartbeat acknowledgement carrying round key; returns the round's ack set, if known. */
  recvAck(from: NodeId, key: string): Set<NodeId> | undefined {
    const r = this.rounds.get(key);
    if (!r) return undefined;
    r.acks.add(from);
    return r.acks;
  }

  /** Removes and returns every round up to and including `key`, oldest first. */
  advance(key: string): ReadRound[] {
    if (!this.rounds.has(key)) return [];
    const out: ReadRound[] = [];
    for (const [k, r] of this.rounds) {
      out.push(r);
      this.rounds.delete(k);
      if (k === key) break;
    }
    return out;
  }

  lastKey(): string | undefined {
    let last: string | undefined;
    for (const k of this.rounds.keys()) last = k;
    return last;
  }

  get size(): number {
    return this.rounds.size;
  }

  /** Removes every round (the leader stepped down); the caller answers them. */
  drain(): ReadRound[] {
    const out = [...this.rounds.values()];
    this.rounds.clear();
    return out;
  }
}
