/**
 * The cluster log's registry of named rings (Salt's RingRegistryStateMachine): ring id -> {founding_voters,
 * status}. Entries stay after destruction, founders included, for audit; re-activating a destroyed id is how
 * a ring is re-created (its own group's files recover its state).
 *
 * Refusals (deterministic no-ops, see apply.ts):
 * - re-founding an *active* ring with different founders: non-founders can never join a ring's group, so
 *   changing the list would silently split who hosts it (destroy it first);
 * - more than activeRingsMax active rings, or registryRingsMax ids ever: they could not all be published.
 */
import { BrineError } from "../../../shared/errors.js";
import { APPLIED, STALE, checkIndex, refused, type ApplyResult } from "./apply.js";
import type { RingRegistryValue, RingStatus } from "./entries.js";
import { clusterLimits } from "../../../shared/cluster-limits.js";
import { validateNamedRingId, validateNodeList } from "../../../shared/cluster-names.js";
import { asSnapshotCheck, snapshotField, snapshotObject, snapshotVersion } from "./snapshot-check.js";

export interface RingRecord {
  founding_voters: string[];
  status: RingStatus;
}

/** Salt's RingRegistryStateMachine.get_snapshot() shape. */
export interface RingRegistrySnapshot {
  rings: Record<string, RingRecord>;
  version: number;
}

export class RingRegistryStateMachine {
  private readonly records = new Map<string, { founding_voters: readonly string[]; status: RingStatus }>();
  private appliedVersion = -1;

  apply(value: RingRegistryValue, index: number): ApplyResult {
    checkIndex(index);
    if (index <= this.appliedVersion) return STALE;
    const existing = this.records.get(value.ring_id);
    const status = value.status ?? "active";
    const founders = value.founding_voters ?? existing?.founding_voters ?? [];
    if (status === "active") {
      if (founders.length === 0) return refused(new BrineError("CLUSTER_BAD_ENTRY", `${value.ring_id} has no founders`));
      if (existing?.status === "active" && founders.join("\n") !== existing.founding_voters.join("\n")) {
        return refused(new BrineError("CLUSTER_RING_CONFLICT", `${value.ring_id} is active with other founders`));
      }
      const active = [...this.records].filter(([id, r]) => r.status === "active" && id !== value.ring_id).length;
      if (active >= clusterLimits.activeRingsMax) {
        return refused(new BrineError("CLUSTER_TOO_MANY", `${clusterLimits.activeRingsMax} active rings`));
      }
    }
    if (existing === undefined && this.records.size >= clusterLimits.registryRingsMax) {
      return refused(new BrineError("CLUSTER_TOO_MANY", `${clusterLimits.registryRingsMax} registered rings`));
    }
    this.records.set(value.ring_id, { founding_voters: [...founders].sort(), status });
    this.appliedVersion = index;
    return APPLIED;
  }

  /** Every registered ring, destroyed ones included (a copy). */
  rings(): Record<string, RingRecord> {
    const out: Record<string, RingRecord> = {};
    for (const [id, r] of [...this.records].sort(([a], [b]) => (a < b ? -1 : 1))) {
      out[id] = { founding_voters: [...r.founding_voters], status: r.status };
    }
    return out;
  }

  /** Sorted ids of active rings. */
  activeRings(): string[] {
    return [...this.records].filter(([, r]) => r.status === "active").map(([id]) => id).sort();
  }

  get(ringId: string): RingRecord | undefined {
    const r = this.records.get(ringId);
    return r === undefined ? undefined : { founding_voters: [...r.founding_voters], status: r.status };
  }

  /** Index of the last applied RING_REGISTRY, -1 if none (Salt's registry_version). */
  get version(): number {
    return this.appliedVersion;
  }

  snapshot(): RingRegistrySnapshot {
    return { rings: this.rings(), version: this.appliedVersion };
  }

  restore(snapshot: unknown): void {
    const o = snapshotObject(snapshot, "ring registry");
    const rings = snapshotObject(snapshotField(o, "rings"), "ring registry rings");
    const next = new Map<string, { founding_voters: readonly string[]; status: RingStatus }>();
    for (const id of Object.keys(rings)) {
      const r = snapshotObject(rings[id], `ring ${id}`);
      const status = snapshotField(r, "status");
      if (status !== "active" && status !== "destroyed") throw new BrineError("CLUSTER_BAD_SNAPSHOT", `ring ${id} status`);
      const founders = asSnapshotCheck(`ring ${id}`, () => {
        validateNamedRingId(id);
        return validateNodeList(snapshotField(r, "founding_voters"), "founding_voters", clusterLimits.votersMax);
      });
      next.set(id, { founding_voters: founders, status });
    }
    if (next.size > clusterLimits.registryRingsMax) throw new BrineError("CLUSTER_BAD_SNAPSHOT", "too many rings");
    const version = snapshotVersion(snapshotField(o, "version"), "ring registry");
    this.records.clear();
    for (const [id, r] of next) this.records.set(id, r);
    this.appliedVersion = version;
  }
}
