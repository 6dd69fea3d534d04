/**
 * Return values of the cluster.* query runners, in Salt's shapes (salt-cluster.md §9, salt/runners/cluster.py),
 * built from live state: the shared ring buffer (RingReader) and snapshots of the applied state machines
 * handed over by the Raft worker. Nothing here replays log files, so unlike Salt (§1):
 * - ring_info reports the ring the gates actually use, in any thread;
 * - routes' drop_stats are the shared counters every thread increments, not the runner's own;
 * - node_id is the master's stable node id, whatever `id` and `interface` say (Salt took `id` first and came
 *   back empty when it differed from `interface`); a wildcard address is refused as a node id.
 * Pure functions: the runner wiring (threads, messages) lives elsewhere.
 */
import type { MembershipSnapshot } from "../workers/raft/state-machines/membership.js";
import { validateNodeId } from "../shared/cluster-names.js";
import type { RingRecord, RingRegistrySnapshot } from "../workers/raft/state-machines/ring-registry.js";
import type { RoutingSnapshot } from "../workers/raft/state-machines/routing.js";
import type { RingConfigSnapshot } from "../workers/raft/state-machines/ring-config.js";
import type { RingMembers } from "../workers/raft/state-machines/entries.js";
import { CLUSTER_RING, ringSlots } from "../shared/sab-ring/layout.js";
import type { DropStats, RingReader } from "../shared/sab-ring/reader.js";

export interface RaftStatus {
  /** the leader this node last heard from, null if none */
  leaderId: string | null;
  term: number;
}

export interface VoterHealth {
  unhealthyVoters: readonly string[];
  recentlyDemoted: readonly string[];
}

export interface ClusterMembers {
  node_id: string;
  voters: string[];
  learners: string[];
  membership_version: number;
  voter_count: number;
  learner_count: number;
  leader_id: string | null;
  term: number;
  unhealthy_voters: string[];
  recently_demoted: string[];
}

export interface ClusterRings {
  node_id: string;
  rings: Record<string, RingRecord>;
  active_rings: string[];
  registry_version: number;
}

export interface ClusterRoutes {
  node_id: string;
  routes: Record<string, string | null>;
  routing_version: number;
  drop_stats: DropStats;
  /** brine: the ring the routes were filtered by, when one was named */
  ring?: string;
}

export interface ClusterRingInfo {
  is_clustered: boolean;
  node_count: number;
  nodes: string[];
  /** Salt's formula token_count // node_count with slots as the tokens: slots per node, 0 when empty */
  vnodes: number;
  /** brine: slots per ring (the table size) */
  slots: number;
  /** brine: which ring this describes */
  ring: string;
  /** brine: the published epoch, -1 when the ring is not published on this master */
  epoch: number;
  /** brine: fingerprint of the slot table; equal epochs on two masters must show equal checksums */
  checksum: number | null;
  /** brine: the ring's default replica count */
  replicas: number;
}

/** cluster.members(): the applied membership of the cluster group. */
export function clusterMembers(input: {
  nodeId: string;
  membership: MembershipSnapshot;
  raft?: RaftStatus;
  health?: VoterHealth;
}): ClusterMembers {
  const voters = [...input.membership.voters].sort();
  const learners = [...input.membership.learners].sort();
  return {
    node_id: validateNodeId(input.nodeId),
    voters,
    learners,
    membership_version: input.membership.version,
    voter_count: voters.length,
    learner_count: learners.length,
    leader_id: input.raft?.leaderId ?? null,
    term: input.raft?.term ?? 0,
    unhealthy_voters: [...(input.health?.unhealthyVoters ?? [])],
    recently_demoted: [...(input.health?.recentlyDemoted ?? [])],
  };
}

