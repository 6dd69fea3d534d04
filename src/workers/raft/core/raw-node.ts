/**
 * RawNode: the synchronous API a shell drives for one Raft group. It owns no thread, timer or disk; the
 * shell's loop is:
 *
 *   on timer:    node.tick()                 (a resting group's tick only advances request deadlines)
 *   when idle:   node.quiesce()              (a leader with nothing in flight puts its group to rest)
 *   on message:  node.step(msg)
 *   on request:  id = node.propose(data) / proposeConfChange(cc) / readIndex()
 *   then:        while (node.hasReady()) { const rd = node.ready(); <persist, send, apply, deliver>; node.advance(); }
 *
 * See `Ready` (types.ts) for the order the shell must follow; it is what makes acknowledgements promises.
 */
import { BrineError } from "../../../shared/errors.js";
import { assertNodeId, cloneConfState, encodeConfChange } from "./confchange.js";
import type { ProgressState } from "./progress.js";
import type { RaftConfig } from "./raft.js";
import { Raft } from "./raft.js";
import type { ConfChange, ConfState, HardState, Message, NodeId, Ready, RequestId, Role, SoftState } from "./types.js";
import { NONE, isHardStateEqual, isLocalMessage, isResponseMessage, newMessage } from "./types.js";

export interface ProgressStatus {
  match: number;
  next: number;
  state: ProgressState;
  recentActive: boolean;
  isLearner: boolean;
}

export interface Status {
  id: NodeId;
  role: Role;
  lead: NodeId;
  term: number;
  vote: NodeId;
  commit: number;
  applied: number;
  firstIndex: number;
  lastIndex: number;
  leadTransferee: NodeId;
  confState: ConfState;
  pendingRequests: number;
  /** the group rests on this node (quiesce) */
  quiesced: boolean;
  /** leader only */
  progress?: Map<NodeId, ProgressStatus>;
}

export class RawNode {
  readonly raft: Raft;
  private prevSoft: SoftState;
  private prevHard: HardState;
  /** the Ready handed out and not yet advanced, with the index it handed out through */
  private outstanding: { rd: Ready; applying: number } | undefined;

  constructor(cfg: RaftConfig) {
    this.raft = new Raft(cfg);
    this.prevSoft = { lead: this.raft.lead, role: this.raft.role };
    this.prevHard = this.raft.hardState();
  }

  /** One unit of logical time. */
  tick(): void {
    this.raft.tick();
  }

  /**
   * Puts the group to rest if this node leads it and nothing is in flight (every member holds the whole log,
   * committed and applied; no request, read or transfer pending): its last heartbeat, flagged `quiesce`,
   * goes out in the next Ready and then it sends nothing until it wakes. Followers that receive it rest too.
   * Returns whether the group rests; false (nothing done) when it may not. See Raft's "Resting groups".
   */
  quiesce(): boolean {
    return this.raft.quiesce();
  }

  /** Whether this node rests (a resting group is woken by requests and by the messages that need it). */
  get quiesced(): boolean {
    return this.raft.quiesced;
  }

  /** Starts an election now (skipping the timeout). Only a voter may campaign. */
  campaign(): void {
    if (!this.raft.promotable()) throw new BrineError("RAFT_NOT_VOTER", `node ${this.raft.id} cannot campaign`);
    this.raft.step(newMessage("MsgHup", this.raft.id, this.raft.id, 0));
  }

  /**
   * A message from a peer. Local kinds are refused (they would let a peer trigger our timers), and so are
   * responses from nodes outside the configuration (stale traffic from removed members).
   */
  step(m: Message): void {
    if (isLocalMessage(m.type)) throw new BrineError("RAFT_API_MISUSE", `${m.type} is local-only`);
    if (m.to !== this.raft.id) throw new BrineError("RAFT_API_MISUSE", `message for ${m.to} stepped into ${this.raft.id}`);
    const forwarded = m.type === "MsgPropResp" || m.type === "MsgReadIndexResp";
    if (isResponseMessage(m.type) && !forwarded && !this.raft.prs.isMember(m.from)) return;
    this.raft.step(m);
  }

  /** Proposes opaque data; the outcome arrives in a later Ready's results. */
  propose(data: Uint8Array): RequestId {
    this.raft.unquiesce();
    return this.raft.tracker.add("propose", data);
  }

