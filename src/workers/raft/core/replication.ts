/**
 * Log replication (paper §5.3), both ends. The leader sends each follower entries from its `next` index as
 * its Progress allows (probe / replicate with an inflight window; a snapshot when `next` is compacted away),
 * heartbeats carrying a commit index the follower is known to hold, and acts on the answers: conflict
 * backtracking by term, flow control, the commit index, followers waiting to learn a commit. The follower
 * appends what matches its log (or rejects with a hint) and takes the commit index from appends and
 * heartbeats.
 *
 * A new commit index rides on the next MsgApp or MsgHeartbeat; it is sent at once only to a follower that
 * waits for it (Progress.commitWaited) and to every member when a membership change commits (README "How
 * followers learn a commit").
 */
import type { RaftLimits } from "./limits.js";
import type { RaftLog } from "./log.js";
import type { Progress, ProgressTracker } from "./progress.js";
import type { Message, NodeId } from "./types.js";
import { newMessage } from "./types.js";

/** What replication needs of the state machine (Raft). */
export interface ReplicationHost {
  readonly id: NodeId;
  readonly term: number;
  readonly limits: RaftLimits;
  readonly log: RaftLog;
  readonly prs: ProgressTracker;
  /** index of the latest conf entry this leader appended */
  readonly pendingConfIndex: number;
  readonly leadTransferee: NodeId;
  send(m: Message): void;
  /** advances the commit index to what a quorum holds; true if it moved */
  maybeCommit(): boolean;
  /** starts a snapshot transfer to `to`; false if none can be sent now */
  maybeSendSnapshot(to: NodeId, pr: Progress): boolean;
  sendTimeoutNow(to: NodeId): void;
}

// ------------------------------------------------------------------ leader: sending

/** Sends entries (or a snapshot) to `to` if its flow control allows; returns whether anything was sent. */
export function maybeSendAppend(r: ReplicationHost, to: NodeId, pr: Progress, sendIfEmpty: boolean): boolean {
  if (to === r.id || pr.isPaused()) return false;
  const prevIndex = pr.next - 1;
  const first = r.log.firstIndex();
  const ents = prevIndex >= first - 1 ? r.log.entriesFrom(pr.next, r.limits.maxSizePerMsgBytes) : undefined;
  if (ents === undefined) return r.maybeSendSnapshot(to, pr);
  if (ents.length === 0 && !sendIfEmpty) return false;
  r.send({
    ...newMessage("MsgApp", r.id, to, r.term),
    index: prevIndex,
    logTerm: r.log.term(prevIndex),
    entries: ents,
    commit: r.log.committed,
  });
  pr.sentEntries(ents.length, prevIndex + ents.length);
  pr.sentCommit = Math.max(pr.sentCommit, Math.min(r.log.committed, prevIndex + ents.length));
  return true;
}

export function bcastAppend(r: ReplicationHost): void {
  for (const [id, pr] of r.prs.progress) if (id !== r.id) maybeSendAppend(r, id, pr, true);
}

/** Heartbeats to every follower; `ctx` (the latest ReadIndex round) is echoed in their answers. */
export function bcastHeartbeat(r: ReplicationHost, ctx: string | undefined): void {
  for (const [id, pr] of r.prs.progress) {
    if (id === r.id) continue;
    // Never tell a follower to commit past what it is known to hold.
    const m = { ...newMessage("MsgHeartbeat", r.id, id, r.term), commit: Math.min(pr.match, r.log.committed) };
    pr.sentCommit = Math.max(pr.sentCommit, m.commit);
    if (ctx !== undefined) m.context = ctx;
    r.send(m);
  }
}

/** Sends `to` the commit index if it waits for one it has not been sent (Progress.commitWaited). */
function tellCommitIfWaited(r: ReplicationHost, to: NodeId, pr: Progress): void {
  if (pr.sentCommit < Math.min(pr.commitWaited, r.log.committed)) maybeSendAppend(r, to, pr, true);
}

/** Follower `id` settles requests once it knows `index` is committed: tell it as soon as it is (and now, if so). */
export function waitsForCommit(r: ReplicationHost, id: NodeId, index: number): void {
  const pr = r.prs.get(id);
  if (!pr) return;
  pr.commitWaited = Math.max(pr.commitWaited, index);
  tellCommitIfWaited(r, id, pr);
}

// ------------------------------------------------------------------ leader: answers

