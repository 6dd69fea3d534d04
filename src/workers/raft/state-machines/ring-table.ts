/**
 * The slot table of one ring, derived from its Raft group's applied state and kept as part of that group's
 * state (so it is in the group snapshot). It exists because a good table depends on the previous one
 * (shared/sab-ring/assign.ts: fewest moves on every membership change): that history has to be replicated
 * state, identical on every master for the same log prefix, not something a thread remembers.
 *
 * What it tracks:
 * - the voter table: the assignment over the ring's voter list, updated by assignSlots(voters, previous)
 *   whenever that list changes, whatever the members policy (so a later switch back to "voters" continues
 *   from the same history on every master);
 * - members ("self" | "voters") and replicas, from the ring's policy;
 * - epoch: +1 each time what target() describes changes (policy, replicas, or the voter table while the
 *   policy is "voters"). Equal epochs on two masters therefore mean equal tables (for "voters" rings).
 */
import { BrineError, isBrineError } from "../../../shared/errors.js";
import {
  assignSlots,
  checkAssignment,
  emptyAssignment,
  type RingAssignment,
} from "../../../shared/sab-ring/assign.js";
import { ringSlots } from "../../../shared/sab-ring/layout.js";
import type { RingTarget } from "../../../shared/sab-ring/writer.js";
import type { RingMembers } from "./entries.js";
import { snapshotField, snapshotObject } from "./snapshot-check.js";

export interface RingTableSnapshot {
  nodes: string[];
  owners: Uint8Array;
  members: RingMembers;
  replicas: number;
  epoch: number;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export class RingTableState {
  private table: RingAssignment = emptyAssignment();
  private replicaCount = 1;
  private epochValue = 0;
  private selfTable: { self: string; assignment: RingAssignment } | undefined;

  constructor(private membersPolicy: RingMembers) {}

  /**
   * Re-derives from the group's state. Returns true when the published picture changed (epoch bumped).
   * `voters` may be in any order.
   */
  update(voters: readonly string[], members: RingMembers, replicas: number): boolean {
    const sorted = [...voters].sort();
    const nodesChanged = !sameList(sorted, this.table.nodes);
    if (nodesChanged) this.table = assignSlots(sorted, this.table);
    const changed =
      members !== this.membersPolicy || replicas !== this.replicaCount || (members === "voters" && nodesChanged);
    this.membersPolicy = members;
    this.replicaCount = replicas;
    if (changed) this.epochValue++;
    return changed;
  }

  /** What master `self` should publish for this ring. */
  target(self: string): RingTarget {
    return { assignment: this.membersPolicy === "self" ? this.selfAssignment(self) : this.table, epoch: this.epochValue, replicas: this.replicaCount };
  }

  /** The assignment over the ring's voters (whatever the policy). */
  voterTable(): RingAssignment {
    return this.table;
  }

  get members(): RingMembers {
    return this.membersPolicy;
  }

  get epoch(): number {
    return this.epochValue;
  }

  snapshot(): RingTableSnapshot {
    return {
      nodes: [...this.table.nodes],
      owners: Uint8Array.from(this.table.owners),
      members: this.membersPolicy,
      replicas: this.replicaCount,
      epoch: this.epochValue,
    };
  }

  restore(snapshot: unknown): void {
    const o = snapshotObject(snapshot, "ring table");
    const nodes = snapshotField(o, "nodes");
    const owners = snapshotField(o, "owners");
    const members = snapshotField(o, "members");
    const replicas = snapshotField(o, "replicas");
    const epoch = snapshotField(o, "epoch");
    if (!Array.isArray(nodes) || !nodes.every((n) => typeof n === "string")) throw new BrineError("CLUSTER_BAD_SNAPSHOT", "ring table nodes");
    if (!(owners instanceof Uint8Array) || owners.length !== ringSlots) throw new BrineError("CLUSTER_BAD_SNAPSHOT", "ring table owners");
    if (members !== "self" && members !== "voters") throw new BrineError("CLUSTER_BAD_SNAPSHOT", "ring table members");
    if (!Number.isSafeInteger(replicas) || (replicas as number) < 1) throw new BrineError("CLUSTER_BAD_SNAPSHOT", "ring table replicas");
    if (!Number.isSafeInteger(epoch) || (epoch as number) < 0) throw new BrineError("CLUSTER_BAD_SNAPSHOT", "ring table epoch");
    const table: RingAssignment = { nodes: [...(nodes as string[])], owners: Uint8Array.from(owners) };
    try {
      checkAssignment(table);
    } catch (e) {
      if (isBrineError(e)) throw new BrineError("CLUSTER_BAD_SNAPSHOT", `ring table: ${e.message}`);
      throw e;
    }
    this.table = table;
    this.membersPolicy = members;
    this.replicaCount = replicas as number;
    this.epochValue = epoch as number;
  }

  /** The one-node table of a "self" ring: `self` owns every slot. Cached, since self never changes. */
  private selfAssignment(self: string): RingAssignment {
    if (this.selfTable?.self !== self) this.selfTable = { self, assignment: { nodes: [self], owners: new Uint8Array(ringSlots) } };
    return this.selfTable.assignment;
  }
}