  /** Proposes one membership change; refused with RAFT_CONF_IN_FLIGHT while another is uncommitted. */
  proposeConfChange(cc: ConfChange): RequestId {
    assertNodeId(cc.node);
    this.raft.unquiesce();
    return this.raft.tracker.add("conf", encodeConfChange(cc));
  }

  /** A linearizable read: succeeds with a read index once this node has applied through it. */
  readIndex(): RequestId {
    this.raft.unquiesce();
    return this.raft.tracker.add("read", new Uint8Array(0));
  }

  /**
   * Asks the leader to hand leadership to `target` (forwarded if we are a follower). Best effort: watch
   * status().lead. The target must be a voter.
   */
  transferLeader(target: NodeId): void {
    if (!this.raft.prs.isVoter(target)) throw new BrineError("RAFT_NOT_VOTER", `transfer target ${target} is not a voter`);
    this.raft.unquiesce();
    this.raft.step({ ...newMessage("MsgTransferLeader", this.raft.id, this.raft.id, 0), transferee: target });
  }

  /**
   * Who should lead after us when this leader stops on purpose (a graceful shutdown hands leadership over
   * before it closes): the other voter holding the most of the log, among those heard from in the current
   * check-quorum window if any is; the lower id on a tie. NONE when this node does not lead or leads alone.
   */
  handOffTarget(): NodeId {
    const r = this.raft;
    if (r.role !== "leader") return NONE;
    let best: { id: NodeId; active: boolean; match: number } | undefined;
    for (const id of [...r.prs.voters].sort((a, b) => a - b)) {
      const pr = r.prs.get(id);
      if (id === r.id || !pr) continue;
      const c = { id, active: pr.recentActive, match: pr.match };
      if (!best || (c.active && !best.active) || (c.active === best.active && c.match > best.match)) best = c;
    }
    return best?.id ?? NONE;
  }

  /**
   * The transport could not reach `id` (etcd's ReportUnreachable): a leader stops pipelining to it and falls
   * back to probing (one append per heartbeat answer), so a dead peer does not pile up appends. A follower
   * told so about its own leader takes it as a hint that the leader died: it stops honouring the leader's
   * lease and campaigns within a few ticks (Raft.suspectLeader).
   */
  reportUnreachable(id: NodeId): void {
    this.raft.step(newMessage("MsgUnreachable", id, this.raft.id, 0));
  }

  /**
   * The transport reaches `id` again: a leader probing it sends its probe now rather than at the peer's next
   * heartbeat answer. Harmless when `id` was never unreachable (at worst one duplicate append).
   */
  reportReachable(id: NodeId): void {
    this.raft.step(newMessage("MsgReachable", id, this.raft.id, 0));
  }

  hasReady(): boolean {
    const r = this.raft;
    if (this.outstanding) return false;
    if (r.msgs.length > 0 || r.tracker.hasResults()) return true;
    if (r.log.unstable.hasEntriesToWrite() || r.log.unstable.snapshot) return true;
    if (r.log.hasNextCommittedEnts()) return true;
    if (r.lead !== this.prevSoft.lead || r.role !== this.prevSoft.role) return true;
    if (!isHardStateEqual(r.hardState(), this.prevHard)) return true;
    return r.canFlushRequests();
  }

  /** Everything to persist, send and apply since the last Ready. Call advance() when done with it. */
  ready(): Ready {
    if (this.outstanding) throw new BrineError("RAFT_API_MISUSE", "ready() called again before advance()");
    const r = this.raft;
    r.flushRequests();
    const rd: Ready = { entries: r.log.unstable.entriesToWrite(), committedEntries: [], messages: [], results: [], mustSync: false };
    r.log.unstable.acceptInProgress();
    const snap = r.log.unstable.snapshot;
    if (snap) {
      rd.snapshot = snap;
      r.log.applyingTo(snap.metadata.index);
      r.tracker.onSnapshot(snap.metadata.index);
    }
    const committed = r.log.nextCommittedEnts(r.limits.maxCommittedSizePerReadyBytes);
    if (committed.length > 0) {
      r.handOutCommitted(committed);
      r.log.applyingTo(committed[committed.length - 1]!.index);
      r.tracker.onCommitted(committed);
      rd.committedEntries = committed;
    }
    r.tracker.onApplying(r.log.applying);
    if (r.confChanged) {
      r.confChanged = false;
      rd.confState = cloneConfState(r.confState);
    }
    rd.messages = r.msgs;
    r.msgs = [];
    if (r.lead !== this.prevSoft.lead || r.role !== this.prevSoft.role) {
      rd.softState = { lead: r.lead, role: r.role };
      this.prevSoft = rd.softState;
    }
    const hs = r.hardState();
    if (!isHardStateEqual(hs, this.prevHard)) rd.hardState = hs;
    rd.mustSync = rd.entries.length > 0 || rd.snapshot !== undefined || hs.term !== this.prevHard.term || hs.vote !== this.prevHard.vote;
    rd.results = r.tracker.drainResults();
    this.outstanding = { rd, applying: r.log.applying };
    return rd;
  }