/** cluster.rings(): the ring registry. */
export function clusterRings(input: { nodeId: string; registry: RingRegistrySnapshot }): ClusterRings {
  const rings: Record<string, RingRecord> = {};
  for (const id of Object.keys(input.registry.rings).sort()) {
    const r = input.registry.rings[id]!;
    rings[id] = { founding_voters: [...r.founding_voters].sort(), status: r.status };
  }
  return {
    node_id: validateNodeId(input.nodeId),
    rings,
    active_rings: Object.keys(rings).filter((id) => rings[id]!.status === "active"),
    registry_version: input.registry.version,
  };
}

/**
 * cluster.routes([ring]): the routing table plus the live, cross-thread drop counters; with `ring`, only the
 * data types routed to that ring, and their counters.
 */
export function clusterRoutes(input: { nodeId: string; routing: RoutingSnapshot; reader: RingReader; ring?: string }): ClusterRoutes {
  const routes: Record<string, string | null> = {};
  for (const dt of Object.keys(input.routing.routes).sort()) {
    const to = input.routing.routes[dt] ?? null;
    if (input.ring === undefined || to === input.ring) routes[dt] = to;
  }
  const all = input.reader.dropStats();
  const drop_stats: DropStats = {};
  for (const dt of Object.keys(all)) if (input.ring === undefined || dt in routes) drop_stats[dt] = all[dt]!;
  return {
    node_id: validateNodeId(input.nodeId),
    routes,
    routing_version: input.routing.version,
    drop_stats,
    ...(input.ring !== undefined ? { ring: input.ring } : {}),
  };
}

/** cluster.ring_info(): one ring as the shared buffer holds it right now (ring "cluster" by default). */
export function clusterRingInfo(input: { reader: RingReader; ring?: string }): ClusterRingInfo {
  const ring = input.ring ?? CLUSTER_RING;
  const view = input.reader.view(ring);
  const nodes = view === null ? [] : [...view.nodes].sort();
  return {
    is_clustered: nodes.length > 0,
    node_count: nodes.length,
    nodes,
    vnodes: nodes.length === 0 ? 0 : Math.floor(ringSlots / nodes.length),
    slots: ringSlots,
    ring,
    epoch: view?.epoch ?? -1,
    checksum: view?.checksum ?? null,
    replicas: view?.replicas ?? 1,
  };
}

/** ring_info of a named ring, with what its own group says (brine's keys after Salt's four). */
export interface NamedRingInfo extends ClusterRingInfo {
  status: "active";
  /** this master runs the ring's group and publishes its table (it is a founder) */
  hosted: boolean;
  founding_voters: string[];
  /** the ring group's voters */
  voters: string[];
  /** the ring's policy: "self" (every host owns every key) or "voters" (keys shard across the voters) */
  members: RingMembers;
  /** the index of the ring's last applied RING_CONFIG, -1 before the first */
  config_version: number;
}

/**
 * cluster.ring_info(ring) for a named active ring: the shared buffer's view (`base`) where this master hosts
 * it; elsewhere the nodes its hosts publish under policy "voters" (under "self" each host holds only itself,
 * so there is no common node list: nodes is empty), with epoch -1 (no table here). The replicas are the
 * policy's in both cases.
 */
export function ringInfoFromState(input: {
  base: ClusterRingInfo;
  hosted: boolean;
  founders: readonly string[];
  membership: MembershipSnapshot;
  policy: RingConfigSnapshot;
}): NamedRingInfo {
  const voters = [...input.membership.voters].sort();
  const extra = {
    status: "active" as const,
    hosted: input.hosted,
    founding_voters: [...input.founders].sort(),
    voters,
    members: input.policy.members,
    config_version: input.policy.version,
  };
  if (input.hosted) return { ...input.base, replicas: input.policy.replicas, ...extra };
  const nodes = input.policy.members === "voters" ? voters : [];
  return {
    ...input.base,
    is_clustered: nodes.length > 0,
    node_count: nodes.length,
    nodes,
    vnodes: nodes.length === 0 ? 0 : Math.floor(ringSlots / nodes.length),
    epoch: -1,
    checksum: null,
    replicas: input.policy.replicas,
    ...extra,
  };
}
