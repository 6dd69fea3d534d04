/**
 * Elections (paper §5.2, §5.4.1; thesis §9.6 pre-vote, §3.10 leadership transfer): starting a campaign,
 * counting votes, and answering a (pre-)vote request. Roles change through the state machine's
 * become* transitions; the term rules that decide whether a vote request is even looked at (leader lease,
 * stale terms) are in Raft.step.
 */
import type { RaftLog } from "./log.js";
import type { ProgressTracker } from "./progress.js";
import type { VoteResult } from "./quorum.js";
import { voteResult } from "./quorum.js";
import type { Message, MessageType, NodeId } from "./types.js";
import { CAMPAIGN_TRANSFER, NONE, newMessage } from "./types.js";

/** pre: pre-vote round (no term change); elect: a real election; transfer: elect, chosen by the leader (MsgTimeoutNow) */
export type CampaignKind = "pre" | "elect" | "transfer";

/** What elections need of the state machine (Raft). */
export interface ElectionHost {
  readonly id: NodeId;
  readonly term: number;
  vote: NodeId;
  readonly lead: NodeId;
  electionElapsed: number;
  readonly log: RaftLog;
  readonly prs: ProgressTracker;
  send(m: Message): void;
  promotable(): boolean;
  /** a committed conf entry is not yet handed out */
  hasUnappliedConfChanges(): boolean;
  becomePreCandidate(): void;
  becomeCandidate(): void;
  becomeLeader(): void;
}

/** Starts a campaign of `kind`: becomes (pre-)candidate and asks every other voter. */
export function campaign(r: ElectionHost, kind: CampaignKind): void {
  if (!r.promotable()) return;
  if (r.hasUnappliedConfChanges()) return;
  let voteType: MessageType;
  let term: number;
  if (kind === "pre") {
    r.becomePreCandidate();
    voteType = "MsgPreVote";
    term = r.term + 1;
  } else {
    r.becomeCandidate();
    voteType = "MsgVote";
    term = r.term;
  }
  if (poll(r, r.id, true) === "won") {
    // a single-voter group wins at once
    if (kind === "pre") campaign(r, "elect");
    else r.becomeLeader();
    return;
  }
  const lastIndex = r.log.lastIndex();
  const lastTerm = r.log.lastTerm();
  for (const id of r.prs.voters) {
    if (id === r.id) continue;
    const m = { ...newMessage(voteType, r.id, id, term), index: lastIndex, logTerm: lastTerm };
    if (kind === "transfer") m.context = CAMPAIGN_TRANSFER;
    r.send(m);
  }
}

/** Records `from`'s vote (the first one counts) and says where the election stands. */
export function poll(r: ElectionHost, from: NodeId, granted: boolean): VoteResult {
  if (!r.prs.votes.has(from)) r.prs.votes.set(from, granted);
  return voteResult(r.prs.voters, r.prs.votes);
}

/** Answers a MsgVote or MsgPreVote that passed the term checks. */
export function handleVoteRequest(r: ElectionHost, m: Message): void {
  const respType = m.type === "MsgVote" ? "MsgVoteResp" : "MsgPreVoteResp";
  // §5.2: one vote per term, first come first served; §5.4.1: only for a log at least as up to date.
  const canVote =
    r.vote === m.from ||
    (r.vote === NONE && r.lead === NONE) ||
    (m.type === "MsgPreVote" && m.term > r.term);
  if (canVote && r.log.isUpToDate(m.index, m.logTerm)) {
    // A learner answers too: it may already be a voter in the candidate's (newer) configuration. Its grant
    // counts only if the candidate's configuration lists it as a voter (quorum.ts sees voters only).
    r.send(newMessage(respType, r.id, m.from, m.term));
    if (m.type === "MsgVote") {
      r.electionElapsed = 0;
      r.vote = m.from;
    }
  } else {
    r.send({ ...newMessage(respType, r.id, m.from, r.term), reject: true });
  }
}
