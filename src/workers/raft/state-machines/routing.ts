/**
 * The cluster log's routing table (Salt's RoutingStateMachine): data type -> ring id, or null ("route to
 * None": broadcast, every master writes). As in Salt a route is never deleted, only pointed at None, and the
 * target ring's existence is not checked here: a route to a ring this master does not host makes the gate
 * say not_a_member, which is the misconfiguration signal operators watch.
 *
 * Refusal: a new data type beyond routesMax (the shared buffer keeps one drop_stats row per data type ever
 * routed, and could not publish more).
 */
import { BrineError } from "../../../shared/errors.js";
import { APPLIED, STALE, checkIndex, refused, type ApplyResult } from "./apply.js";
import type { RouteValue } from "./entries.js";
import { clusterLimits } from "../../../shared/cluster-limits.js";
import { validateDataType, validateRingRef } from "../../../shared/cluster-names.js";
import { asSnapshotCheck, snapshotField, snapshotObject, snapshotVersion } from "./snapshot-check.js";

/** Salt's RoutingStateMachine.get_snapshot() shape. */
export interface RoutingSnapshot {
  routes: Record<string, string | null>;
  version: number;
}

export class RoutingStateMachine {
  private readonly table = new Map<string, string | null>();
  private appliedVersion = -1;
  private tableChanges = 0;

  apply(value: RouteValue, index: number): ApplyResult {
    checkIndex(index);
    if (index <= this.appliedVersion) return STALE;
    if (!this.table.has(value.data_type) && this.table.size >= clusterLimits.routesMax) {
      return refused(new BrineError("CLUSTER_TOO_MANY", `${clusterLimits.routesMax} routed data types`));
    }
    if (this.table.get(value.data_type) !== value.ring_id || !this.table.has(value.data_type)) this.tableChanges++;
    this.table.set(value.data_type, value.ring_id);
    this.appliedVersion = index;
    return APPLIED;
  }

  /** data type -> ring id or null, sorted by data type (a copy). */
  routes(): Record<string, string | null> {
    const out: Record<string, string | null> = {};
    for (const dt of [...this.table.keys()].sort()) out[dt] = this.table.get(dt)!;
    return out;
  }

  /** The ring `dataType` is routed to; null for a route to None and for no route (both broadcast). */
  get(dataType: string): string | null {
    return this.table.get(dataType) ?? null;
  }

  /**
   * How often the table's content changed in this process (a ROUTE that restates a route applies, moves
   * `version`, and leaves this alone; a restore counts as a change). Not replicated: for this master's publisher.
   */
  get changes(): number {
    return this.tableChanges;
  }

  /** Index of the last applied ROUTE, -1 if none (Salt's routing_version). */
  get version(): number {
    return this.appliedVersion;
  }

  snapshot(): RoutingSnapshot {
    return { routes: this.routes(), version: this.appliedVersion };
  }

  restore(snapshot: unknown): void {
    const o = snapshotObject(snapshot, "routing");
    const routes = snapshotObject(snapshotField(o, "routes"), "routing routes");
    const next = new Map<string, string | null>();
    for (const dt of Object.keys(routes)) {
      const ring = routes[dt];
      asSnapshotCheck(`route ${dt}`, () => {
        validateDataType(dt);
        if (ring !== null) validateRingRef(ring);
      });
      next.set(dt, ring as string | null);
    }
    if (next.size > clusterLimits.routesMax) throw new BrineError("CLUSTER_BAD_SNAPSHOT", "too many routes");
    const version = snapshotVersion(snapshotField(o, "version"), "routing");
    this.table.clear();
    for (const [dt, ring] of next) this.table.set(dt, ring);
    this.appliedVersion = version;
    this.tableChanges++;
  }
}
