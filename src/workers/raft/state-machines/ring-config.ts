/**
 * A named ring's policy (Salt's RingConfigStateMachine), applied from RING_CONFIG entries in the ring's own
 * log: `members` says what the ring contains ("self": only the local master, so every master owns every key
 * (the default, keeping broadcast behaviour); "voters": the ring group's voters, so keys shard), `replicas`
 * is the default replica count of replicas(). Entries may carry one knob; the other keeps its value.
 */
import { BrineError } from "../../../shared/errors.js";
import { APPLIED, STALE, checkIndex, type ApplyResult } from "./apply.js";
import type { RingConfigValue, RingMembers } from "./entries.js";
import { clusterLimits } from "../../../shared/cluster-limits.js";
import { snapshotField, snapshotObject, snapshotVersion } from "./snapshot-check.js";

/** Salt's RingConfigStateMachine.get_snapshot() shape. */
export interface RingConfigSnapshot {
  members: RingMembers;
  replicas: number;
  version: number;
}

export class RingConfigStateMachine {
  private membersPolicy: RingMembers = "self";
  private replicaCount = 1;
  private appliedVersion = -1;

  apply(value: RingConfigValue, index: number): ApplyResult {
    checkIndex(index);
    if (index <= this.appliedVersion) return STALE;
    if (value.members !== undefined) this.membersPolicy = value.members;
    if (value.replicas !== undefined) this.replicaCount = value.replicas;
    this.appliedVersion = index;
    return APPLIED;
  }

  get members(): RingMembers {
    return this.membersPolicy;
  }

  get replicas(): number {
    return this.replicaCount;
  }

  /** Index of the last applied RING_CONFIG, -1 if none (Salt's config_version). */
  get version(): number {
    return this.appliedVersion;
  }

  snapshot(): RingConfigSnapshot {
    return { members: this.membersPolicy, replicas: this.replicaCount, version: this.appliedVersion };
  }

  restore(snapshot: unknown): void {
    const o = snapshotObject(snapshot, "ring config");
    const members = snapshotField(o, "members");
    const replicas = snapshotField(o, "replicas");
    if (members !== "self" && members !== "voters") throw new BrineError("CLUSTER_BAD_SNAPSHOT", `ring config members`);
    if (!Number.isSafeInteger(replicas) || (replicas as number) < 1 || (replicas as number) > clusterLimits.replicasMax) {
      throw new BrineError("CLUSTER_BAD_SNAPSHOT", "ring config replicas");
    }
    const version = snapshotVersion(snapshotField(o, "version"), "ring config");
    this.membersPolicy = members;
    this.replicaCount = replicas as number;
    this.appliedVersion = version;
  }
}
