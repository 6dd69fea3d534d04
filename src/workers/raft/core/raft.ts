/**
 * The Raft state machine: one node of one group. Inputs are ticks and messages (`tick`, `step`); outputs are
 * messages (`msgs`), log changes (`log.unstable`) and request outcomes (`tracker`). It never reads a clock,
 * touches a socket or a disk, or draws randomness other than from the injected `rand`.
 *
 * Roles and what moves between them (paper §5.2, thesis §9.6 pre-vote, §6.2 check-quorum, §3.10 transfer):
 *   follower --election timeout--> pre-candidate --pre-vote quorum--> candidate --vote quorum--> leader
 *   any role --message with a higher term--> follower
 *   leader --no quorum heard from in an election timeout (check-quorum)--> follower
 *
 * This class holds the state and decides: term rules, role transitions, ticks, stepLeader / stepCandidate /
 * stepFollower, commit, the leader's append and proposal checks, leadership transfer. Each concern's handling
 * lives in a module of its own, which sees the state machine through a narrow interface (`…Host`) this class
 * implements (as etcd's raft.go keeps `raft` and its step functions, with helpers beside it):
 *   election.ts (campaigns, votes), replication.ts (appends and heartbeats, both ends), snapshot-transfer.ts
 *   (chunks out and in), forwarding.ts (requests to the leader and answers back), reads.ts (linearizable
 *   reads), membership.ts (conf changes).
 */
import { BrineError } from "../../../shared/errors.js";
import type { ErrCode } from "../../../shared/errors.js";
import { cloneConfState } from "./confchange.js";
import type { CampaignKind } from "./election.js";
import { campaign, handleVoteRequest, poll } from "./election.js";
import { Forwarding } from "./forwarding.js";
import type { RaftLimits } from "./limits.js";
import { resolveLimits } from "./limits.js";
import { RaftLog } from "./log.js";
import { Membership } from "./membership.js";
import type { Progress } from "./progress.js";
import { ProgressTracker } from "./progress.js";
import { RequestTracker } from "./proposals.js";
import { committedIndex, hasQuorum } from "./quorum.js";
import type { ReadRequest } from "./read-index.js";
import { Reads, readRequestOf } from "./reads.js";
import { bcastAppend, bcastHeartbeat, handleAppend, handleAppResp, handleHeartbeat, handleHeartbeatResp, maybeSendAppend, ownCopyDurable, waitsForCommit } from "./replication.js";
import { SnapshotTransfer } from "./snapshot-transfer.js";
import type { Storage } from "./storage.js";
import type { ConfState, Entry, HardState, Message, MessageType, NodeId, Role, Snapshot } from "./types.js";
import { CAMPAIGN_TRANSFER, NONE, newMessage } from "./types.js";

export interface RaftConfig {
  id: NodeId;
  storage: Storage;
  limits?: Partial<RaftLimits>;
  /**
   * The last index the application's state machine reflects, when restarting with a durable state machine.
   * Committed entries after it are handed out again. Default: the storage's snapshot index.
   */
  applied?: number;
  /** pre-vote (thesis §9.6): a partitioned node cannot inflate terms and depose a healthy leader. Default true. */
  preVote?: boolean;
  /** check-quorum: a leader steps down when it stops hearing from a quorum; followers honour a leader lease. Default true. */
  checkQuorum?: boolean;
  /** uniform in [0, 1); injected so a seed reproduces a run. Never Math.random in the core. */
  rand: () => number;
  /** a Ready may be advanced with its write in flight; own copy counted when durable (README). Default false. */
  asyncStorageWrites?: boolean;
  /**
   * Distinguishes this process lifetime's request ids from a previous one's (request ids restart at 1).
   * Default: drawn from rand.
   */
  incarnation?: number;
}

export class Raft {
  readonly id: NodeId;
  readonly limits: RaftLimits;
  readonly preVote: boolean;
  readonly checkQuorum: boolean;
  readonly incarnation: number;
  readonly asyncStorageWrites: boolean;
  private readonly rand: () => number;

