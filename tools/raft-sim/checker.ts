/**
 * Safety properties, checked continuously while the simulator runs (paper §5.2–5.4, plus the properties a
 * client relies on). A property is checked at the moment the evidence appears (a write, a message, an
 * application, a result) or, for whole-cluster properties, after every simulator step.
 *
 * - Election safety: at most one leader per term, ever.
 * - Leader append-only: while a node leads a term, entries it holds at or below its previous last index keep
 *   their terms.
 * - Log matching: two entries with the same (index, term) carry the same data and the same predecessor term
 *   (by induction, identical prefixes). Checked on every durable append of every node.
 * - Leader completeness: an entry committed in term T is in the log of every leader of a term > T.
 * - State machine safety: no two nodes apply different entries at the same index; each node applies indexes
 *   in order without gaps; an installed snapshot equals what others applied through its index.
 * - Durability before promises: a granted vote and an append acknowledgement are only sent once the
 *   HardState/entries they promise are on the node's disk; a leader's append or heartbeat never announces a
 *   commit index beyond its own durable log (its entries may still be in flight to its disk). With
 *   asynchronous leader writes the leader may commit (and announce) what a quorum of followers holds before
 *   its own write lands; what is checked instead is that it never counts its own copy (its own match) beyond
 *   what its disk holds.
 * - No acknowledged proposal lost: a successful result names (index, term, value) that was committed with
 *   exactly that value, and (checked at the end) every member eventually applies it.
 * - Linearizable reads: a read's index is at least the index of every write acknowledged before the read began.
 * - One membership change in flight: a leader's log never holds two conf entries beyond what it applied.
 * - Monotone commit: a node's durable commit index never decreases.
 * - Log bookkeeping: firstIndex-1 <= applied <= applying <= committed <= lastIndex on every live node.
 */
import type { Entry, NodeId, RequestResult, Snapshot } from "../../src/workers/raft/core/types.js";
import type { SimNode } from "./node.js";
import { fnv1a } from "./rng.js";

export class Violation extends Error {
  constructor(message: string) {
    super(message);
    this.name = "Violation";
  }
}

interface AppliedRecord {
  term: number;
  hash: number;
  digest: string;
}

export class Checker {
  private readonly leaders = new Map<number, NodeId>();
  private readonly leaderView = new Map<string, { lastIndex: number; lastTerm: number; verified: number }>();
  private readonly entryFacts = new Map<string, { hash: number; prevTerm: number }>();
  private readonly applied = new Map<number, AppliedRecord>();
  /** index -> smallest leader term seen holding it committed, and the entry's term */
  private readonly committedIn = new Map<number, { commitTerm: number; entryTerm: number }>();
  private maxCommitted = 0;
  private readonly diskCommit = new Map<NodeId, number>();
  /** proposals in flight: `${node}/${life}/${requestId}` -> value */
  private readonly proposals = new Map<string, Uint8Array>();
  private readonly readStarts = new Map<string, number>();
  maxAckedIndex = 0;
  ackedCount = 0;
  readsOk = 0;
  failedResults = 0;

  private fail(msg: string): never {
    throw new Violation(msg);
  }

  // ------------------------------------------------------------------ requests

  proposed(node: SimNode, id: number, value: Uint8Array): void {
    this.proposals.set(`${node.id}/${node.lives}/${id}`, value);
  }

  readStarted(node: SimNode, id: number): void {
    this.readStarts.set(`${node.id}/${node.lives}/${id}`, this.maxAckedIndex);
  }

