/**
 * The pure half of the ring-operating runners (cluster.ts does the I/O): their arguments as Salt's runners
 * take them, the checks made before anything is proposed, the committed result every proposing runner
 * returns, and the coded errors an operator reads when a change cannot be made.
 *
 * Result of every proposing runner (beyond Salt, whose runners fire an event and return "fan-out initiated"):
 *   {status: "committed", group, index, term, applied: "applied", data: <the new route, registry record or
 *    ring policy, as applied>}
 * A change that committed but that the state machines refused (e.g. re-founding an active ring with other
 * founders, a limit) is an error naming the index it committed at, never a silent "committed".
 */
import { BrineError, isBrineError } from "../shared/errors.js";
import { clusterLimits } from "../shared/cluster-limits.js";
import { validateNamedRingId, validateNodeList } from "../shared/cluster-names.js";
import type { ProposeResult } from "../workers/raft/api.js";
import type { RingConfigValue, RingMembers } from "../workers/raft/state-machines/entries.js";
import type { MembershipSnapshot } from "../workers/raft/state-machines/membership.js";
import type { RingRegistrySnapshot } from "../workers/raft/state-machines/ring-registry.js";

export interface Committed<T> {
  status: "committed";
  group: string;
  index: number;
  term: number;
  applied: ProposeResult["applied"];
  data: T;
}

/** Salt's "None" as a CLI argument or a YAML null: the argument was not given. */
/** A runner flag as the CLI gives it: True (YAML), or "true"/"yes"/"1" in any case. */
export function isTrue(v: unknown): boolean {
  return v === true || (typeof v === "string" && /^(true|yes|1)$/i.test(v));
}

export function isUnset(v: unknown): boolean {
  return v === undefined || v === null || v === "" || v === "None" || v === "none" || v === "null";
}

/**
 * ring_create's voters, named by node id: a list, or the CLI's "m1,m2,m3" (commas and/or spaces). Sorted,
 * de-duplicated-or-refused as the registry stores them; empty is refused, as Salt raises ValueError.
 */
export function parseVoters(v: unknown): string[] {
  let list: unknown = v;
  if (typeof v === "string") list = v.split(/[\s,]+/).filter((x) => x !== "");
  if (isUnset(v) || (Array.isArray(list) && list.length === 0)) throw new BrineError("CLUSTER_BAD_ARGUMENT", "voters is empty: name the ring's voters by node id");
  if (!Array.isArray(list)) throw new BrineError("CLUSTER_BAD_ARGUMENT", "voters is a list of node ids");
  return validateNodeList(list.map((x) => (typeof x === "number" ? String(x) : x)), "voters", clusterLimits.votersMax);
}

/** A ring name a runner may create, destroy or set ("cluster" is reserved); empty is refused, as in Salt. */
export function parseRingName(v: unknown): string {
  if (isUnset(v)) throw new BrineError("CLUSTER_BAD_ARGUMENT", "name is empty: name the ring");
  return validateNamedRingId(v);
}

/**
 * What ring_create may propose, checked against the cluster's applied state: every voter a member of the
 * cluster (a master outside it could never run the ring's group), and no active ring of that name with other
 * founders (the registry would refuse it; destroy it first).
 */
export function checkRingCreate(name: string, voters: readonly string[], membership: MembershipSnapshot, registry: RingRegistrySnapshot): void {
  const members = new Set([...membership.voters, ...membership.learners]);
  const outside = voters.filter((v) => !members.has(v));
  if (outside.length > 0) {
    throw new BrineError("CLUSTER_BAD_ARGUMENT", `${outside.join(", ")} ${outside.length === 1 ? "is not a master" : "are not masters"} of this cluster (members: ${[...members].sort().join(", ")})`);
  }
  const r = registry.rings[name];
  if (r?.status === "active" && r.founding_voters.join("\n") !== [...voters].sort().join("\n")) {
    throw new BrineError("CLUSTER_RING_CONFLICT", `ring ${name} is active with voters ${r.founding_voters.join(", ")}; destroy it before re-creating it with others`);
  }
}

/** ring_set's partial update: members "self" | "voters" and/or replicas 1..replicasMax; at least one of them. */
export function parseRingSet(members: unknown, replicas: unknown): RingConfigValue {
  const out: { members?: RingMembers; replicas?: number } = {};
  if (!isUnset(members)) {
    if (members !== "self" && members !== "voters") throw new BrineError("CLUSTER_BAD_ARGUMENT", `members is "self" or "voters", not ${JSON.stringify(members)}`);
    out.members = members;
  }
  if (!isUnset(replicas)) {
    const n = typeof replicas === "string" && /^\d+$/.test(replicas) ? Number(replicas) : replicas;
    if (typeof n !== "number" || !Number.isSafeInteger(n) || n < 1 || n > clusterLimits.replicasMax) {
      throw new BrineError("CLUSTER_BAD_ARGUMENT", `replicas is an integer from 1 to ${clusterLimits.replicasMax}, not ${JSON.stringify(replicas)}`);
    }
    out.replicas = n;
  }
  if (out.members === undefined && out.replicas === undefined) throw new BrineError("CLUSTER_BAD_ARGUMENT", "ring_set needs members and/or replicas");
  return out;
}