  term = 0;
  vote: NodeId = NONE;
  lead: NodeId = NONE;
  role: Role = "follower";
  /** times this node became candidate (elections it started; the metrics endpoint) */
  elections = 0;
  readonly log: RaftLog;
  readonly prs: ProgressTracker;
  /** membership in effect: the bootstrap/snapshot config plus every conf entry handed out as committed */
  confState: ConfState;
  /** set when confState changed since the last Ready */
  confChanged = false;
  msgs: Message[] = [];
  readonly tracker: RequestTracker;

  leadTransferee: NodeId = NONE;
  /** index of the latest conf entry this leader appended; no new one until it is handed out as committed */
  pendingConfIndex = 0;
  /** payload bytes appended by this leader and not yet handed out as committed */
  uncommittedBytes = 0;
  /** linearizable reads: the leader's ReadIndex rounds, the origin's answers */
  private readonly reads = new Reads(this);
  /** requests forwarded to the leader (batched) and the answers back */
  private readonly forwarding = new Forwarding(this);
  /** snapshot chunks out (leader) and in (follower) */
  private readonly snapshots = new SnapshotTransfer(this);
  /** membership changes: applying them, checking proposed ones */
  private readonly membership = new Membership(this);

  electionElapsed = 0;
  heartbeatElapsed = 0;
  randomizedElectionTimeout = 0;
  /**
   * The group rests ("Resting groups" below): a leader sends no heartbeats and runs no check-quorum, a
   * follower's election timer stops (its leader's lease holds). Ended by any role or term change (reset), a
   * request, or a message that needs the group (wakesFrom).
   */
  quiesced = false;

  constructor(cfg: RaftConfig) {
    if (!Number.isSafeInteger(cfg.id) || cfg.id < 1) throw new BrineError("CONFIG_INVALID", `raft id ${cfg.id}`);
    this.id = cfg.id;
    this.limits = resolveLimits(cfg.limits);
    this.preVote = cfg.preVote ?? true;
    this.checkQuorum = cfg.checkQuorum ?? true;
    this.rand = cfg.rand;
    this.asyncStorageWrites = cfg.asyncStorageWrites ?? false;
    this.incarnation = cfg.incarnation ?? Math.floor(cfg.rand() * 0x1_0000_0000);
    this.tracker = new RequestTracker(this.limits.requestDeadlineTicks, this.limits.maxPendingRequests);

    const { hardState, confState } = cfg.storage.initialState();
    this.log = new RaftLog(cfg.storage, cfg.applied ?? 0, this.asyncStorageWrites);
    this.prs = new ProgressTracker(this.limits.maxInflightMsgs);
    this.confState = cloneConfState(confState);
    this.prs.setConfig(confState.voters, confState.learners, this.log.lastIndex() + 1);
    this.loadState(hardState);
    if (this.log.applied > this.log.committed) {
      throw new BrineError("CONFIG_INVALID", `applied ${this.log.applied} is beyond commit ${this.log.committed}`);
    }
    this.becomeFollower(this.term, NONE);
  }

  loadState(hs: HardState): void {
    if (hs.commit < this.log.committed || hs.commit > this.log.lastIndex()) {
      throw new BrineError("CONFIG_INVALID", `hard state commit ${hs.commit} outside [${this.log.committed}, ${this.log.lastIndex()}]`);
    }
    this.log.committed = hs.commit;
    this.term = hs.term;
    this.vote = hs.vote;
  }

  hardState(): HardState {
    return { term: this.term, vote: this.vote, commit: this.log.committed };
  }

  /** A voter in its own configuration: the only kind of node that may campaign. */
  promotable(): boolean {
    return this.prs.isVoter(this.id);
  }

  // ------------------------------------------------------------------ role transitions

  private reset(term: number): void {
    if (this.term !== term) {
      this.term = term;
      this.vote = NONE;
    }
    if (this.role === "leader") this.reads.abandon();
    this.lead = NONE;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.randomizedElectionTimeout =
      this.limits.electionTicksMin + Math.floor(this.rand() * this.limits.electionTicksMin);
    this.leadTransferee = NONE;
    this.prs.votes.clear();
    this.prs.resetAll(this.log.lastIndex() + 1);
    const self = this.prs.get(this.id);
    if (self) self.match = this.asyncStorageWrites ? this.log.durableLastIndex() : this.log.lastIndex();
    this.pendingConfIndex = 0;
    this.uncommittedBytes = 0;
    this.forwarding.reset();
    this.quiesced = false;
  }