  result(node: SimNode, r: RequestResult): void {
    const key = `${node.id}/${node.lives}/${r.id}`;
    if (!r.ok) {
      this.failedResults++;
      this.proposals.delete(key);
      this.readStarts.delete(key);
      return;
    }
    if (r.kind === "read") {
      const floor = this.readStarts.get(key);
      this.readStarts.delete(key);
      if (floor === undefined) this.fail(`node ${node.id}: read result for unknown request ${r.id}`);
      if (r.index < floor) this.fail(`node ${node.id}: stale read at index ${r.index}, a write was acknowledged at ${floor} before it began`);
      if (node.app.applied < r.index) this.fail(`node ${node.id}: read at ${r.index} delivered before applying it (applied ${node.app.applied})`);
      this.readsOk++;
      return;
    }
    const value = this.proposals.get(key);
    this.proposals.delete(key);
    if (r.kind === "propose") {
      if (value === undefined) this.fail(`node ${node.id}: result for unknown proposal ${r.id}`);
      if (!bytesEqual(value, r.value)) this.fail(`node ${node.id}: proposal ${r.id} acknowledged with another value`);
    }
    const rec = this.applied.get(r.index);
    if (!rec) this.fail(`node ${node.id}: proposal acknowledged at ${r.index} which no node applied`);
    if (rec.term !== r.term || rec.hash !== hashData(r.kind === "conf" ? "conf" : "normal", r.value)) {
      this.fail(`node ${node.id}: acknowledged ${r.term}/${r.index} but ${rec.term}/${r.index} with other data was applied`);
    }
    this.maxAckedIndex = Math.max(this.maxAckedIndex, r.index);
    this.ackedCount++;
  }

  // ------------------------------------------------------------------ per-node evidence

  persisted(node: SimNode, entries: readonly Entry[]): void {
    const disk = node.disk;
    for (const e of entries) {
      if (e.index < disk.firstIndex()) continue;
      const prevTerm = disk.term(e.index - 1);
      const key = `${e.index}/${e.term}`;
      const fact = { hash: hashEntry(e), prevTerm };
      const known = this.entryFacts.get(key);
      if (!known) this.entryFacts.set(key, fact);
      else if (known.hash !== fact.hash || known.prevTerm !== fact.prevTerm) {
        this.fail(`log matching: node ${node.id} holds ${key} unlike another node (data or preceding term differ)`);
      }
    }
    const commit = disk.initialState().hardState.commit;
    const prev = this.diskCommit.get(node.id) ?? 0;
    if (commit < prev) this.fail(`node ${node.id}: durable commit went back from ${prev} to ${commit}`);
    this.diskCommit.set(node.id, commit);
  }

  sent(node: SimNode, type: string, to: NodeId, term: number, index: number, reject: boolean, commit = 0): void {
    if ((type === "MsgApp" || type === "MsgHeartbeat") && !node.asyncLeaderWrites && commit > node.disk.lastIndex()) {
      this.fail(`node ${node.id}: ${type} announced commit ${commit} but its disk ends at ${node.disk.lastIndex()}`);
    }
    if (reject || (type !== "MsgVoteResp" && type !== "MsgAppResp")) return;
    // Several steps can precede one Ready, so the disk may already hold a later state than the one a message
    // was written in: a vote or acknowledgement from an older term is covered by the durable newer term (the
    // node can never act in the older term again). In the message's own term the disk must back it.
    const hs = node.disk.initialState().hardState;
    if (hs.term < term) this.fail(`node ${node.id}: sent ${type} in term ${term} with term ${hs.term} on disk`);
    if (hs.term > term) return;
    if (type === "MsgVoteResp" && hs.vote !== to) {
      this.fail(`node ${node.id}: granted vote to ${to} in term ${term} before persisting it (disk: vote ${hs.vote})`);
    }
    if (type === "MsgAppResp" && index > node.disk.lastIndex()) {
      this.fail(`node ${node.id}: acknowledged index ${index} but its disk ends at ${node.disk.lastIndex()}`);
    }
  }

  appliedEntry(node: SimNode, e: Entry): void {
    const rec: AppliedRecord = { term: e.term, hash: hashEntry(e), digest: node.app.digest() };
    const known = this.applied.get(e.index);
    if (!known) this.applied.set(e.index, rec);
    else if (known.term !== rec.term || known.hash !== rec.hash || known.digest !== rec.digest) {
      this.fail(`state machine safety: node ${node.id} applied ${e.term}/${e.index}, another node applied ${known.term}/${e.index} (or a different history)`);
    }
  }

  snapshotInstalled(node: SimNode, s: Snapshot): void {
    if (s.data.length === 0) return; // genesis
    const known = this.applied.get(s.metadata.index);
    if (!known) this.fail(`node ${node.id}: installed snapshot at ${s.metadata.index} that no node applied`);
    if (known.digest !== node.app.digest() || known.term !== s.metadata.term) {
      this.fail(`node ${node.id}: snapshot at ${s.metadata.index} differs from the applied history`);
    }
  }

  // ------------------------------------------------------------------ whole-cluster, after each step

