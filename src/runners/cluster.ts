/**
 * cluster.* query runners (salt-cluster.md §9), answered from live state in the runner thread: the shared ring
 * buffer the Raft worker publishes (RingReader) and the worker's API (linearizable reads, status). Nothing is
 * replayed from files, so unlike Salt's runners these see what the master's gates see, and they name this
 * master by its stable node id whatever `id` and `interface` say (cluster-shapes.ts builds Salt's shapes).
 *
 * Reads are linearizable (ReadIndex through the leader). When no leader answers in time (an election, a
 * partition), a runner falls back to this master's own applied state and says so in the log: the operator
 * still gets an answer, as Salt's disk replay would give, and knows it may be stale.
 */
import { optionDefault } from "../shared/config/options.js";
import { isBrineError } from "../shared/errors.js";
import { getLogger } from "../shared/log.js";
import type { MembershipSnapshot } from "../workers/raft/state-machines/membership.js";
import type { RingRecord, RingRegistrySnapshot } from "../workers/raft/state-machines/ring-registry.js";
import type { RoutingSnapshot } from "../workers/raft/state-machines/routing.js";
import type { RingConfigSnapshot } from "../workers/raft/state-machines/ring-config.js";
import type { ClusterEntry } from "../workers/raft/state-machines/entries.js";
import { BrineError } from "../shared/errors.js";
import { SHED_BANKS, SHED_SUBBANK_TEMPLATE, readShedStatus, shedBanks, shedOwnership, writeShedStatus, type ShedArgs, type ShedResult } from "../lib/store/shed.js";
import { validateRingRef } from "../shared/cluster-names.js";
import { checkRingCreate, committed, isTrue, isUnset, parseRingName, parseRingSet, parseVoters, PLACED_DATA_TYPES, placementReport, proposalError, outboxReport, removalLosesData, removalLosesHandoff, routeWarning, type GroupHint, type PlacedRing } from "./cluster-ops.js";
import { CLUSTER_RING } from "../shared/sab-ring/layout.js";
import type { ProposeResult, ReadQuery } from "../workers/raft/api.js";
import { clusterMembers, clusterRingInfo, clusterRings, clusterRoutes, ringInfoFromState } from "./cluster-shapes.js";
import { argOf, type RunnerCluster, type RunnerContext, type RunnerFn } from "./context.js";
import { readHealth, unhealthyVoters } from "../shared/peer-health.js";
import path from "node:path";
import { migrateLocalCache } from "../lib/store/local-cache-import.js";
import { healthReport } from "./cluster-health.js";

/** A voter whose peer-channel session is down this long is listed in `unhealthy_voters`, ms. */
export const UNHEALTHY_AFTER_MS_DEFAULT = optionDefault("brine_cluster_unhealthy_after_ms") as number;

const log = getLogger("brine.runner.cluster");

/** What a query runner returns on a master without `cluster_id` (the shape of Salt's skipped cluster runners). */
export const NOT_CLUSTERED = Object.freeze({ status: "skipped", reason: "cluster_id is not set" });

/** Salt's ring_info() on a master that is not clustered: an empty ring. */
export const RING_INFO_NOT_CLUSTERED = Object.freeze({ is_clustered: false, node_count: 0, nodes: [] as string[], vnodes: 0 });

/** Skipped job directories logged one by one per migrate_jobs_to_cache call; the rest are only counted. */
const migrateSkipsLoggedMax = 20;

/** Codes after which a read falls back to this node's applied state. */
const NO_QUORUM = new Set(["RAFT_NO_LEADER", "RAFT_UNKNOWN"]);

async function readCluster<T>(c: RunnerCluster, query: ReadQuery): Promise<T> {
  try {
    return (await c.raft.read(CLUSTER_RING, query)).value as T;
  } catch (e) {
    if (!isBrineError(e) || !NO_QUORUM.has(e.code)) throw e;
    log.warning(`cluster ${query}: no leader confirmed the read (${e.message}); answering from this master's applied state`);
    return (await c.raft.read(CLUSTER_RING, query, { stale: true })).value as T;
  }
}