  becomeFollower(term: number, lead: NodeId): void {
    this.reset(term);
    this.lead = lead;
    this.role = "follower";
  }

  becomePreCandidate(): void {
    if (this.role === "leader") throw new BrineError("RAFT_API_MISUSE", "leader cannot become pre-candidate");
    // Pre-vote changes neither term nor vote: a node that cannot win must leave no trace (Salt's PR #69087).
    this.prs.votes.clear();
    this.lead = NONE;
    this.role = "pre-candidate";
  }

  becomeCandidate(): void {
    if (this.role === "leader") throw new BrineError("RAFT_API_MISUSE", "leader cannot become candidate");
    this.reset(this.term + 1);
    this.vote = this.id;
    this.role = "candidate";
    this.elections++;
  }

  becomeLeader(): void {
    if (this.role === "follower") throw new BrineError("RAFT_API_MISUSE", "follower cannot become leader directly");
    this.reset(this.term);
    this.lead = this.id;
    this.role = "leader";
    const self = this.prs.get(this.id)!;
    self.becomeReplicate();
    self.recentActive = true;
    // Entries after the last one known applied may include a conf change from an earlier term; no new one
    // may be proposed until it is applied (one membership change in flight).
    this.pendingConfIndex = this.log.lastIndex();
    // §5.4.2 / §8: an entry of the new term lets the leader commit earlier ones and learn its commit index.
    this.appendEntries([{ term: 0, index: 0, type: "normal", data: new Uint8Array(0) }]);
  }

  // ------------------------------------------------------------------ ticks

  tick(): void {
    this.tracker.tick();
    if (this.quiesced) return; // a resting group: deadlines pass, no heartbeat, no election timer
    if (this.role === "leader") this.tickHeartbeat();
    else this.tickElection();
  }

  // ------------------------------------------------------------------ resting groups
  //
  // A leader with nothing to do puts its group to rest (etcd-raft's quiescing as CockroachDB runs it): when
  // every member holds its whole log, committed and applied, it sends each one a last heartbeat flagged
  // `quiesce` and stops heartbeating. A follower that holds that last entry and its commit rests too: no
  // answer, no election timer; its leader's lease holds while it rests. The group wakes (normal ticks) on
  // any request and on any message that needs it: on the leader everything but a late heartbeat answer, on
  // a follower everything from its leader, a campaign, and the transport's word that the leader's session
  // dropped (then the lease ends and it campaigns in 1 + rank ticks, as suspectLeader says). What replaces
  // the election timer while it rests is the peer channel's liveness: a crashed leader's connections drop at
  // once, a silent one misses the channel's keepalives. Safety does not depend on timers (they only decide
  // when elections start), so resting cannot break it; the README of the worker says why liveness holds.

  /** Whether this leader may put its group to rest now (see above); nothing else may be in flight. */
  canQuiesce(): boolean {
    if (this.quiesced || this.role !== "leader" || this.leadTransferee !== NONE) return false;
    const last = this.log.lastIndex();
    if (this.log.committed !== last || this.log.applied !== last || this.pendingConfIndex > last) return false;
    if (this.tracker.size > 0 || this.reads.busy() || this.forwarding.canFlush()) return false;
    for (const [id, pr] of this.prs.progress) {
      if (id !== this.id && (pr.state !== "replicate" || pr.match !== last)) return false;
    }
    return true;
  }

  /** Puts the group to rest if this leader may (canQuiesce); returns whether it rests. */
  quiesce(): boolean {
    if (this.quiesced) return true;
    if (!this.canQuiesce()) return false;
    const last = this.log.lastIndex();
    const lastTerm = this.log.term(last);
    for (const id of this.prs.progress.keys()) {
      if (id === this.id) continue;
      this.send({ ...newMessage("MsgHeartbeat", this.id, id, this.term), commit: this.log.committed, index: last, logTerm: lastTerm, quiesce: true });
    }
    this.quiesced = true;
    return true;
  }

  /**
   * Ends the rest: normal ticks again, from a fresh election timer (a follower that rested for an hour must
   * not campaign at its first tick: no election storm on wake-up) and, on a leader, a fresh check-quorum
   * window that only answers from now on count toward.
   */
  unquiesce(): void {
    if (!this.quiesced) return;
    this.quiesced = false;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    if (this.role === "leader") for (const [id, pr] of this.prs.progress) if (id !== this.id) pr.recentActive = false;
  }