export function handleAppResp(r: ReplicationHost, m: Message, pr: Progress): void {
  if (m.reject) {
    // Conflict backtracking by term: the follower named the last index whose term is <= the term we
    // probed with; skip to where our own log has a term no newer than the follower's.
    let nextProbe = m.rejectHint;
    if (m.logTerm > 0) nextProbe = r.log.findConflictByTerm(m.rejectHint, m.logTerm)[0];
    if (pr.maybeDecrTo(m.index, nextProbe)) {
      if (pr.state === "replicate") pr.becomeProbe();
      maybeSendAppend(r, m.from, pr, false);
    }
    return;
  }
  const wasPaused = pr.isPaused();
  const updated = pr.maybeUpdate(m.index);
  if (pr.state === "snapshot") {
    // The follower installed the snapshot (or already had what it needed): stream from its match. If our
    // log has been compacted past it meanwhile, maybeSendAppend starts a newer snapshot.
    if (pr.match < pr.pendingSnapshot && pr.match + 1 < r.log.firstIndex()) return;
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
  commitAndTell(r, m.from);
  if (wasPaused) maybeSendAppend(r, m.from, pr, true);
  while (maybeSendAppend(r, m.from, pr, false)) {
    // stream while the window allows
  }
  tellCommitIfWaited(r, m.from, pr);
  if (m.from === r.leadTransferee && pr.match === r.log.lastIndex()) r.sendTimeoutNow(m.from);
}

/** Commits what a quorum now holds; tells the members that wait for it (all of them for a membership change). */
function commitAndTell(r: ReplicationHost, except: NodeId): void {
  const before = r.log.committed;
  if (!r.maybeCommit()) return;
  if (r.pendingConfIndex > before && r.pendingConfIndex <= r.log.committed) bcastAppend(r);
  else for (const [id, p] of r.prs.progress) if (id !== except) tellCommitIfWaited(r, id, p);
}

/**
 * Asynchronous storage writes: the leader's own log grew durable (RawNode.appendDurable, or advance() of a
 * Ready written at once). Its own copy counts toward the quorum from now on, exactly as a follower's
 * acknowledgement does; never before (thesis §10.2.1).
 */
export function ownCopyDurable(r: ReplicationHost): void {
  const self = r.prs.get(r.id);
  if (!self || !self.maybeUpdate(Math.min(r.log.durableLastIndex(), r.log.lastIndex()))) return;
  commitAndTell(r, r.id);
}

/** A heartbeat answer (the caller handles the ReadIndex acknowledgement it may carry). */
export function handleHeartbeatResp(r: ReplicationHost, m: Message, pr: Progress): void {
  pr.recentActive = true;
  pr.probeSent = false;
  // Entries that were already in flight at the previous heartbeat answer are still unacknowledged a whole
  // round later: those MsgApps were probably lost (the follower hears us, so it is up). Fall back to
  // probing from its match, which resends them.
  if (pr.state === "replicate" && pr.match < pr.sentAtLastHeartbeat) pr.becomeProbe();
  pr.sentAtLastHeartbeat = pr.next - 1;
  if (pr.match < r.log.lastIndex()) maybeSendAppend(r, m.from, pr, false);
}

// ------------------------------------------------------------------ follower

/** A heartbeat: take its commit and answer; `declineRest`: it asked us to rest and we may not (reject). */
export function handleHeartbeat(r: ReplicationHost, m: Message, declineRest = false): void {
  r.log.commitTo(m.commit);
  const resp = newMessage("MsgHeartbeatResp", r.id, m.from, r.term);
  if (m.context !== undefined) resp.context = m.context;
  if (declineRest) resp.reject = true;
  r.send(resp);
}

export function handleAppend(r: ReplicationHost, m: Message): void {
  let prevIndex = m.index;
  let prevTerm = m.logTerm;
  let ents = m.entries ?? [];
  const committed = r.log.committed;
  if (prevIndex < committed) {
    // Part of this append is already committed here (a reordered or duplicated MsgApp). Those entries are
    // identical to ours (Log Matching), but the rest may be new: keep it rather than drop it, or the leader,
    // which already counts it as in flight, may never send it again.
    const skip = committed - prevIndex;
    if (ents.length <= skip) {
      r.send({ ...newMessage("MsgAppResp", r.id, m.from, r.term), index: committed });
      return;
    }
    prevTerm = ents[skip - 1]!.term;
    prevIndex = committed;
    ents = ents.slice(skip);
  }
  const lastNew = r.log.maybeAppend(prevIndex, prevTerm, m.commit, ents);
  if (lastNew !== undefined) {
    r.send({ ...newMessage("MsgAppResp", r.id, m.from, r.term), index: lastNew });
    return;
  }
  // Reject with a hint: the last index <= the probed one whose term is <= the leader's term there. The
  // leader can then skip every entry of a term we do not share in one round trip.
  const [hintIndex, hintTerm] = r.log.findConflictByTerm(Math.min(prevIndex, r.log.lastIndex()), prevTerm);
  r.send({
    ...newMessage("MsgAppResp", r.id, m.from, r.term),
    index: m.index,
    reject: true,
    rejectHint: hintIndex,
    logTerm: hintTerm,
  });
}