/**
 * A read of a named ring's group: here if this master hosts it, else forwarded by the Raft worker to a
 * founder (linearizable either way); without a leader, this master's applied state when it hosts the ring.
 */
async function readRing<T>(c: RunnerCluster, ring: string, query: ReadQuery): Promise<T> {
  try {
    return (await c.raft.read(ring, query)).value as T;
  } catch (e) {
    if (!isBrineError(e) || !NO_QUORUM.has(e.code)) throw e;
    log.warning(`cluster ring ${ring} ${query}: no leader confirmed the read (${e.message}); answering from this master's applied state`);
    return (await c.raft.read(ring, query, { stale: true })).value as T;
  }
}

/** What this master knows of `group` (leader, voters) for an error text; nothing if it does not host it. */
async function groupHint(c: RunnerCluster, group: string): Promise<GroupHint> {
  try {
    const g = (await c.raft.status()).groups.find((x) => x.group === group);
    return g ? { leaderId: g.leaderId, voters: g.voters } : {};
  } catch {
    return {};
  }
}

/** Proposes and waits for the commit (the Raft worker forwards to the group's leader, or to a ring's host). */
async function propose(c: RunnerCluster, group: string, entry: ClusterEntry): Promise<ProposeResult> {
  try {
    return await c.raft.propose(group, entry);
  } catch (e) {
    throw proposalError(e, group, await groupHint(c, group));
  }
}

/** The active rings that placed data types are routed to, with their policy and voters now (remove_member's check). */
async function placedRings(c: RunnerCluster): Promise<PlacedRing[]> {
  const [registry, routing] = await Promise.all([readCluster<RingRegistrySnapshot>(c, "registry"), readCluster<RoutingSnapshot>(c, "routing")]);
  const out: PlacedRing[] = [];
  for (const [dataType, ring] of Object.entries(routing.routes)) {
    const rec = ring === null ? undefined : registry.rings[ring];
    if (ring === null || rec?.status !== "active" || !PLACED_DATA_TYPES.includes(dataType)) continue;
    const [membership, policy] = await Promise.all([readRing<MembershipSnapshot>(c, ring, "membership"), readRing<RingConfigSnapshot>(c, ring, "ring_config")]);
    out.push({ dataType, ring, members: policy.members, replicas: policy.replicas, voters: membership.voters.length > 0 ? membership.voters : rec.founding_voters });
  }
  return out;
}

/** The registry record of active ring `name`, or CLUSTER_NO_SUCH_RING naming the rings there are. */
function activeRing(registry: RingRegistrySnapshot, name: string): RingRecord {
  const r = registry.rings[name];
  if (r?.status === "active") return r;
  const active = Object.keys(registry.rings).filter((id) => registry.rings[id]!.status === "active");
  throw new BrineError("CLUSTER_NO_SUCH_RING", `${name}${r ? " was destroyed" : " is not registered"} (active rings: ${active.join(", ") || "none"})`);
}

async function members(c: RunnerCluster, unhealthyAfterMs: number, ring: string): Promise<unknown> {
  const membership = ring === CLUSTER_RING ? await readCluster<MembershipSnapshot>(c, "membership") : await readRing<MembershipSnapshot>(c, ring, "membership");
  const g = (await c.raft.status()).groups.find((x) => x.group === ring);
  const health = c.health ? { unhealthyVoters: unhealthyVoters(readHealth(c.health), membership.voters, c.nodeId, unhealthyAfterMs), recentlyDemoted: [] } : undefined;
  return clusterMembers({ nodeId: c.nodeId, membership, ...(g ? { raft: { leaderId: g.leaderId, term: g.term } } : {}), ...(health ? { health } : {}) });
}

async function proposeRoute(c: RunnerCluster, data_type: string, ring_id: string | null): Promise<unknown> {
  const r = await propose(c, CLUSTER_RING, { kind: "ROUTE", value: { data_type, ring_id } });
  const warning = routeWarning(data_type, ring_id);
  if (warning) log.warning(`cluster.route_set: ${warning}`);
  return { ...committed(r, { data_type, ring_id }), ...(warning ? { warning } : {}) };
}