/** The data types brine stores on a ring's owners when routed (`route_set`); the others stay on every master. */
export const PLACED_DATA_TYPES: readonly string[] = ["jobs", "mine", "grains"];

/**
 * What `route_set` says beside its commit when the route governs nothing in brine: a data type other than
 * PLACED_DATA_TYPES routed to a ring is recorded (as Salt records any route) but its data stays on every master.
 */
export function routeWarning(dataType: string, ring: string | null): string | undefined {
  if (ring === null || PLACED_DATA_TYPES.includes(dataType)) return undefined;
  return `data type ${JSON.stringify(dataType)} is routed to ring ${ring}, but brine places only ${PLACED_DATA_TYPES.join(", ")} on a ring's owners: ${dataType} stays on every master (broadcast)`;
}

/** A ring that holds placed data, as remove_member's check sees it. */
export interface PlacedRing {
  dataType: string;
  ring: string;
  members: "self" | "voters";
  replicas: number;
  /** the ring group's voters now */
  voters: readonly string[];
}

/**
 * remove_member's check: why taking `node` out of the cluster would lose the only copies of placed data, or
 * undefined. A removed master never serves its job cache again (its key is forgotten at once, so it cannot hand
 * anything on, up or down), so a voter of a ring whose keys each live on one master (`voters` with replicas 1, or
 * a ring with that voter alone) takes the jobs only it owns with it. With two copies or more, the other owner of
 * each key keeps it, and the ring's table then gives each key a new second owner (rebalancing).
 */
export function removalLosesData(node: string, rings: readonly PlacedRing[]): string | undefined {
  for (const r of rings) {
    if (!r.voters.includes(node) || !PLACED_DATA_TYPES.includes(r.dataType)) continue;
    const copies = r.members === "self" ? r.voters.length : Math.min(r.replicas, r.voters.length);
    if (copies >= 2) continue;
    const loses = `removing it loses the ${r.dataType} only it holds (a removed master hands nothing on)`;
    if (r.voters.length === 1) {
      return `${node} is the only voter of ring ${r.ring}, which ${r.dataType} are routed to: ${loses}. Route ${r.dataType} back to every master first (cluster.route_clear ${r.dataType}, then cluster.collect_from_peers on the others), or pass force=True to remove it anyway`;
    }
    return `${node} is a voter of ring ${r.ring}, where each key of ${r.dataType} has one owner (members: ${r.members}, replicas: ${r.replicas}): ${loses}. Give each key a second copy first (cluster.ring_set ${r.ring} replicas=2), wait until cluster.placement_check ${r.ring}${r.dataType === "jobs" ? "" : ` data_type=${r.dataType}`} is ok, then remove it; or pass force=True to remove it anyway`;
  }
  return undefined;
}

/**
 * remove_member's second check, with jobs placed on a ring: why removing `node` would lose records still in its
 * hand-off outbox (returns it took that no owner acknowledged yet: `pending`, from its answer to
 * placement_check's question), or undefined. A master that could not be asked (down) is not refused: removing a
 * dead master is what remove_member is for; the caller logs that its outbox, if any, is lost.
 */
export function removalLosesHandoff(node: string, pending: number | undefined, minionPending = 0): string | undefined {
  if ((pending === undefined || pending === 0) && minionPending === 0) return undefined;
  const what = [pending ? `${pending} job record(s)` : "", minionPending ? `${minionPending} minion record(s) (mine, grains)` : ""].filter(Boolean).join(" and ");
  return `${node} holds ${what} in its hand-off outbox that their owners do not have yet: removing it now loses them (a removed master hands nothing on). Wait until cluster.placement_check shows its handoff_pending at 0${minionPending ? " (data_type=mine and grains too)" : ""}, then remove it; or pass force=True to remove it anyway`;
}

/** One master's answer about its hand-off outbox (held-jobs.ts HeldJobs), as remove_member reads it. */
export type OutboxAnswer = { pending?: number; outbox?: { minions: number; jids: string[]; ids: string[] } } | { error: string };

/**
 * What remove_member's answer says of the removed master's hand-off outbox (`data.outbox`): `empty`; `lost` with
 * the counts and the first jids and minion records by name (a forced removal of a master that still held some:
 * they are gone with it, the master that took them being the only one that had them); or `unknown` with why (the
 * master could not be asked: a dead master is removed all the same, and whatever its outbox held is lost with it).
 */