  /** Whether message `m` (past the term checks) ends this node's rest. */
  private wakesFrom(m: Message): boolean {
    // an answer to a heartbeat sent before the rest began changes nothing a resting leader needs; one that
    // declines the rest (reject) does
    if (this.role === "leader") return m.type !== "MsgHeartbeatResp" || m.reject;
    if (m.type === "MsgHeartbeat") return !m.quiesce || m.from !== this.lead;
    // the transport's word changes nothing for a resting follower unless it says its leader is gone
    if (m.type === "MsgUnreachable") return m.from === this.lead;
    if (m.type === "MsgReachable") return false;
    return true;
  }

  private tickElection(): void {
    this.electionElapsed++;
    if (this.promotable() && this.electionElapsed >= this.randomizedElectionTimeout) {
      this.electionElapsed = 0;
      this.step(this.local("MsgHup"));
    }
  }

  private tickHeartbeat(): void {
    this.heartbeatElapsed++;
    this.electionElapsed++;
    if (this.electionElapsed >= this.limits.electionTicksMin) {
      this.electionElapsed = 0;
      if (this.checkQuorum) this.step(this.local("MsgCheckQuorum"));
      // A transfer that did not finish within an election timeout is abandoned; proposals resume.
      if (this.role === "leader" && this.leadTransferee !== NONE) this.leadTransferee = NONE;
    }
    if (this.role !== "leader") return;
    if (this.heartbeatElapsed >= this.limits.heartbeatTicks) {
      this.heartbeatElapsed = 0;
      this.step(this.local("MsgBeat"));
    }
    this.snapshots.tick();
  }

  private local(type: MessageType): Message {
    return newMessage(type, this.id, this.id, 0);
  }

  /** Queues an outgoing message (handed out in the next Ready). */
  send(m: Message): void {
    this.msgs.push(m);
  }

  // ------------------------------------------------------------------ step

  step(m: Message): void {
    if (m.term === 0) {
      // local or forwarding kinds: no term semantics
    } else if (m.term > this.term) {
      if (m.type === "MsgVote" || m.type === "MsgPreVote") {
        const force = m.context === CAMPAIGN_TRANSFER;
        const inLease = this.checkQuorum && this.lead !== NONE && this.electionElapsed < this.limits.electionTicksMin;
        // Leader lease: while we hear from a leader, a (pre-)vote request cannot disturb us; this is what
        // keeps a removed or flapping node from deposing a healthy leader. A resting leader wakes, though: a
        // member that campaigns lacks its heartbeats.
        if (!force && inLease) {
          if (this.quiesced && this.role === "leader") this.unquiesce();
          return;
        }
      }
      if (m.type === "MsgPreVote") {
        // never change term for a pre-vote
      } else if (m.type === "MsgPreVoteResp" && !m.reject) {
        // a granted pre-vote carries the term we would campaign in, not one anybody is in
      } else if (m.type === "MsgApp" || m.type === "MsgHeartbeat" || m.type === "MsgSnap") {
        this.becomeFollower(m.term, m.from);
      } else {
        this.becomeFollower(m.term, NONE);
      }
    } else if (m.term < this.term) {
      if ((this.checkQuorum || this.preVote) && (m.type === "MsgHeartbeat" || m.type === "MsgApp")) {
        // Tell a stale leader about the newer term so it steps down, rather than leave it (and, under
        // pre-vote, a partition that healed) stuck: our silence alone would never reach it.
        this.send(newMessage("MsgAppResp", this.id, m.from, this.term));
      } else if (m.type === "MsgPreVote") {
        this.send({ ...newMessage("MsgPreVoteResp", this.id, m.from, this.term), reject: true });
      }
      return;
    }
    if (this.quiesced && this.wakesFrom(m)) this.unquiesce();

    switch (m.type) {
      case "MsgHup":
        if (this.role !== "leader") this.campaign(this.preVote ? "pre" : "elect");
        return;
      case "MsgVote":
      case "MsgPreVote":
        handleVoteRequest(this, m);
        return;
      case "MsgPropResp":
        this.forwarding.onPropResp(m);
        return;
      case "MsgReadIndexResp":
        this.reads.onResponse(m);
        return;
      case "MsgProp":
      case "MsgReadIndex":
        if (this.role !== "leader") return this.forwarding.refuse(m);
    }
    switch (this.role) {
      case "leader":
        return this.stepLeader(m);
      case "candidate":
      case "pre-candidate":
        return this.stepCandidate(m);
      case "follower":
        return this.stepFollower(m);
    }
  }