/** shed_unowned's arguments in Salt's order and names. */
function shedArgs(arg: unknown[], kwarg: Record<string, unknown>): ShedArgs {
  const ring = parseRingName(argOf(arg, kwarg, 0, "ring", null));
  const banksArg = argOf(arg, kwarg, 1, "banks", null);
  const banks = isUnset(banksArg) ? [...SHED_BANKS] : typeof banksArg === "string" ? banksArg.split(/[\s,]+/).filter((b) => b !== "") : banksArg;
  if (!Array.isArray(banks) || !banks.every((b) => typeof b === "string") || banks.length === 0) throw new BrineError("CLUSTER_BAD_ARGUMENT", "banks is a list of bank names");
  const template = argOf(arg, kwarg, 2, "subbank_template", SHED_SUBBANK_TEMPLATE);
  const driver = argOf(arg, kwarg, 3, "driver", null);
  const dry = argOf(arg, kwarg, 4, "dry_run", false);
  return {
    ring,
    banks: banks as string[],
    subbankTemplate: isUnset(template) ? null : String(template),
    driver: isUnset(driver) ? null : String(driver),
    dryRun: isTrue(dry),
  };
}

/** The shed on this master, decided from the ring's linearizable state and the shared ring's owners. */
async function shedHere(ctx: RunnerContext, c: RunnerCluster, a: ShedArgs): Promise<ShedResult> {
  if (!ctx.store) throw new BrineError("CLUSTER_BAD_ARGUMENT", "this runner has no job cache store");
  const registry = await readCluster<RingRegistrySnapshot>(c, "registry");
  const record = registry.rings[a.ring];
  const hosted = record?.status === "active" && record.founding_voters.includes(c.nodeId);
  const policy = hosted ? await readRing<RingConfigSnapshot>(c, a.ring, "ring_config") : { members: "self" as const, replicas: 1 };
  const ownership = shedOwnership({ ring: a.ring, self: c.nodeId, record, members: policy.members, owners: (key) => c.ring.replicas(key, policy.replicas, a.ring), tableReady: (c.ring.view(a.ring)?.nodes.length ?? 0) > 0 });
  return shedBanks(ctx.store, a, ownership, async (bank) => {
    const r = (await c.raft.minionQuery({ op: "shed", ring: a.ring, bank, dryRun: a.dryRun })).shed;
    if (!r) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "the Raft worker answered a shed without its result");
    return r;
  });
}

/** ring_info of a named ring: the shared buffer's view where this master hosts it, its group's state otherwise. */
async function ringInfo(c: RunnerCluster, ring: string): Promise<unknown> {
  const base = clusterRingInfo({ reader: c.ring, ring });
  if (ring === CLUSTER_RING) return base;
  const registry = await readCluster<RingRegistrySnapshot>(c, "registry");
  const rec = registry.rings[ring];
  if (rec?.status !== "active") return { ...base, status: rec ? "destroyed" : "missing" };
  const [membership, policy] = await Promise.all([readRing<MembershipSnapshot>(c, ring, "membership"), readRing<RingConfigSnapshot>(c, ring, "ring_config")]);
  return ringInfoFromState({ base, hosted: rec.founding_voters.includes(c.nodeId), founders: rec.founding_voters, membership, policy });
}

