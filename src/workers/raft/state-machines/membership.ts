/**
 * Membership of one Raft group as Salt models it: voters, learners, and `version`, the log index of the
 * CONFIG entry they come from (-1 before any). Every CONFIG carries the full sets, so applying one replaces
 * both. An entry at or below `version` is stale (a replay) and changes nothing, so an older config can never
 * overwrite a newer one (Salt's `_applied_config_index`).
 *
 * Invariants: voters and learners are sorted, disjoint, valid node ids (names.ts), voters non-empty once a
 * CONFIG has been applied.
 */
import { APPLIED, STALE, checkIndex, type ApplyResult } from "./apply.js";
import type { ConfigValue } from "./entries.js";
import { clusterLimits } from "../../../shared/cluster-limits.js";
import { validateNodeList } from "../../../shared/cluster-names.js";
import { asSnapshotCheck, snapshotField, snapshotObject, snapshotVersion } from "./snapshot-check.js";

/** Salt's MembershipStateMachine.get_snapshot() shape. */
export interface MembershipSnapshot {
  voters: string[];
  learners: string[];
  version: number;
}

export class MembershipStateMachine {
  private voterList: readonly string[] = [];
  private learnerList: readonly string[] = [];
  private appliedVersion = -1;

  /** `value` must come from decodeEntry/validateEntry (sorted, disjoint, valid). */
  apply(value: ConfigValue, index: number): ApplyResult {
    checkIndex(index);
    if (index <= this.appliedVersion) return STALE;
    this.voterList = [...value.voters];
    this.learnerList = [...value.learners];
    this.appliedVersion = index;
    return APPLIED;
  }

  /** Sorted voter ids. */
  voters(): string[] {
    return [...this.voterList];
  }

  /** Sorted learner ids. */
  learners(): string[] {
    return [...this.learnerList];
  }

  isVoter(id: string): boolean {
    return this.voterList.includes(id);
  }

  isLearner(id: string): boolean {
    return this.learnerList.includes(id);
  }

  /** Index of the applied CONFIG, -1 if none (Salt's membership_version). */
  get version(): number {
    return this.appliedVersion;
  }

  snapshot(): MembershipSnapshot {
    return { voters: this.voters(), learners: this.learners(), version: this.appliedVersion };
  }

  restore(snapshot: unknown): void {
    const o = snapshotObject(snapshot, "membership");
    const voters = asSnapshotCheck("membership", () => validateNodeList(snapshotField(o, "voters"), "voters", clusterLimits.votersMax));
    const learners = asSnapshotCheck("membership", () =>
      validateNodeList(snapshotField(o, "learners"), "learners", clusterLimits.learnersMax),
    );
    const version = snapshotVersion(snapshotField(o, "version"), "membership");
    asSnapshotCheck("membership", () => {
      const both = voters.find((id) => learners.includes(id));
      if (both !== undefined) throw new Error(`${both} is both voter and learner`);
    });
    this.voterList = voters;
    this.learnerList = learners;
    this.appliedVersion = version;
  }
}