export function outboxReport(node: string, a: OutboxAnswer | undefined): { status: "empty" } | { status: "lost"; job_records: number; jids: string[]; minion_records: number; minion_records_named: string[] } | { status: "unknown"; reason: string } {
  if (a === undefined) return { status: "unknown", reason: `${node} did not answer` };
  if ("error" in a) return { status: "unknown", reason: `${node} could not be asked (${a.error}): the records of its hand-off outbox, if any, are lost with it, unless its disk can still be read (cluster.recover_outbox path=<its brine_lmdb_dir>)` };
  const jobs = a.pending ?? 0;
  const minions = a.outbox?.minions ?? 0;
  if (jobs === 0 && minions === 0) return { status: "empty" };
  return { status: "lost", job_records: jobs, jids: a.outbox?.jids ?? [], minion_records: minions, minion_records_named: a.outbox?.ids ?? [] };
}

/** The committed result, or CLUSTER_NOT_COMMITTED when the state machines refused the committed entry. */
export function committed<T>(r: ProposeResult, data: T): Committed<T> {
  if (r.applied === "refused") {
    const why = r.refusal ? `${r.refusal.code}: ${r.refusal.message}` : "refused";
    throw new BrineError("CLUSTER_NOT_COMMITTED", `group ${r.group} committed the entry at index ${r.index} (term ${r.term}) but refused it: ${why}`);
  }
  return { status: "committed", group: r.group, index: r.index, term: r.term, applied: r.applied, data };
}

/** What this master knows of a group when a proposal to it failed, for the error text. */
export interface GroupHint {
  /** the leader this master knows, null if none, undefined if it does not host the group */
  leaderId?: string | null;
  voters?: readonly string[];
}

/**
 * A failed proposal as the error an operator can act on: no leader (no quorum reachable), timeout (the
 * outcome is unknown: check before retrying), not hosted anywhere reachable. Other errors pass unchanged.
 */
export function proposalError(e: unknown, group: string, hint: GroupHint = {}): unknown {
  if (!isBrineError(e)) return e;
  const voters = hint.voters && hint.voters.length > 0 ? ` (voters: ${hint.voters.join(", ")})` : "";
  const leader = hint.leaderId ? `; the leader this master last knew is ${hint.leaderId}` : hint.leaderId === null ? "; this master knows no leader" : "";
  switch (e.code) {
    case "RAFT_NO_LEADER":
      return withMessage(e, `no quorum: group ${group} has no leader reachable from this master within the deadline${voters}${leader}; nothing was changed (${e.message})`);
    case "RAFT_UNKNOWN":
      return withMessage(e, `timeout: no answer from group ${group} in time${voters}${leader}; the change may or may not have committed, check with cluster.rings / cluster.routes / cluster.ring_info before retrying (${e.message})`);
    case "RAFT_NOT_VOTER":
      return withMessage(e, `not the leader: this master cannot lead group ${group}${leader} (${e.message})`);
    default:
      return e;
  }
}

function withMessage(e: BrineError, message: string): BrineError {
  const out = new BrineError(e.code);
  out.message = message;
  return out;
}

/** One jid held by other masters than the ring says. */
export interface PlacementViolation {
  jid: string;
  /** the masters that should hold it: the first `replicas` of its preference order (policy "voters"), or every voter (policy "self") */
  expected: string[];
  holders: string[];
  /** expected but not holding it */
  missing: string[];
  /** holding it but not expected */
  extra: string[];
}

/** cluster.placement_check(ring): Salt has no such runner; the shape is issue 16's. */
export interface PlacementReport {
  ring: string;
  replicas: number;
  members: RingMembers;
  /** what was checked: jobs (keyed by jid), or a minion data bank (`mine`, `grains`: keyed by minion id) */
  data_type: "jobs" | "mine" | "grains";
  /** where the data type is routed now (null: broadcast) */
  route: string | null;
  /** distinct jids seen on all masters that answered */
  checked: number;
  /** no violation, and every master answered in full */
  ok: boolean;
  violations: PlacementViolation[];
  /** jid -> node ids holding it */
  jids: Record<string, string[]>;
  /** masters that could not be asked, with why */
  unreachable: Record<string, string>;
  /** masters whose job cache held more than `limit` jids (they sent only their newest) */
  truncated: string[];
  /** node id -> job records in its hand-off outbox, not yet on every owner (absent: the master did not say) */
  handoff_pending: Record<string, number>;
  /** node id -> the job placement requests (`raft/placement`: store, read, list, table) it answered since its start */
  placement_requests_served: Record<string, Record<string, number>>;
  /** with truncated answers: the oldest jid compared (every master's answer covers the jids from here on) */
  horizon?: string;
  /** a minion bank back to broadcast: masters that have not yet pulled every other master's records */
  gathering?: string[];
  /** a minion bank back to broadcast: node id -> the masters its gather ended without (another version), with why */
  gathered_without?: Record<string, Record<string, string>>;
  note?: string;
}