export const clusterRunners: Record<string, RunnerFn> = {
  /** health(): leader, term, commit index, each member's lag and link, learners, last state-sync (cluster-health.ts) */
  "cluster.health": async (ctx: RunnerContext) => (await healthReport(ctx)) ?? NOT_CLUSTERED,

  /** members([ring]): the cluster group's membership (Salt's), or a named ring group's with its leader. */
  "cluster.members": async (ctx: RunnerContext, arg, kwarg) => {
    if (!ctx.cluster) return NOT_CLUSTERED;
    const after = Number(ctx.cfg.brine_cluster_unhealthy_after_ms ?? UNHEALTHY_AFTER_MS_DEFAULT);
    const ring = argOf(arg, kwarg, 0, "ring", CLUSTER_RING);
    return members(ctx.cluster, Number.isFinite(after) ? after : UNHEALTHY_AFTER_MS_DEFAULT, isUnset(ring) ? CLUSTER_RING : validateRingRef(ring));
  },

  "cluster.rings": async (ctx: RunnerContext) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    return clusterRings({ nodeId: c.nodeId, registry: await readCluster<RingRegistrySnapshot>(c, "registry") });
  },

  /** routes([ring]): every route, or only the data types routed to `ring` (their drop_stats likewise). */
  "cluster.routes": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    const ring = argOf(arg, kwarg, 0, "ring", null);
    return clusterRoutes({ nodeId: c.nodeId, routing: await readCluster<RoutingSnapshot>(c, "routing"), reader: c.ring, ...(isUnset(ring) ? {} : { ring: validateRingRef(ring) }) });
  },

  /**
   * ring_create(name, voters): registers ring `name` with its voters (node ids, all masters of this cluster)
   * in the cluster log; each voter then runs the ring's own Raft group. A destroyed ring re-created resumes
   * from its group's files (its policy and membership come back).
   */
  "cluster.ring_create": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    const name = parseRingName(argOf(arg, kwarg, 0, "name", null));
    const voters = parseVoters(argOf(arg, kwarg, 1, "voters", null));
    const [membership, registry] = await Promise.all([readCluster<MembershipSnapshot>(c, "membership"), readCluster<RingRegistrySnapshot>(c, "registry")]);
    checkRingCreate(name, voters, membership, registry);
    const r = await propose(c, CLUSTER_RING, { kind: "RING_REGISTRY", value: { ring_id: name, founding_voters: voters } });
    return committed(r, { ring_id: name, founding_voters: voters, status: "active" });
  },

  /** ring_destroy(name): marks the ring destroyed; its voters stop its group and keep its files. */
  "cluster.ring_destroy": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    const name = parseRingName(argOf(arg, kwarg, 0, "name", null));
    const rec = activeRing(await readCluster<RingRegistrySnapshot>(c, "registry"), name);
    const r = await propose(c, CLUSTER_RING, { kind: "RING_REGISTRY", value: { ring_id: name, status: "destroyed" } });
    return committed(r, { ring_id: name, founding_voters: rec.founding_voters, status: "destroyed" });
  },

  /**
   * ring_set(name, members=None, replicas=None): a partial update of the ring's policy, committed in the
   * ring's own log (on any master: forwarded to a voter of the ring and from there to its leader). Returns
   * the whole policy as applied.
   */
  "cluster.ring_set": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    const name = parseRingName(argOf(arg, kwarg, 0, "name", null));
    const value = parseRingSet(argOf(arg, kwarg, 1, "members", null), argOf(arg, kwarg, 2, "replicas", null));
    activeRing(await readCluster<RingRegistrySnapshot>(c, "registry"), name);
    const r = await propose(c, name, { kind: "RING_CONFIG", value });
    const policy = await readRing<RingConfigSnapshot>(c, name, "ring_config");
    return committed(r, { ring_id: name, members: policy.members, replicas: policy.replicas, version: policy.version });
  },

  /**
   * route_set(data_type, ring=None) / route_clear(data_type): Salt's names, but the proposal is made through
   * the Raft worker and the runner returns once it committed (or fails with the coded reason: no leader within
   * the request deadline, e.g. on a master cut off from the majority), instead of Salt's "fan-out initiated".
   */
  "cluster.route_set": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    const data_type = String(argOf(arg, kwarg, 0, "data_type", ""));
    const ring = argOf(arg, kwarg, 1, "ring", null);
    return proposeRoute(c, data_type, ring === null || ring === "" || ring === "None" ? null : String(ring));
  },

  /**
   * remove_member(id, force=False): beyond Salt (where every master must restart): takes node `id` out of the cluster group
   * (a Raft configuration change: a follower forwards it to the leader; a voter only when at least
   * `cluster_min_voters` voters remain, Salt's floor for taking voters away, unless force=True),
   * then a tombstone of its peer key is committed, so every master forgets the key when it applies it (its
   * handshakes are refused until it is admitted again with cluster_secret). Returns the committed change.
   */
  "cluster.remove_member": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    const id = String(argOf(arg, kwarg, 0, "id", ""));
    if (id === "" || id === c.nodeId) throw new BrineError("CLUSTER_BAD_ARGUMENT", id === "" ? "remove_member needs id=<node id>" : "a master cannot remove itself; run remove_member on another member");
    const membership = await readCluster<MembershipSnapshot>(c, "membership");
    if (!membership.voters.includes(id) && !membership.learners.includes(id)) {
      throw new BrineError("CLUSTER_BAD_ARGUMENT", `${id} is not a member (voters: ${membership.voters.join(", ")}; learners: ${membership.learners.join(", ") || "none"})`);
    }
    // Salt's floor: a change that takes a voter away is refused when it leaves fewer than cluster_min_voters
    const minVoters = ctx.cfg.cluster_min_voters;
    const force = isTrue(argOf(arg, kwarg, 1, "force", false));
    if (membership.voters.includes(id) && membership.voters.length - 1 < minVoters) {
      if (!force) throw new BrineError("CLUSTER_BAD_ARGUMENT", `removing voter ${id} leaves ${membership.voters.length - 1} voter(s), fewer than cluster_min_voters (${minVoters}); add a master first, or pass force=True to remove it anyway`);
      log.warning(`cluster.remove_member: force=True: removing voter ${id} leaves ${membership.voters.length - 1} voter(s), fewer than cluster_min_voters (${minVoters})`);
    }
    // a voter of a ring whose placed data has one copy per key takes the copies only it holds with it; any master
    // takes the records of its hand-off outbox
    const rings = await placedRings(c);
    let loses = removalLosesData(id, rings);
    let outbox: ReturnType<typeof outboxReport> | undefined;
    if (rings.length > 0) {
      const held = (await c.raft.jobsHeld(1))[id];
      outbox = outboxReport(id, held);
      if (outbox.status === "unknown") log.warning(`cluster.remove_member: ${outbox.reason}`);
      if (!loses && held && !("error" in held)) loses = removalLosesHandoff(id, held.pending, held.outbox?.minions ?? 0);
    }
    if (loses) {
      if (!force) throw new BrineError("CLUSTER_BAD_ARGUMENT", loses);
      log.warning(`cluster.remove_member: force=True: ${loses}`);
    }
    let r: ProposeResult;
    try {
      r = await c.raft.changeMembership(CLUSTER_RING, { kind: "removeNode", node_id: id });
    } catch (e) {
      throw proposalError(e, CLUSTER_RING, await groupHint(c, CLUSTER_RING));
    }
    // then its key, as a tombstone in the log: every master forgets it when it applies the entry (join-host.ts)
    const k = await propose(c, CLUSTER_RING, { kind: "PEER_KEY", value: { id, pub: null } });
    log.warning(`cluster.remove_member: ${id} removed at index ${r.index}; its key forgotten at index ${k.index}`);
    if (outbox?.status === "lost") {
      log.warning(`cluster.remove_member: ${id} was removed holding ${outbox.job_records} job record(s) and ${outbox.minion_records} minion record(s) no owner has: lost with it unless its disk can still be read (cluster.recover_outbox path=<its brine_lmdb_dir> on a live master places them; at most 100 of each named: jobs ${outbox.jids.join(", ") || "-"}; minion records ${outbox.minion_records_named.join(", ") || "-"})`);
    }
    return committed(r, { removed: id, key_forgotten_at: k.index, ...(outbox ? { outbox } : {}) });
  },

  /**
   * readmit_member(id): beyond Salt: lets a master taken out with remove_member join again with cluster_secret
   * (until then the members refuse its joins as "removed", whatever secret it proves). Commits a re-admitted
   * tombstone of its key (PEER_KEY {pub: null, readmit: true}); its key arrives with its next join. Refused for
   * a current member (it was not removed).
   */
  "cluster.readmit_member": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    const id = String(argOf(arg, kwarg, 0, "id", ""));
    if (id === "" || id === c.nodeId) throw new BrineError("CLUSTER_BAD_ARGUMENT", id === "" ? "readmit_member needs id=<node id>" : "this master is a member");
    const membership = await readCluster<MembershipSnapshot>(c, "membership");
    if (membership.voters.includes(id) || membership.learners.includes(id)) throw new BrineError("CLUSTER_BAD_ARGUMENT", `${id} is a member (it was not removed)`);
    const k = await propose(c, CLUSTER_RING, { kind: "PEER_KEY", value: { id, pub: null, readmit: true } });
    log.warning(`cluster.readmit_member: ${id} may join again with cluster_secret (committed at index ${k.index})`);
    return committed(k, { readmitted: id });
  },

  "cluster.route_clear": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    return proposeRoute(c, String(argOf(arg, kwarg, 0, "data_type", "")), null);
  },

  /** ring_info([ring]): the ring as the shared buffer holds it now ("cluster" unless a ring name is given). */
  /**
   * placement_check(ring, limit=10000, data_type="jobs"): with data_type mine or grains, the same check of each
   * minion's mine or data record (keyed by minion id: `ids`, each violation's `id`; `limit` does not apply).
   * Jobs: asks every master which jobs it holds (its newest `limit` jids) and
   * compares with the owners ring `ring` gives each jid (the first `replicas` of its preference order under
   * policy "voters", every voter under "self"). Run it on a voter of the ring when its policy is "voters"
   * (only they hold its slot table).
   */
  "cluster.placement_check": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    const ring = parseRingName(argOf(arg, kwarg, 0, "ring", null));
    const limit = Number(argOf(arg, kwarg, 1, "limit", 10_000));
    if (!Number.isSafeInteger(limit) || limit < 1) throw new BrineError("CLUSTER_BAD_ARGUMENT", `limit is a positive integer, not ${String(limit)}`);
    const [registry, routing] = await Promise.all([readCluster<RingRegistrySnapshot>(c, "registry"), readCluster<RoutingSnapshot>(c, "routing")]);
    const rec = activeRing(registry, ring);
    const [membership, policy] = await Promise.all([readRing<MembershipSnapshot>(c, ring, "membership"), readRing<RingConfigSnapshot>(c, ring, "ring_config")]);
    const voters = [...membership.voters].sort();
    const dataType = String(argOf(arg, kwarg, 2, "data_type", "jobs"));
    if (dataType !== "jobs" && dataType !== "mine" && dataType !== "grains") throw new BrineError("CLUSTER_BAD_ARGUMENT", `data_type is jobs, mine or grains, not ${JSON.stringify(dataType)}`);
    const route = routing.routes[dataType] ?? null;
    // broadcast (the data type routed to no ring): every master of the cluster holds every item
    let everyMaster: string[] = [];
    if (route === null) {
      const cm = await readCluster<MembershipSnapshot>(c, "membership");
      everyMaster = [...new Set([...cm.voters, ...cm.learners])].sort();
    }
    if (route !== null && policy.members === "voters" && c.ring.view(ring) === null) {
      throw new BrineError("CLUSTER_BAD_ARGUMENT", `ring ${ring} shards over its voters: run placement_check on one of them (${rec.founding_voters.join(", ")}), which hold its slot table`);
    }
    const expected = route === null ? () => everyMaster : policy.members === "voters" ? (jid: string) => c.ring.replicas(jid, policy.replicas, ring) : () => voters;
    if (dataType === "mine" || dataType === "grains") {
      // a minion data bank: each master's ids (minion-placement.ts), compared with the owners of each id
      const a = await c.raft.minionQuery({ op: "held", bank: dataType === "mine" ? "mine" : "data" });
      const held = Object.fromEntries(Object.entries(a.held_by ?? {}).map(([n, h]) => [n, "error" in h ? h : { jids: h.ids, truncated: h.truncated, pending: h.pending, ...(h.gathering ? { gathering: true } : {}), ...(h.gathered_without ? { gathered_without: h.gathered_without } : {}) }]));
      const { jids, violations, ...rest } = placementReport({ ring, replicas: policy.replicas, members: policy.members, route, expected, held, dataType });
      return { ...rest, violations: violations.map(({ jid, ...v }) => ({ id: jid, ...v })), ids: jids };
    }
    const held = await c.raft.jobsHeld(limit);
    return placementReport({ ring, replicas: policy.replicas, members: policy.members, route, expected, held });
  },

  /**
   * shed_unowned(ring, banks=<the 4 jobs banks>, subbank_template="jobs/returns/{key}", driver=None,
   * dry_run=False): drops from this master's job cache what ring `ring` says it does not own (its policy and
   * replicas, unlike Salt), writes cachedir/cluster-shed-status.json (source "runner"), returns Salt's shape.
   */
  "cluster.shed_unowned": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    const a = shedArgs(arg, kwarg);
    const r = await shedHere(ctx, c, a);
    writeShedStatus(ctx.cfg.cachedir, r, "runner", c.nodeId);
    return r;
  },

  /**
   * shed_unowned_all(same arguments): sheds here and on every other master of the cluster (each writes its
   * own status file); beyond Salt's {fan_out, local}, the answer is every master's result by node id (a
   * master outside the ring: status "skipped"; one that could not be asked: status "error").
   */
  "cluster.shed_unowned_all": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return NOT_CLUSTERED;
    const a = shedArgs(arg, kwarg);
    const [local, peers] = await Promise.all([shedHere(ctx, c, a), c.raft.shedPeers(a)]);
    writeShedStatus(ctx.cfg.cachedir, local, "runner", c.nodeId);
    const all: Record<string, ShedResult> = { ...peers, [c.nodeId]: local };
    return Object.fromEntries(Object.keys(all).sort().map((id) => [id, all[id]!]));
  },

  /** shed_status(): this master's cachedir/cluster-shed-status.json, or {status: "missing", path}. */
  "cluster.shed_status": async (ctx: RunnerContext) => readShedStatus(ctx.cfg.cachedir),

  "cluster.ring_info": async (ctx: RunnerContext, arg, kwarg) => {
    const c = ctx.cluster;
    if (!c) return { ...RING_INFO_NOT_CLUSTERED, nodes: [] };
    const ring = argOf(arg, kwarg, 0, "ring", CLUSTER_RING);
    return ringInfo(c, isUnset(ring) ? CLUSTER_RING : validateRingRef(ring));
  },

  /**
   * migrate_jobs_to_cache(dry_run=False, jobs_root=<cachedir>/jobs): reads the job cache Salt's `local_cache`
   * returner wrote (a Python master's `<cachedir>/jobs/<h[:2]>/<h[2:]>/`) into this master's job cache
   * (src/lib/store/local-cache-import.ts), so `jobs.lookup_jid` and `jobs.list_jobs` answer for jobs the Python
   * master ran. By default it reads this master's own `cachedir/jobs`: the tree a Python master left in the
   * cachedir brine took over. brine writes files of that layout there too (`brine_salt_job_files`, the loads
   * of its own jobs, for Salt's CLI and salt-api); those jobs are already in the job cache and are counted as
   * skipped. `jobs_root=` reads another tree, e.g. `jobs_root=/var/cache/salt/master/jobs` of a Python master
   * that keeps running. Returns Salt's {status, scanned, migrated, skipped, returns_migrated, dry_run,
   * jobs_root} and, beyond Salt, returns_skipped and skipped_reasons. Malformed entries are skipped, counted
   * and logged; the tree is never changed. Works with or without `cluster_id`: migrated jobs stay on this
   * master (a peer's bulk sync pulls only recent jids).
   */
  "cluster.migrate_jobs_to_cache": async (ctx: RunnerContext, arg, kwarg) => {
    const dry = argOf(arg, kwarg, 0, "dry_run", false);
    const dryRun = isTrue(dry);
    const given = argOf(arg, kwarg, 1, "jobs_root", null);
    const root = typeof given === "string" && given !== "" ? path.resolve(given) : path.join(ctx.cfg.cachedir, "jobs");
    let logged = 0;
    const res = await migrateLocalCache(ctx.jobs, root, {
      dryRun,
      onSkip: (where, reason) => {
        if (logged++ < migrateSkipsLoggedMax) log.warning(`migrate_jobs_to_cache: skipped ${where}: ${reason}`);
      },
    });
    log.info(`migrate_jobs_to_cache${dryRun ? " (dry run)" : ""} of ${root}: ${res.scanned} scanned, ${res.migrated} migrated, ${res.skipped} skipped, ${res.returns_migrated} returns migrated`);
    return res;
  },
};