  // ------------------------------------------------------------------ elections (election.ts)

  /** Starts a campaign (election.ts); a no-op for a non-voter or while a committed conf change is unapplied. */
  campaign(kind: CampaignKind): void {
    campaign(this, kind);
  }

  /** A committed conf entry not yet handed out: campaigning now would use a configuration about to change. */
  hasUnappliedConfChanges(): boolean {
    return this.membership.hasUnapplied();
  }

  // ------------------------------------------------------------------ leader (replication: replication.ts)

  private stepLeader(m: Message): void {
    switch (m.type) {
      case "MsgBeat":
        this.bcastHeartbeat();
        return;
      case "MsgCheckQuorum":
        if (!hasQuorum(this.prs.voters, (id) => id === this.id || this.prs.get(id)?.recentActive === true)) {
          this.becomeFollower(this.term, NONE);
          return;
        }
        for (const [id, pr] of this.prs.progress) if (id !== this.id) pr.recentActive = false;
        return;
      case "MsgProp":
        this.forwarding.onForwardedProposal(m);
        return;
      case "MsgReadIndex":
        this.handleReadIndex(readRequestOf(m));
        return;
      case "MsgTransferLeader":
        this.handleTransferLeader(m.transferee ?? NONE);
        return;
    }
    const pr = this.prs.get(m.from);
    if (!pr) return;
    switch (m.type) {
      case "MsgAppResp":
        pr.recentActive = true;
        handleAppResp(this, m, pr);
        return;
      case "MsgHeartbeatResp":
        handleHeartbeatResp(this, m, pr);
        if (m.context !== undefined) this.reads.ack(m.from, m.context);
        return;
      case "MsgSnapResp":
        pr.recentActive = true;
        this.snapshots.onResp(m, pr);
        return;
      case "MsgUnreachable":
        // Appends in flight to it are presumed lost; until it answers, one probe per heartbeat answer.
        if (pr.state === "replicate") pr.becomeProbe();
        return;
      case "MsgReachable":
        // The session is back: the probe need not wait for the next heartbeat answer.
        if (pr.state === "probe") {
          pr.probeSent = false;
          this.maybeSendAppend(m.from, pr, true);
        }
        return;
    }
  }

  /** Advances commit to what a quorum of voters holds; true if it moved. Releases reads that waited for it. */
  maybeCommit(): boolean {
    const mci = committedIndex(this.prs.voters, (id) => this.prs.get(id)?.match ?? 0);
    if (!this.log.maybeCommit(mci, this.term)) return false;
    this.reads.committed();
    return true;
  }

  /** Sends entries (or a snapshot) to `to` if its flow control allows; returns whether anything was sent. */
  maybeSendAppend(to: NodeId, pr: Progress, sendIfEmpty: boolean): boolean {
    return maybeSendAppend(this, to, pr, sendIfEmpty);
  }

  /** Starts a snapshot transfer to `to` (its next entry is compacted away); false if none can be sent now. */
  maybeSendSnapshot(to: NodeId, pr: Progress): boolean {
    return this.snapshots.maybeSend(to, pr);
  }

  bcastAppend(): void {
    bcastAppend(this);
  }

  bcastHeartbeat(): void {
    bcastHeartbeat(this, this.reads.lastKey());
  }

  /** Follower `id` settles requests once it knows `index` is committed: tell it as soon as it is (and now, if so). */
  waitsForCommit(id: NodeId, index: number): void {
    waitsForCommit(this, id, index);
  }

  /** Entries through (index, term) are durable (asyncStorageWrites); a leader counts its own copy from now on. */
  ownWriteDurable(index: number, term: number): void {
    this.log.unstable.stableTo(index, term);
    if (this.role === "leader") ownCopyDurable(this);
  }