  afterStep(nodes: readonly SimNode[]): void {
    for (const n of nodes) {
      const r = n.rn?.raft;
      if (!r) continue;
      try {
        r.log.assertInvariants();
      } catch (e) {
        this.fail(`node ${n.id}: ${(e as Error).message}`);
      }
      if (r.role !== "leader") continue;
      const prevLeader = this.leaders.get(r.term);
      if (prevLeader !== undefined && prevLeader !== n.id) {
        this.fail(`election safety: nodes ${prevLeader} and ${n.id} both led term ${r.term}`);
      }
      this.leaders.set(r.term, n.id);
      this.checkLeaderLog(n);
      if (n.asyncLeaderWrites) this.checkOwnCopy(n); // a synchronous shell persists before it steps again
    }
  }

  /** A leader counts its own copy of an entry toward a quorum only once its disk holds that very entry. */
  private checkOwnCopy(n: SimNode): void {
    const r = n.rn!.raft;
    const match = r.prs.get(r.id)?.match ?? 0;
    const disk = n.disk;
    if (match < disk.firstIndex() - 1) return; // behind a snapshot on the disk: durable
    if (match > disk.lastIndex() || disk.term(match) !== r.log.termOrZero(match)) {
      this.fail(`leader ${n.id} of term ${r.term} counts its own copy through ${match} but its disk ends at ${disk.lastIndex()}`);
    }
  }

  private checkLeaderLog(n: SimNode): void {
    const r = n.rn!.raft;
    const log = r.log;
    const key = `${n.id}/${n.lives}/${r.term}`;
    let view = this.leaderView.get(key);
    if (view) {
      if (log.lastIndex() < view.lastIndex || log.termOrZero(view.lastIndex) !== view.lastTerm) {
        if (view.lastIndex >= log.firstIndex() - 1) {
          this.fail(`leader append-only: leader ${n.id} of term ${r.term} lost or rewrote its entry ${view.lastTerm}/${view.lastIndex}`);
        }
      }
    } else {
      view = { lastIndex: 0, lastTerm: 0, verified: log.firstIndex() - 1 };
      this.leaderView.set(key, view);
    }
    view.lastIndex = log.lastIndex();
    view.lastTerm = log.lastTerm();

    // Record what this leader has committed (the earliest term at which an index is known committed).
    for (let i = this.maxCommitted + 1; i <= log.committed; i++) {
      if (i < log.firstIndex()) continue;
      this.committedIn.set(i, { commitTerm: r.term, entryTerm: log.term(i) });
    }
    this.maxCommitted = Math.max(this.maxCommitted, log.committed);

    // Leader completeness: every index committed in an earlier term must be in this leader's log, same term.
    for (let i = Math.max(view.verified + 1, log.firstIndex()); i <= this.maxCommitted; i++) {
      const c = this.committedIn.get(i);
      if (c && c.commitTerm < r.term) {
        if (i > log.lastIndex() || log.term(i) !== c.entryTerm) {
          this.fail(`leader completeness: leader ${n.id} of term ${r.term} lacks entry ${c.entryTerm}/${i} committed in term ${c.commitTerm}`);
        }
      }
      view.verified = i;
    }

    // One membership change in flight: at most one conf entry beyond what the leader has handed out.
    if (log.lastIndex() > log.applying) {
      const lo = Math.max(log.applying + 1, log.firstIndex());
      const confs = log.slice(lo, log.lastIndex() + 1, Number.MAX_SAFE_INTEGER).filter((e) => e.type === "conf").length;
      if (confs > 1) this.fail(`leader ${n.id}: ${confs} membership changes in flight`);
    }
  }

  /** End of run: every acknowledged write is applied on every given (healthy member) node. */
  finalCheck(members: readonly SimNode[]): void {
    for (const n of members) {
      if (n.app.applied < this.maxAckedIndex) {
        this.fail(`acknowledged write at ${this.maxAckedIndex} not applied on member ${n.id} (applied ${n.app.applied})`);
      }
    }
  }
}

function hashData(type: Entry["type"], data: Uint8Array): number {
  return type === "conf" ? (fnv1a(data) ^ 0x9e3779b9) >>> 0 : fnv1a(data);
}

function hashEntry(e: Entry): number {
  return hashData(e.type, e.data);
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
