/**
 * The Raft state machine: one node of one group. Inputs are ticks and messages (`tick`, `step`); outputs are
 * messages (`msgs`), log changes (`log.unstable`) and request outcomes (`tracker`). It never reads a clock,
 * touches a socket or a disk, or draws randomness other than from the injected `rand`.
 *
 * Roles and what moves between them (paper §5.2, thesis §9.6 pre-vote, §6.2 check-quorum, §3.10 transfer):
 *   follower --election timeout--> pre-candidate --pre-vote quorum--> candidate --vote quorum--> leader
 *   any role --message with a higher term--> follower
 *   leader --no quorum heard from in an election timeout (check-quorum)--> follower
 */
import { BrineError } from "../errors.js";
import type { ErrCode } from "../errors.js";
import { applyConfChange, cloneConfState, confChangeRefusal, decodeConfChange } from "./confchange.js";
import type { RaftLimits } from "./limits.js";
import { resolveLimits } from "./limits.js";
import { RaftLog } from "./log.js";
import type { Progress } from "./progress.js";
import { ProgressTracker } from "./progress.js";
import { RequestTracker } from "./proposals.js";
import { committedIndex, hasQuorum, voteResult } from "./quorum.js";
import type { VoteResult } from "./quorum.js";
import type { ReadRequest } from "./read-index.js";
import { ReadIndexQueue } from "./read-index.js";
import type { Storage } from "./storage.js";
import type { ConfState, Entry, HardState, Message, MessageType, NodeId, RequestId, RequestKind, Role, Snapshot, SnapshotMetadata } from "./types.js";
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
  /**
   * Distinguishes this process lifetime's request ids from a previous one's (request ids restart at 1).
   * Default: drawn from rand.
   */
  incarnation?: number;
}

type CampaignKind = "pre" | "elect" | "transfer";

/** A snapshot being reassembled from chunks (follower side). */
interface InboundSnapshot {
  metadata: SnapshotMetadata;
  totalBytes: number;
  chunks: Uint8Array[];
  received: number;
}

/** Leader-side memory of forwarded proposal batches already appended, so a re-delivered MsgProp is not appended twice. */
const SEEN_PROPOSALS_MAX = 4096;

export class Raft {
  readonly id: NodeId;
  readonly limits: RaftLimits;
  readonly preVote: boolean;
  readonly checkQuorum: boolean;
  readonly incarnation: number;
  private readonly rand: () => number;

  term = 0;
  vote: NodeId = NONE;
  lead: NodeId = NONE;
  role: Role = "follower";
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
  private readonly reads = new ReadIndexQueue();
  /** reads that arrived before this leader committed an entry of its term (its commit index may be stale) */
  private pendingReads: ReadRequest[] = [];
  private seenProposals = new Map<string, number>();

  electionElapsed = 0;
  heartbeatElapsed = 0;
  randomizedElectionTimeout = 0;
  private inbound: InboundSnapshot | undefined;
  private removedSelf = false;

  constructor(cfg: RaftConfig) {
    if (!Number.isSafeInteger(cfg.id) || cfg.id < 1) throw new BrineError("CONFIG_INVALID", `raft id ${cfg.id}`);
    this.id = cfg.id;
    this.limits = resolveLimits(cfg.limits);
    this.preVote = cfg.preVote ?? true;
    this.checkQuorum = cfg.checkQuorum ?? true;
    this.rand = cfg.rand;
    this.incarnation = cfg.incarnation ?? Math.floor(cfg.rand() * 0x1_0000_0000);
    this.tracker = new RequestTracker(this.limits.requestDeadlineTicks, this.limits.maxPendingRequests);

    const { hardState, confState } = cfg.storage.initialState();
    this.log = new RaftLog(cfg.storage, cfg.applied ?? 0);
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
    if (this.role === "leader") this.abandonReads();
    this.lead = NONE;
    this.electionElapsed = 0;
    this.heartbeatElapsed = 0;
    this.randomizedElectionTimeout =
      this.limits.electionTicksMin + Math.floor(this.rand() * this.limits.electionTicksMin);
    this.leadTransferee = NONE;
    this.prs.votes.clear();
    this.prs.resetAll(this.log.lastIndex() + 1);
    const self = this.prs.get(this.id);
    if (self) self.match = this.log.lastIndex();
    this.pendingConfIndex = 0;
    this.uncommittedBytes = 0;
    this.seenProposals.clear();
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
    if (this.role === "leader") this.tickHeartbeat();
    else this.tickElection();
  }