  /** Appends entries in the current term; returns the index of the first. The leader's own match moves with it. */
  appendEntries(ents: Entry[]): number {
    let li = this.log.lastIndex();
    const first = li + 1;
    for (const e of ents) {
      e.term = this.term;
      e.index = ++li;
      this.uncommittedBytes += e.data.length;
    }
    this.log.append(ents);
    // with asyncStorageWrites the own copy counts once durable (ownWriteDurable), never here
    if (!this.asyncStorageWrites) this.prs.get(this.id)?.maybeUpdate(this.log.lastIndex());
    if (!this.asyncStorageWrites) this.maybeCommit();
    return first;
  }

  /**
   * The leader's decision on a batch of proposals (local or forwarded). On success the entries are appended
   * and broadcast. `retry` marks refusals that leave the request safe to resend to a later leader.
   */
  acceptProposal(ents: Entry[]): { ok: true; index: number } | { ok: false; code: ErrCode; detail: string; retry: boolean } {
    if (this.role !== "leader") return { ok: false, code: "RAFT_NO_LEADER", detail: "not the leader", retry: true };
    if (this.leadTransferee !== NONE) {
      return { ok: false, code: "RAFT_NO_LEADER", detail: `leadership transfer to ${this.leadTransferee} in progress`, retry: true };
    }
    let bytes = 0;
    let confCount = 0;
    for (const e of ents) {
      bytes += e.data.length;
      if (e.type === "conf") confCount++;
    }
    const refusal = confCount > 0 ? this.membership.refusal(ents, confCount) : undefined;
    if (refusal) return { ok: false, ...refusal, retry: false };
    if (this.uncommittedBytes > 0 && this.uncommittedBytes + bytes > this.limits.maxUncommittedEntriesBytes) {
      return { ok: false, code: "RAFT_REJECTED", detail: "leader has too many uncommitted bytes (maxUncommittedEntriesBytes)", retry: false };
    }
    const index = this.appendEntries(ents);
    if (confCount > 0) this.pendingConfIndex = index + ents.length - 1;
    this.bcastAppend();
    return { ok: true, index };
  }

  private handleTransferLeader(target: NodeId): void {
    if (!this.prs.isVoter(target)) return;
    if (this.leadTransferee !== NONE) {
      if (this.leadTransferee === target) return;
      this.leadTransferee = NONE;
    }
    if (target === this.id) return;
    // The transfer must finish within one election timeout (tickHeartbeat abandons it otherwise).
    this.electionElapsed = 0;
    this.leadTransferee = target;
    const pr = this.prs.get(target)!;
    if (pr.match === this.log.lastIndex()) this.sendTimeoutNow(target);
    else this.maybeSendAppend(target, pr, true);
  }

  sendTimeoutNow(to: NodeId): void {
    this.send(newMessage("MsgTimeoutNow", this.id, to, this.term));
  }

  // ------------------------------------------------------------------ requests and reads (forwarding.ts, reads.ts)

  /** A batch of reads (this node's own or forwarded) for the leader to serve. */
  handleReadIndex(req: ReadRequest): void {
    this.reads.request(req);
  }

  /**
   * Sends requests that were waiting for a leader: appended here if we lead, forwarded (batched) if we know
   * the leader, left waiting otherwise. Called when a Ready is built, so proposals made between Readies go
   * out as one batch.
   */
  flushRequests(): void {
    this.forwarding.flush();
  }

  /** Whether flushRequests() would do anything now (waiting requests and somewhere to send them). */
  canFlushRequests(): boolean {
    return this.forwarding.canFlush();
  }

  // ------------------------------------------------------------------ candidate

  private stepCandidate(m: Message): void {
    const myResp = this.role === "pre-candidate" ? "MsgPreVoteResp" : "MsgVoteResp";
    switch (m.type) {
      case "MsgApp":
      case "MsgHeartbeat":
      case "MsgSnap":
        // §5.2: a leader of our term (or newer) exists; return to follower and process its message.
        this.becomeFollower(m.term, m.from);
        this.stepFollower(m);
        return;
      case "MsgVoteResp":
      case "MsgPreVoteResp": {
        if (m.type !== myResp) return;
        const res = poll(this, m.from, !m.reject);
        if (res === "won" && this.promotable()) {
          if (this.role === "pre-candidate") this.campaign("elect");
          else {
            this.becomeLeader();
            this.bcastAppend();
          }
        } else if (res === "lost") {
          this.becomeFollower(this.term, NONE);
        }
        return;
      }
    }
  }