  /**
   * The last Ready is persisted, sent and applied. With asynchronous storage writes (RaftConfig), a shell
   * whose write of this Ready is still in flight says so (`writeInFlight`): its entries stay unstable until
   * it calls appendDurable(). A snapshot is always written before advance(). A Ready advanced without
   * `writeInFlight` is durable, and so is every write before it (writes reach the disk in order).
   */
  advance(opts: { writeInFlight?: boolean } = {}): void {
    const o = this.outstanding;
    if (!o) throw new BrineError("RAFT_API_MISUSE", "advance() without ready()");
    const r = this.raft;
    if (opts.writeInFlight && (!r.asyncStorageWrites || o.rd.snapshot)) {
      throw new BrineError("RAFT_API_MISUSE", o.rd.snapshot ? "a Ready's snapshot is written before advance()" : "writeInFlight needs asyncStorageWrites");
    }
    const log = r.log;
    const last = o.rd.entries[o.rd.entries.length - 1];
    if (o.rd.snapshot) log.unstable.stableSnapTo(o.rd.snapshot.metadata.index);
    if (last && !opts.writeInFlight) {
      if (r.asyncStorageWrites) r.ownWriteDurable(last.index, last.term);
      else log.unstable.stableTo(last.index, last.term);
    }
    log.appliedTo(o.applying);
    if (o.rd.hardState) this.prevHard = o.rd.hardState;
    this.outstanding = undefined;
  }

  /**
   * Asynchronous storage writes: the write of entries through (index, term) is durable (call it for each
   * Ready advanced with `writeInFlight`, in write order, after its advance() and never between a ready() and
   * its advance()). A leader counts its own copy toward the quorum only from here on. Ignored when the entry
   * at `index` was replaced meanwhile (a newer leader's suffix).
   */
  appendDurable(index: number, term: number): void {
    if (!this.raft.asyncStorageWrites) throw new BrineError("RAFT_API_MISUSE", "appendDurable needs asyncStorageWrites");
    if (this.outstanding) throw new BrineError("RAFT_API_MISUSE", "appendDurable between ready() and advance()");
    this.raft.ownWriteDurable(index, term);
  }

  /** Cheap reads for a shell's hot paths (status() copies everything). */
  get role(): Role {
    return this.raft.role;
  }
  get lead(): NodeId {
    return this.raft.lead;
  }
  get term(): number {
    return this.raft.term;
  }
  /** last index the application confirmed applied (advance()) */
  get applied(): number {
    return this.raft.log.applied;
  }
  /** membership in effect; do not mutate */
  get confState(): Readonly<ConfState> {
    return this.raft.confState;
  }

  status(): Status {
    const r = this.raft;
    const st: Status = {
      id: r.id,
      role: r.role,
      lead: r.lead,
      term: r.term,
      vote: r.vote,
      commit: r.log.committed,
      applied: r.log.applied,
      firstIndex: r.log.firstIndex(),
      lastIndex: r.log.lastIndex(),
      leadTransferee: r.leadTransferee,
      confState: cloneConfState(r.confState),
      pendingRequests: r.tracker.size,
      quiesced: r.quiesced,
    };
    if (r.role === "leader") {
      st.progress = new Map();
      for (const [id, pr] of r.prs.progress) {
        st.progress.set(id, { match: pr.match, next: pr.next, state: pr.state, recentActive: pr.recentActive, isLearner: pr.isLearner });
      }
    }
    return st;
  }
}