  /** A tick for an idle (quiesced) group: time passes for deadlines and leases, but nobody campaigns. */
  tickQuiesced(): void {
    this.tracker.tick();
    this.electionElapsed++;
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
    this.tickSnapshotTransfers();
  }

  /** Resends the current chunk of any snapshot transfer that has gone unacknowledged too long. */
  private tickSnapshotTransfers(): void {
    for (const [id, pr] of this.prs.progress) {
      if (id === this.id || pr.state !== "snapshot" || !pr.transfer) continue;
      pr.transfer.idleTicks++;
      if (pr.transfer.idleTicks >= this.limits.snapshotResendTicks) this.sendSnapshotChunk(id, pr);
    }
  }

  private local(type: MessageType): Message {
    return newMessage(type, this.id, this.id, 0);
  }

  private send(m: Message): void {
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
        // keeps a removed or flapping node from deposing a healthy leader.
        if (!force && inLease) return;
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

    switch (m.type) {
      case "MsgHup":
        if (this.role !== "leader") this.campaign(this.preVote ? "pre" : "elect");
        return;
      case "MsgVote":
      case "MsgPreVote":
        this.handleVoteRequest(m);
        return;
      case "MsgPropResp":
        this.handlePropResp(m);
        return;
      case "MsgReadIndexResp":
        this.handleReadIndexResp(m);
        return;
      case "MsgProp":
      case "MsgReadIndex":
        if (this.role !== "leader") return this.refuseForward(m);
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

  private handleVoteRequest(m: Message): void {
    const respType = m.type === "MsgVote" ? "MsgVoteResp" : "MsgPreVoteResp";
    // §5.2: one vote per term, first come first served; §5.4.1: only for a log at least as up to date.
    const canVote =
      this.vote === m.from ||
      (this.vote === NONE && this.lead === NONE) ||
      (m.type === "MsgPreVote" && m.term > this.term);
    if (canVote && this.log.isUpToDate(m.index, m.logTerm)) {
      // A learner answers too: it may already be a voter in the candidate's (newer) configuration. Its grant
      // counts only if the candidate's configuration lists it as a voter (quorum.ts sees voters only).
      this.send(newMessage(respType, this.id, m.from, m.term));
      if (m.type === "MsgVote") {
        this.electionElapsed = 0;
        this.vote = m.from;
      }
    } else {
      this.send({ ...newMessage(respType, this.id, m.from, this.term), reject: true });
    }
  }

  campaign(kind: CampaignKind): void {
    if (!this.promotable()) return;
    if (this.hasUnappliedConfChanges()) return;
    let voteType: MessageType;
    let term: number;
    if (kind === "pre") {
      this.becomePreCandidate();
      voteType = "MsgPreVote";
      term = this.term + 1;
    } else {
      this.becomeCandidate();
      voteType = "MsgVote";
      term = this.term;
    }
    if (this.poll(this.id, true) === "won") {
      // a single-voter group wins at once
      if (kind === "pre") this.campaign("elect");
      else this.becomeLeader();
      return;
    }
    const lastIndex = this.log.lastIndex();
    const lastTerm = this.log.lastTerm();
    for (const id of this.prs.voters) {
      if (id === this.id) continue;
      const m = { ...newMessage(voteType, this.id, id, term), index: lastIndex, logTerm: lastTerm };
      if (kind === "transfer") m.context = CAMPAIGN_TRANSFER;
      this.send(m);
    }
  }

  private poll(from: NodeId, granted: boolean): VoteResult {
    if (!this.prs.votes.has(from)) this.prs.votes.set(from, granted);
    return voteResult(this.prs.voters, this.prs.votes);
  }

  /** A committed conf entry not yet handed out: campaigning now would use a configuration about to change. */
  private hasUnappliedConfChanges(): boolean {
    if (this.log.applying >= this.log.committed) return false;
    const lo = Math.max(this.log.applying + 1, this.log.firstIndex());
    return this.log.slice(lo, this.log.committed + 1, Number.MAX_SAFE_INTEGER).some((e) => e.type === "conf");
  }

  // ------------------------------------------------------------------ leader

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
        this.handleForwardedProposal(m);
        return;
      case "MsgReadIndex":
        this.handleReadIndex(this.readRequestOf(m));
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
        this.handleAppResp(m, pr);
        return;
      case "MsgHeartbeatResp":
        pr.recentActive = true;
        pr.probeSent = false;
        // Entries that were already in flight at the previous heartbeat answer are still unacknowledged a whole
        // round later: those MsgApps were probably lost (the follower hears us, so it is up). Fall back to
        // probing from its match, which resends them.
        if (pr.state === "replicate" && pr.match < pr.sentAtLastHeartbeat) pr.becomeProbe();
        pr.sentAtLastHeartbeat = pr.next - 1;
        if (pr.match < this.log.lastIndex()) this.maybeSendAppend(m.from, pr, false);
        if (m.context !== undefined) this.handleReadAck(m.from, m.context);
        return;
      case "MsgSnapResp":
        pr.recentActive = true;
        this.handleSnapResp(m, pr);
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

  private handleAppResp(m: Message, pr: Progress): void {
    if (m.reject) {
      // Conflict backtracking by term: the follower named the last index whose term is <= the term we
      // probed with; skip to where our own log has a term no newer than the follower's.
      let nextProbe = m.rejectHint;
      if (m.logTerm > 0) nextProbe = this.log.findConflictByTerm(m.rejectHint, m.logTerm)[0];
      if (pr.maybeDecrTo(m.index, nextProbe)) {
        if (pr.state === "replicate") pr.becomeProbe();
        this.maybeSendAppend(m.from, pr, false);
      }
      return;
    }
    const wasPaused = pr.isPaused();
    const updated = pr.maybeUpdate(m.index);
    if (pr.state === "snapshot") {
      // The follower installed the snapshot (or already had what it needed): stream from its match. If our
      // log has been compacted past it meanwhile, maybeSendAppend starts a newer snapshot.
      if (pr.match < pr.pendingSnapshot && pr.match + 1 < this.log.firstIndex()) return;
      pr.becomeProbe();
      pr.becomeReplicate();
    } else if (!updated && !(pr.match === m.index && pr.state === "probe")) {
      return;
    } else if (pr.state === "probe") pr.becomeReplicate();
    else pr.inflights.freeLE(m.index);

    // A new commit index is not broadcast in messages of its own (Raft §5.3: the leader includes it in future
    // AppendEntries, heartbeats included): it reaches each follower with the next append or heartbeat, at most
    // one heartbeat interval later. An empty append per follower per commit, and its answer, would double the
    // messages of every commit and load the next proposal's path. Told at once: a follower that waits for the
    // commit (its forwarded proposal or read), and every member when a membership change commits (a removed
    // node gets no heartbeat once the change is applied; a new leader's first commit settles the old term).
    const before = this.log.committed;
    if (this.maybeCommit()) {
      if (this.pendingConfIndex > before && this.pendingConfIndex <= this.log.committed) this.bcastAppend();
      else for (const [id, p] of this.prs.progress) if (id !== m.from) this.tellCommitIfWaited(id, p);
    }
    if (wasPaused) this.maybeSendAppend(m.from, pr, true);
    while (this.maybeSendAppend(m.from, pr, false)) {
      // stream while the window allows
    }
    this.tellCommitIfWaited(m.from, pr);
    if (m.from === this.leadTransferee && pr.match === this.log.lastIndex()) this.sendTimeoutNow(m.from);
  }

  /** Sends `to` the commit index if it waits for one it has not been sent (Progress.commitWaited). */
  private tellCommitIfWaited(to: NodeId, pr: Progress): void {
    if (pr.sentCommit < Math.min(pr.commitWaited, this.log.committed)) this.maybeSendAppend(to, pr, true);
  }

  /** Advances commit to what a quorum of voters holds; true if it moved. Releases reads that waited for it. */
  maybeCommit(): boolean {
    const mci = committedIndex(this.prs.voters, (id) => this.prs.get(id)?.match ?? 0);
    if (!this.log.maybeCommit(mci, this.term)) return false;
    if (this.pendingReads.length > 0) {
      const waiting = this.pendingReads;
      this.pendingReads = [];
      for (const r of waiting) this.handleReadIndex(r);
    }
    return true;
  }

  /** Sends entries (or a snapshot) to `to` if its flow control allows; returns whether anything was sent. */
  maybeSendAppend(to: NodeId, pr: Progress, sendIfEmpty: boolean): boolean {
    if (to === this.id || pr.isPaused()) return false;
    const prevIndex = pr.next - 1;
    const first = this.log.firstIndex();
    const ents = prevIndex >= first - 1 ? this.log.entriesFrom(pr.next, this.limits.maxSizePerMsgBytes) : undefined;
    if (ents === undefined) return this.maybeSendSnapshot(to, pr);
    if (ents.length === 0 && !sendIfEmpty) return false;
    this.send({
      ...newMessage("MsgApp", this.id, to, this.term),
      index: prevIndex,
      logTerm: this.log.term(prevIndex),
      entries: ents,
      commit: this.log.committed,
    });
    pr.sentEntries(ents.length, prevIndex + ents.length);
    pr.sentCommit = Math.max(pr.sentCommit, Math.min(this.log.committed, prevIndex + ents.length));
    return true;
  }

  private maybeSendSnapshot(to: NodeId, pr: Progress): boolean {
    // Only to a follower we have heard from lately: a snapshot is large, and a dead node would just time out.
    if (!pr.recentActive) return false;
    let snap: Snapshot;
    try {
      snap = this.log.storage.snapshot();
    } catch (e) {
      if (e instanceof BrineError && e.code === "RAFT_UNAVAILABLE") return false;
      throw e;
    }
    if (snap.metadata.index === 0) return false;
    pr.becomeSnapshot(snap);
    this.sendSnapshotChunk(to, pr);
    return true;
  }

  private sendSnapshotChunk(to: NodeId, pr: Progress): void {
    const t = pr.transfer!;
    const total = t.snapshot.data.length;
    const end = Math.min(total, t.offset + this.limits.snapshotChunkBytes);
    this.send({
      ...newMessage("MsgSnap", this.id, to, this.term),
      snapshot: { metadata: t.snapshot.metadata, offset: t.offset, totalBytes: total, data: t.snapshot.data.subarray(t.offset, end) },
    });
    t.idleTicks = 0;
  }

  private handleSnapResp(m: Message, pr: Progress): void {
    const t = pr.transfer;
    if (pr.state !== "snapshot" || !t || m.index !== pr.pendingSnapshot) return;
    const want = m.snapOffset ?? 0;
    // The follower says which byte it needs next; follow it (it may have restarted its copy, or a reordered
    // acknowledgement may have moved us ahead of it). An answer naming the chunk already in flight is a
    // duplicate: ignoring it keeps duplicated acknowledgements from multiplying chunks. The resend timer
    // covers real loss.
    if (want !== t.offset && want <= t.snapshot.data.length) {
      t.offset = want;
      this.sendSnapshotChunk(m.from, pr);
    }
  }

  bcastAppend(): void {
    for (const [id, pr] of this.prs.progress) if (id !== this.id) this.maybeSendAppend(id, pr, true);
  }

  bcastHeartbeat(): void {
    const ctx = this.reads.lastKey();
    for (const [id, pr] of this.prs.progress) {
      if (id === this.id) continue;
      // Never tell a follower to commit past what it is known to hold.
      const m = { ...newMessage("MsgHeartbeat", this.id, id, this.term), commit: Math.min(pr.match, this.log.committed) };
      pr.sentCommit = Math.max(pr.sentCommit, m.commit);
      if (ctx !== undefined) m.context = ctx;
      this.send(m);
    }
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
    this.prs.get(this.id)?.maybeUpdate(this.log.lastIndex());
    this.maybeCommit();
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
    if (confCount > 0) {
      if (confCount > 1 || this.pendingConfIndex > this.log.applying) {
        return { ok: false, code: "RAFT_CONF_IN_FLIGHT", detail: `conf change at ${this.pendingConfIndex} not yet applied`, retry: false };
      }
      for (const e of ents) {
        if (e.type !== "conf") continue;
        let refusal: string | undefined;
        try {
          refusal = confChangeRefusal(this.confState, decodeConfChange(e.data), this.id);
        } catch (err) {
          refusal = (err as Error).message;
        }
        if (refusal) return { ok: false, code: "RAFT_REJECTED", detail: refusal, retry: false };
      }
    }
    if (this.uncommittedBytes > 0 && this.uncommittedBytes + bytes > this.limits.maxUncommittedEntriesBytes) {
      return { ok: false, code: "RAFT_REJECTED", detail: "leader has too many uncommitted bytes (maxUncommittedEntriesBytes)", retry: false };
    }
    const index = this.appendEntries(ents);
    if (confCount > 0) this.pendingConfIndex = index + ents.length - 1;
    this.bcastAppend();
    return { ok: true, index };
  }

  private handleForwardedProposal(m: Message): void {
    const req = { requests: m.requests ?? [], incarnation: m.incarnation ?? 0, batch: m.batch ?? 0 };
    const reply = (fields: Partial<Message>) => this.send({ ...this.answerTo("MsgPropResp", m.from, req), ...fields });
    // A re-delivered batch (network duplicate, sender retry) gets the original answer instead of a second copy.
    const key = `${m.from}/${req.incarnation}/${req.batch}`;
    const seen = this.seenProposals.get(key);
    if (seen !== undefined) return reply({ index: seen, logTerm: this.term });
    const ents = (m.entries ?? []).map((e): Entry => ({ term: 0, index: 0, type: e.type, data: e.data }));
    const res = this.acceptProposal(ents);
    if (!res.ok) return reply({ reject: true, reason: res.retry ? "RAFT_NO_LEADER" : res.code, context: res.detail });
    // the proposer settles its requests when it learns that these entries committed
    this.waitsForCommit(m.from, res.index + ents.length - 1);
    this.seenProposals.set(key, res.index);
    if (this.seenProposals.size > SEEN_PROPOSALS_MAX) {
      this.seenProposals.delete(this.seenProposals.keys().next().value!);
    }
    reply({ index: res.index, logTerm: this.term });
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

  private sendTimeoutNow(to: NodeId): void {
    this.send(newMessage("MsgTimeoutNow", this.id, to, this.term));
  }

  // ------------------------------------------------------------------ reads

  private readRequestOf(m: Message): ReadRequest {
    const incarnation = m.incarnation ?? 0;
    const batch = m.batch ?? 0;
    return { from: m.from, requests: m.requests ?? [], batch, incarnation, key: `${m.from}/${incarnation}/${batch}` };
  }

  handleReadIndex(req: ReadRequest): void {
    if (this.prs.voters.size === 1 && this.prs.isVoter(this.id)) {
      this.answerRead(req, this.log.committed);
      return;
    }
    // Until an entry of this term commits, our commit index may lag what the previous leader committed.
    if (this.log.termOrZero(this.log.committed) !== this.term) {
      this.pendingReads.push(req);
      return;
    }
    if (this.reads.add(this.log.committed, req, this.id)) this.bcastHeartbeat();
  }

  private handleReadAck(from: NodeId, key: string): void {
    const acks = this.reads.recvAck(from, key);
    if (!acks || !hasQuorum(this.prs.voters, (id) => acks.has(id))) return;
    for (const round of this.reads.advance(key)) this.answerRead(round.req, round.index);
  }

  private answerRead(req: ReadRequest, index: number): void {
    if (req.from === this.id) {
      if (req.incarnation === this.incarnation) this.readIndexed(req.requests, index, req.batch);
      return;
    }
    this.send({ ...this.answerTo("MsgReadIndexResp", req.from, req), index });
    // the reader answers once it applied through `index`, so it must learn that `index` is committed
    this.waitsForCommit(req.from, index);
  }

  /** Follower `id` settles requests once it knows `index` is committed: tell it as soon as it is (and now, if so). */
  private waitsForCommit(id: NodeId, index: number): void {
    const pr = this.prs.get(id);
    if (!pr) return;
    pr.commitWaited = Math.max(pr.commitWaited, index);
    this.tellCommitIfWaited(id, pr);
  }

  /** The answer to a forwarded request, echoing what identifies it at the origin. */
  private answerTo(type: "MsgPropResp" | "MsgReadIndexResp", to: NodeId, req: { requests: number[]; incarnation: number; batch: number }): Message {
    return { ...newMessage(type, this.id, to, 0), requests: req.requests, incarnation: req.incarnation, batch: req.batch };
  }

  /** Stepping down: reads not yet confirmed go back to their origins to be retried with the next leader. */
  private abandonReads(): void {
    const rounds = [...this.reads.drain().map((r) => r.req), ...this.pendingReads];
    this.pendingReads = [];
    for (const req of rounds) {
      if (req.from === this.id) {
        if (req.incarnation === this.incarnation) this.tracker.requeue(req.requests, req.batch);
        continue;
      }
      this.send({ ...this.answerTo("MsgReadIndexResp", req.from, req), reject: true, reason: "RAFT_NO_LEADER" });
    }
  }

  private handleReadIndexResp(m: Message): void {
    if ((m.incarnation ?? 0) !== this.incarnation) return; // answer to a previous life of this node
    const ids = m.requests ?? [];
    if (m.reject) this.tracker.requeue(ids, m.batch ?? 0);
    else this.readIndexed(ids, m.index, m.batch ?? 0);
  }

  /** A read index is known; reads this node has already applied through are answered right away. */
  private readIndexed(ids: readonly RequestId[], index: number, batch: number): void {
    this.tracker.readIndexed(ids, index, batch);
    this.tracker.onApplying(this.log.applying);
  }

  // ------------------------------------------------------------------ requests (origin side)

  private handlePropResp(m: Message): void {
    if ((m.incarnation ?? 0) !== this.incarnation) return;
    const ids = m.requests ?? [];
    const batch = m.batch ?? 0;
    if (!m.reject) return this.settleAppended(ids, m.index, m.logTerm, batch);
    const reason = m.reason ?? "RAFT_REJECTED";
    if (reason === "RAFT_NO_LEADER") this.tracker.requeue(ids, batch);
    else this.tracker.reject(ids, batch, reason, m.context ?? `refused by leader ${m.from}`);
  }

  /** Records leader-assigned positions; those already handed out as committed are settled right away. */
  private settleAppended(ids: readonly RequestId[], firstIndex: number, term: number, batch: number): void {
    this.tracker.appended(ids, firstIndex, term, batch);
    if (firstIndex > this.log.applying) return;
    ids.forEach((id, k) => {
      const index = firstIndex + k;
      if (index > this.log.applying) return;
      const known = index >= this.log.firstIndex() - 1 && index <= this.log.lastIndex();
      this.tracker.settleAppended(id, known ? this.log.term(index) : undefined);
    });
  }

  /**
   * Sends requests that were waiting for a leader: appended here if we lead, forwarded (batched) if we know
   * the leader, left waiting otherwise. Called when a Ready is built, so proposals made between Readies go
   * out as one batch.
   */
  flushRequests(): void {
    if (!this.canFlushRequests()) return;
    if (this.isRemoved()) {
      const gone = this.takeBatch(() => true, NONE);
      this.tracker.reject(gone.ids, gone.batch, "RAFT_NOT_VOTER", `node ${this.id} is not a member of this group`);
      return;
    }
    const to = this.role === "leader" ? this.id : this.lead;
    const props = this.tracker.takeWaiting((k) => k === "propose", to);
    // Batches of at most maxSizePerMsgBytes, so one burst cannot make an unbounded message.
    let start = 0;
    let bytes = 0;
    for (let k = 0; k <= props.length; k++) {
      const p = props[k];
      if (k > start && (p === undefined || bytes + p.data.length > this.limits.maxSizePerMsgBytes)) {
        this.sendRequests(to, "normal", props.slice(start, k));
        start = k;
        bytes = 0;
      }
      if (p) bytes += p.data.length;
    }
    // One conf change per message: the leader refuses a second one in flight anyway.
    for (const p of this.tracker.takeWaiting((k) => k === "conf", to)) this.sendRequests(to, "conf", [p]);
    const reads = this.tracker.takeWaiting((k) => k === "read", to);
    if (reads.length === 0) return;
    const ids = reads.map((p) => p.id);
    const batch = this.tracker.stamp(ids);
    const req: ReadRequest = { from: this.id, requests: ids, batch, incarnation: this.incarnation, key: `${this.id}/${this.incarnation}/${batch}` };
    if (to === this.id) this.handleReadIndex(req);
    else this.send({ ...newMessage("MsgReadIndex", this.id, to, 0), requests: ids, incarnation: this.incarnation, batch });
  }

  private takeBatch(accept: (k: RequestKind) => boolean, to: NodeId): { ids: RequestId[]; batch: number } {
    const ids = this.tracker.takeWaiting(accept, to).map((p) => p.id);
    return { ids, batch: this.tracker.stamp(ids) };
  }

  /** Appends the batch here (we lead) or forwards it to the leader. */
  private sendRequests(to: NodeId, type: "normal" | "conf", items: { id: RequestId; data: Uint8Array }[]): void {
    const ids = items.map((p) => p.id);
    const batch = this.tracker.stamp(ids);
    const entries: Entry[] = items.map((p) => ({ term: 0, index: 0, type, data: p.data }));
    if (to !== this.id) {
      this.send({ ...newMessage("MsgProp", this.id, to, 0), entries, requests: ids, incarnation: this.incarnation, batch });
      return;
    }
    const res = this.acceptProposal(entries);
    if (res.ok) this.settleAppended(ids, res.index, this.term, batch);
    else if (res.retry) this.tracker.requeue(ids, batch);
    else this.tracker.reject(ids, batch, res.code, res.detail);
  }

  /** Whether flushRequests() would do anything now (waiting requests and somewhere to send them). */
  canFlushRequests(): boolean {
    if (!this.tracker.hasWaiting()) return false;
    if (this.isRemoved()) return true;
    // During a leadership transfer the requests wait for the next leader rather than fail.
    if (this.role === "leader") return this.leadTransferee === NONE;
    return this.lead !== NONE;
  }

  /**
   * This node applied its own removal. (Not "absent from the configuration": a node still joining is absent
   * too, until it applies the entry that adds it.) Not persisted: after a restart a removed node simply hears
   * from no leader, and its requests fail with RAFT_NO_LEADER.
   */
  isRemoved(): boolean {
    return this.removedSelf;
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
        const res = this.poll(m.from, !m.reject);
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
        if (m.type === "MsgApp") this.handleAppend(m);
        else if (m.type === "MsgSnap") this.handleSnapshotChunk(m);
        else this.handleHeartbeat(m);
        return;
      case "MsgTransferLeader":
        if (this.lead !== NONE) this.send({ ...m, to: this.lead, from: this.id });
        return;
      case "MsgTimeoutNow":
        // The leader chose us; campaign at once, without pre-vote, bypassing the followers' lease.
        this.campaign("transfer");
        return;
    }
  }

  /** A forwarded request reached a node that is not the leader: tell the origin to retry elsewhere. */
  private refuseForward(m: Message): void {
    const req = { requests: m.requests ?? [], incarnation: m.incarnation ?? 0, batch: m.batch ?? 0 };
    const type = m.type === "MsgProp" ? "MsgPropResp" : "MsgReadIndexResp";
    this.send({ ...this.answerTo(type, m.from, req), reject: true, reason: "RAFT_NO_LEADER", context: "not the leader" });
  }

  private handleHeartbeat(m: Message): void {
    this.log.commitTo(m.commit);
    const resp = newMessage("MsgHeartbeatResp", this.id, m.from, this.term);
    if (m.context !== undefined) resp.context = m.context;
    this.send(resp);
  }

  private handleAppend(m: Message): void {
    let prevIndex = m.index;
    let prevTerm = m.logTerm;
    let ents = m.entries ?? [];
    const committed = this.log.committed;
    if (prevIndex < committed) {
      // Part of this append is already committed here (a reordered or duplicated MsgApp). Those entries are
      // identical to ours (Log Matching), but the rest may be new: keep it rather than drop it, or the leader,
      // which already counts it as in flight, may never send it again.
      const skip = committed - prevIndex;
      if (ents.length <= skip) {
        this.send({ ...newMessage("MsgAppResp", this.id, m.from, this.term), index: committed });
        return;
      }
      prevTerm = ents[skip - 1]!.term;
      prevIndex = committed;
      ents = ents.slice(skip);
    }
    const lastNew = this.log.maybeAppend(prevIndex, prevTerm, m.commit, ents);
    if (lastNew !== undefined) {
      this.send({ ...newMessage("MsgAppResp", this.id, m.from, this.term), index: lastNew });
      return;
    }
    // Reject with a hint: the last index <= the probed one whose term is <= the leader's term there. The
    // leader can then skip every entry of a term we do not share in one round trip.
    const [hintIndex, hintTerm] = this.log.findConflictByTerm(Math.min(prevIndex, this.log.lastIndex()), prevTerm);
    this.send({
      ...newMessage("MsgAppResp", this.id, m.from, this.term),
      index: m.index,
      reject: true,
      rejectHint: hintIndex,
      logTerm: hintTerm,
    });
  }

  private handleSnapshotChunk(m: Message): void {
    const c = m.snapshot;
    if (!c) return;
    const md = c.metadata;
    const ackApp = () => this.send({ ...newMessage("MsgAppResp", this.id, m.from, this.term), index: this.log.lastIndex() });
    if (md.index <= this.log.committed) {
      // Already have it (a resent last chunk whose acknowledgement was lost): say where we are.
      this.inbound = undefined;
      this.send({ ...newMessage("MsgAppResp", this.id, m.from, this.term), index: this.log.committed });
      return;
    }
    const askFor = (offset: number) =>
      this.send({ ...newMessage("MsgSnapResp", this.id, m.from, this.term), index: md.index, snapOffset: offset });
    if (c.totalBytes > this.limits.snapshotBytesMax) return; // refuse to buffer it; the operator must raise the limit
    const cur = this.inbound;
    if (!cur || cur.metadata.index !== md.index || cur.metadata.term !== md.term) {
      if (c.offset !== 0) return askFor(0);
      this.inbound = { metadata: md, totalBytes: c.totalBytes, chunks: [], received: 0 };
    }
    const ib = this.inbound!;
    if (c.offset !== ib.received) return askFor(ib.received); // duplicate or reordered chunk
    ib.chunks.push(c.data);
    ib.received += c.data.length;
    if (ib.received < ib.totalBytes) return askFor(ib.received);
    this.inbound = undefined;
    const data = new Uint8Array(ib.totalBytes);
    let off = 0;
    for (const part of ib.chunks) {
      data.set(part, off);
      off += part.length;
    }
    if (this.restore({ metadata: md, data })) ackApp();
    else this.send({ ...newMessage("MsgAppResp", this.id, m.from, this.term), index: this.log.committed });
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
    this.setConf(cloneConfState(cs));
    return true;
  }

  // ------------------------------------------------------------------ membership

  private setConf(cs: ConfState): void {
    this.confState = cs;
    this.confChanged = true;
    this.prs.setConfig(cs.voters, cs.learners, this.log.lastIndex() + 1);
    if (this.prs.isMember(this.id)) this.removedSelf = false;
  }

  /** Applies a conf entry being handed out as committed (skipped if the stored membership already has it). */
  applyConfEntry(e: Entry): void {
    if (e.index <= this.confState.confIndex) return;
    const before = new Set(this.prs.progress.keys());
    const cc = decodeConfChange(e.data);
    this.setConf(applyConfChange(this.confState, cc, e.index));
    if (cc.node === this.id && cc.kind === "removeNode") this.removedSelf = true;
    if (!this.prs.isVoter(this.id) && this.role !== "follower") {
      // No longer a voter: abandon a campaign, or step down if we lead (the change was committed before we
      // led, since a leader refuses to propose its own removal or demotion).
      this.becomeFollower(this.term, NONE);
      return;
    }
    if (this.role !== "leader") return;
    for (const [id, pr] of this.prs.progress) if (!before.has(id)) pr.recentActive = true;
    if (this.leadTransferee !== NONE && !this.prs.isVoter(this.leadTransferee)) this.leadTransferee = NONE;
    // A smaller quorum may commit more at once; new members need entries.
    if (this.maybeCommit()) this.bcastAppend();
    else for (const [id, pr] of this.prs.progress) if (!before.has(id)) this.maybeSendAppend(id, pr, true);
  }

  /** The application is being handed these committed entries. */
  handOutCommitted(ents: readonly Entry[]): void {
    for (const e of ents) {
      if (e.type === "conf") this.applyConfEntry(e);
      if (this.role === "leader") this.uncommittedBytes = Math.max(0, this.uncommittedBytes - e.data.length);
    }
  }
}