  // ------------------------------------------------------------------ follower

  private stepFollower(m: Message): void {
    switch (m.type) {
      case "MsgApp":
      case "MsgHeartbeat":
      case "MsgSnap":
        // Word from the leader of our term: it resets the election timer (and the lease other nodes' votes respect).
        this.electionElapsed = 0;
        this.lead = m.from;
        if (m.type === "MsgApp") handleAppend(this, m);
        else if (m.type === "MsgSnap") this.snapshots.onChunk(m);
        else if (m.quiesce) this.restWith(m);
        else handleHeartbeat(this, m);
        return;
      case "MsgTransferLeader":
        if (this.lead !== NONE) this.send({ ...m, to: this.lead, from: this.id });
        return;
      case "MsgTimeoutNow":
        // The leader chose us; campaign at once, without pre-vote, bypassing the followers' lease.
        this.campaign("transfer");
        return;
      case "MsgUnreachable":
        if (m.from === this.lead) this.suspectLeader();
        return;
    }
  }

  /**
   * The leader's last heartbeat before its group rests: rest too, without an answer, if this follower holds
   * the leader's last entry and, with the commit index it carries, has committed it. Otherwise it answers
   * as to any heartbeat but declines (reject), and that answer wakes the leader, which catches it up.
   */
  private restWith(m: Message): void {
    if (m.index <= this.log.lastIndex() && this.log.matchTerm(m.index, m.logTerm)) {
      this.log.commitTo(m.commit);
      if (this.log.committed >= m.index) {
        this.quiesced = true;
        return;
      }
    }
    handleHeartbeat(this, m, true);
  }

  /**
   * The transport lost its session to our leader (its connection dropped: a crashed leader's kernel closes
   * it at once). A strong hint, not proof: stop honouring the leader's lease now and campaign in 1 + rank
   * ticks instead of a whole election timeout, where rank is our place among the other voters by id, so
   * survivors that all saw the drop start one tick apart and do not split the vote. Any word from the leader
   * before then resets the timer as usual; and a campaign it did not stop is a pre-vote, which the voters
   * still hearing from a healthy leader ignore (their lease holds), so a flapping link cannot depose it.
   */
  private suspectLeader(): void {
    const others = [...this.prs.voters].filter((id) => id !== this.lead).sort((a, b) => a - b);
    const rank = Math.max(0, others.indexOf(this.id));
    this.electionElapsed = Math.max(this.electionElapsed, this.limits.electionTicksMin);
    this.randomizedElectionTimeout = this.electionElapsed + 1 + rank;
  }

  /**
   * Installs a snapshot received from the leader. Returns false when it brings nothing new: it is not past
   * our commit, or our log already has its last entry (then commit just moves up to it).
   */
  restore(s: Snapshot): boolean {
    const md = s.metadata;
    if (md.index <= this.log.committed) return false;
    const cs = md.confState;
    // The snapshot's configuration may predate our own addition (we joined after it was taken): that is
    // fine, the entries after it add us. Only the leader sends snapshots, and only to members.
    if (this.log.matchTerm(md.index, md.term)) {
      this.log.commitTo(md.index);
      return false;
    }
    this.log.restore(s);
    this.membership.set(cloneConfState(cs));
    return true;
  }

  // ------------------------------------------------------------------ membership (membership.ts)

  /** This node applied its own removal (see Membership.removed). */
  isRemoved(): boolean {
    return this.membership.removed;
  }

  /** Applies a conf entry being handed out as committed (skipped if the stored membership already has it). */
  applyConfEntry(e: Entry): void {
    this.membership.applyEntry(e);
  }

  /** The application is being handed these committed entries. */
  handOutCommitted(ents: readonly Entry[]): void {
    for (const e of ents) {
      if (e.type === "conf") this.applyConfEntry(e);
      if (this.role === "leader") this.uncommittedBytes = Math.max(0, this.uncommittedBytes - e.data.length);
    }
  }
}