/** What a report's holders mean while records wait in a master's hand-off outbox. */
export const PLACEMENT_NOTE =
  "with jobs routed to the ring, each job is stored on its owners; the master a job or return landed on keeps its copy until every owner has it (handoff_pending counts what waits), so right after traffic it shows up as an extra holder";

/** The same for a minion data bank. */
export const MINION_PLACEMENT_NOTE =
  "with the data type routed to the ring, each minion's record is stored on the owners of its id; the master it was written on keeps it until every owner has it (handoff_pending counts what waits)";

/**
 * Compares where each jid is held (`held`: node id -> its jids, or why it could not be asked) with where the
 * ring says it belongs (`expected(jid)`). Pure.
 */
export function placementReport(input: {
  ring: string;
  replicas: number;
  members: RingMembers;
  route: string | null;
  expected: (jid: string) => string[];
  held: Record<string, { jids: string[]; truncated: boolean; pending?: number; served?: Record<string, number>; gathering?: boolean; gathered_without?: Record<string, string> } | { error: string }>;
  /** jobs unless said (the keys of a minion data bank are minion ids, compared alike) */
  dataType?: "jobs" | "mine" | "grains";
}): PlacementReport {
  const dataType = input.dataType ?? "jobs";
  const pending: Record<string, number> = {};
  const served: Record<string, Record<string, number>> = {};
  const gathering: string[] = [];
  const without: Record<string, Record<string, string>> = {};
  for (const [node, a] of Object.entries(input.held)) {
    if ("error" in a) continue;
    if (a.pending !== undefined) pending[node] = a.pending;
    if (a.served !== undefined) served[node] = a.served;
    if (a.gathering) gathering.push(node);
    if (a.gathered_without) without[node] = a.gathered_without;
  }
  gathering.sort();
  const holders = new Map<string, string[]>();
  const unreachable: Record<string, string> = {};
  const truncated: string[] = [];
  // a truncated answer holds a master's newest jids only: compare just the jids every answer covers
  let horizon: string | undefined;
  for (const a of Object.values(input.held)) {
    if ("error" in a || !a.truncated || a.jids.length === 0) continue;
    const oldest = a.jids.reduce((x, y) => (y < x ? y : x));
    if (horizon === undefined || oldest > horizon) horizon = oldest;
  }
  for (const node of Object.keys(input.held).sort()) {
    const a = input.held[node]!;
    if ("error" in a) {
      unreachable[node] = a.error;
      continue;
    }
    if (a.truncated) truncated.push(node);
    for (const jid of a.jids) {
      if (horizon !== undefined && jid < horizon) continue;
      let h = holders.get(jid);
      if (!h) holders.set(jid, (h = []));
      h.push(node);
    }
  }
  const jids: Record<string, string[]> = {};
  const violations: PlacementViolation[] = [];
  for (const jid of [...holders.keys()].sort()) {
    const h = holders.get(jid)!;
    jids[jid] = h;
    const expected = [...input.expected(jid)].sort();
    const missing = expected.filter((n) => !h.includes(n) && !(n in unreachable));
    const extra = h.filter((n) => !expected.includes(n));
    if (missing.length > 0 || extra.length > 0) violations.push({ jid, expected, holders: h, missing, extra });
  }
  const report: PlacementReport = {
    ring: input.ring,
    replicas: input.replicas,
    members: input.members,
    data_type: dataType,
    route: input.route,
    checked: holders.size,
    ok: violations.length === 0 && Object.keys(unreachable).length === 0 && truncated.length === 0 && gathering.length === 0,
    violations,
    jids,
    unreachable,
    truncated,
    handoff_pending: pending,
    placement_requests_served: served,
    ...(horizon !== undefined ? { horizon } : {}),
    ...(gathering.length > 0 ? { gathering } : {}),
    ...(Object.keys(without).length > 0 ? { gathered_without: without } : {}),
  };
  const notes = input.route === input.ring ? [dataType === "jobs" ? PLACEMENT_NOTE : MINION_PLACEMENT_NOTE] : [];
  if (input.route === null) notes.push(`${dataType} is routed to no ring (broadcast): every master is expected to hold every item${dataType === "jobs" ? " (after route_clear, cluster.collect_from_peers on each master makes it whole)" : " (after route_clear each master pulls what it lacks by itself: gathering names those not done yet)"}`);
  else if (input.route !== input.ring) notes.push(`${dataType} is routed to ring ${input.route}, not to ${input.ring}: its items are placed on that ring's owners`);
  report.note = notes.join("; ");
  return report;
}
