/**
 * Membership changes as the state machine sees them (confchange.ts encodes and applies them to a ConfState):
 * one change at a time, in effect when its entry is handed out as committed (never at append), checked by
 * the leader before it is appended. A node that applies its own removal remembers it (isRemoved) so its
 * requests fail with RAFT_NOT_VOTER; a leader or candidate that stops being a voter steps down.
 */
import type { ErrCode } from "../../../shared/errors.js";
import { applyConfChange, confChangeRefusal, decodeConfChange } from "./confchange.js";
import type { RaftLog } from "./log.js";
import type { Progress, ProgressTracker } from "./progress.js";
import type { ConfState, Entry, NodeId, Role } from "./types.js";
import { NONE } from "./types.js";

/** What membership handling needs of the state machine (Raft). */
export interface MembershipHost {
  readonly id: NodeId;
  readonly term: number;
  readonly role: Role;
  readonly log: RaftLog;
  readonly prs: ProgressTracker;
  /** membership in effect; replaced (never mutated) on a change */
  confState: ConfState;
  /** set when confState changed since the last Ready */
  confChanged: boolean;
  leadTransferee: NodeId;
  /** index of the latest conf entry this leader appended */
  readonly pendingConfIndex: number;
  becomeFollower(term: number, lead: NodeId): void;
  maybeCommit(): boolean;
  bcastAppend(): void;
  maybeSendAppend(to: NodeId, pr: Progress, sendIfEmpty: boolean): boolean;
}

export class Membership {
  private removedSelf = false;

  constructor(private readonly r: MembershipHost) {}

  /**
   * This node applied its own removal. (Not "absent from the configuration": a node still joining is absent
   * too, until it applies the entry that adds it.) Not persisted: after a restart a removed node simply hears
   * from no leader, and its requests fail with RAFT_NO_LEADER.
   */
  get removed(): boolean {
    return this.removedSelf;
  }

  /** Puts `cs` in effect (a snapshot's configuration, or the result of a conf entry). */
  set(cs: ConfState): void {
    const r = this.r;
    r.confState = cs;
    r.confChanged = true;
    r.prs.setConfig(cs.voters, cs.learners, r.log.lastIndex() + 1);
    if (r.prs.isMember(r.id)) this.removedSelf = false;
  }

  /** Applies a conf entry being handed out as committed (skipped if the stored membership already has it). */
  applyEntry(e: Entry): void {
    const r = this.r;
    if (e.index <= r.confState.confIndex) return;
    const before = new Set(r.prs.progress.keys());
    const cc = decodeConfChange(e.data);
    this.set(applyConfChange(r.confState, cc, e.index));
    if (cc.node === r.id && cc.kind === "removeNode") this.removedSelf = true;
    if (!r.prs.isVoter(r.id) && r.role !== "follower") {
      // No longer a voter: abandon a campaign, or step down if we lead (the change was committed before we
      // led, since a leader refuses to propose its own removal or demotion).
      r.becomeFollower(r.term, NONE);
      return;
    }
    if (r.role !== "leader") return;
    for (const [id, pr] of r.prs.progress) if (!before.has(id)) pr.recentActive = true;
    if (r.leadTransferee !== NONE && !r.prs.isVoter(r.leadTransferee)) r.leadTransferee = NONE;
    // A smaller quorum may commit more at once; new members need entries.
    if (r.maybeCommit()) r.bcastAppend();
    else for (const [id, pr] of r.prs.progress) if (!before.has(id)) r.maybeSendAppend(id, pr, true);
  }

  /**
   * The leader's check of the conf entries in a proposal batch (`confCount` of them): at most one, none
   * while another is not yet applied, and each valid against the membership in effect.
   */
  refusal(ents: readonly Entry[], confCount: number): { code: ErrCode; detail: string } | undefined {
    const r = this.r;
    if (confCount > 1 || r.pendingConfIndex > r.log.applying) {
      return { code: "RAFT_CONF_IN_FLIGHT", detail: `conf change at ${r.pendingConfIndex} not yet applied` };
    }
    for (const e of ents) {
      if (e.type !== "conf") continue;
      let refusal: string | undefined;
      try {
        refusal = confChangeRefusal(r.confState, decodeConfChange(e.data), r.id);
      } catch (err) {
        refusal = (err as Error).message;
      }
      if (refusal) return { code: "RAFT_REJECTED", detail: refusal };
    }
    return undefined;
  }

  /** A committed conf entry not yet handed out: campaigning now would use a configuration about to change. */
  hasUnapplied(): boolean {
    const log = this.r.log;
    if (log.applying >= log.committed) return false;
    const lo = Math.max(log.applying + 1, log.firstIndex());
    return log.slice(lo, log.committed + 1, Number.MAX_SAFE_INTEGER).some((e) => e.type === "conf");
  }
}
