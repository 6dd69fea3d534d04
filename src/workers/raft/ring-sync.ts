/**
 * Which rings this master publishes, and with which nodes: the rule from the issue, as pure functions of the
 * applied group states. The Raft worker calls ringTargets() and routeTargets() after every apply and hands
 * the results to RingWriter.sync() and RingWriter.publishRoutes(); both are level-triggered, so calling them
 * when nothing changed costs a comparison.
 *
 *   ring "cluster":  the cluster group's voters (learners are not owners: they do not hold the state yet);
 *   ring voters:     a ring's group follows the cluster's voters (ringVoterChange): a ring voter that is no longer
 *                    a voter of the cluster leaves the ring's group, a founder that is a cluster voter again
 *                    comes back; one change at a time, made by the ring's leader (GroupManager.followRingVoters)
 *   named ring X:    published only on masters that host it (X active in the registry and this master among
 *                    its founders, as in Salt: non-founders never host a ring);
 *                    its nodes are X's voters when X's policy is "voters" (its founders until X's first
 *                    CONFIG), or just this master when the policy is "self" (the default).
 */
import { CLUSTER_RING } from "../../shared/sab-ring/layout.js";
import type { RingTarget } from "../../shared/sab-ring/writer.js";
import type { ClusterGroupState, RingGroupState } from "./state-machines/groups.js";
import type { MembershipChange } from "./api.js";

/** The voters a named ring tracks: its group's voters once a CONFIG applied, its founders before that. */
export function namedRingVoters(
  membership: { readonly version: number; voters(): string[] },
  foundingVoters: readonly string[],
): string[] {
  return membership.version >= 0 ? membership.voters() : [...foundingVoters];
}

/** Named rings this master must host (run a group for, publish): active, with `self` among the founders. */
export function hostedRings(cluster: ClusterGroupState, self: string): string[] {
  return cluster.registry.activeRings().filter((id) => cluster.registry.get(id)!.founding_voters.includes(self));
}

/**
 * Every ring this master should publish, with its table, epoch and replicas. A hosted ring whose group the
 * worker has not started yet is left out (nothing applied for it yet, so nothing to publish).
 */
export function ringTargets(
  cluster: ClusterGroupState,
  ringGroups: ReadonlyMap<string, RingGroupState>,
  self: string,
): Map<string, RingTarget> {
  const out = new Map<string, RingTarget>([[CLUSTER_RING, cluster.ringTable.target(self)]]);
  for (const id of hostedRings(cluster, self)) {
    const group = ringGroups.get(id);
    if (group !== undefined) out.set(id, group.ringTable.target(self));
  }
  return out;
}

/** Node ids of every published ring (what ringTargets would publish), for diagnostics and tests. */
export function ringNodes(
  cluster: ClusterGroupState,
  ringGroups: ReadonlyMap<string, RingGroupState>,
  self: string,
): Map<string, readonly string[]> {
  return new Map([...ringTargets(cluster, ringGroups, self)].map(([id, t]) => [id, t.assignment.nodes]));
}

/** The routing table to publish. */
export function routeTargets(cluster: ClusterGroupState): Map<string, string | null> {
  return new Map(Object.entries(cluster.routing.routes()));
}

/**
 * The next membership change that makes a ring's voters follow the cluster's: first a ring voter that is not a
 * cluster voter (a master removed from the cluster) is removed, never the last one; then a founder that is a
 * cluster voter but not a ring voter (a removed master that joined again) is added. Undefined when they agree,
 * or when this node does not know the cluster's voters (none applied yet). `self` (the ring's leader, which
 * decides) is never removed.
 */
export function ringVoterChange(founders: readonly string[], clusterVoters: readonly string[], ringVoters: readonly string[], self: string): MembershipChange | undefined {
  if (clusterVoters.length === 0) return undefined;
  const cluster = new Set(clusterVoters);
  const ring = new Set(ringVoters);
  // the deciding leader never removes itself: once it stops (a removed master is stopped), another voter leads
  const gone = [...ringVoters].sort().find((v) => !cluster.has(v) && v !== self);
  if (gone !== undefined && ring.size > 1) return { kind: "removeNode", node_id: gone };
  const back = [...founders].sort().find((f) => cluster.has(f) && !ring.has(f));
  if (back !== undefined) return { kind: "addVoter", node_id: back };
  return undefined;
}
