/**
 * Placement of the minion data cache (grains and pillar, data type `grains`) and the mine (data type `mine`) on a
 * ring's owners: the decisions, sans I/O (the shell is src/workers/raft/minion-placement.ts).
 *
 * - **Owners.** A minion's record is keyed by its id: its owners are ownersOf(table, id) (src/shared/placement.ts),
 *   as a jid's are, in the table of the ring the record's data type is routed to.
 * - **The outbox.** The same outbox as the jobs' (`jobs/handoff`), with a kind of item of its own:
 *   `~d/<id>` (the minion's data record) and `~m/<id>` (its mine record). A jid starts with a digit, so these
 *   keys sort after every job key: the jobs' rounds read the outbox up to MINION_OUTBOX_PREFIX, the minions'
 *   from it.
 * - **Stamps.** Records carry their write's stamp (time, origin master); an owner keeps the newest (last writer
 *   wins, sync-records.ts), so two masters handing off the same minion converge.
 * - **Targeting across masters.** A target that needs cached data (grain, pillar, ipcidr, compound with those)
 *   is first evaluated on the asking master, noting the ids whose data it looked up and does not hold
 *   (`unknown`). Only those are sent, once per publish, to every other master, each of which evaluates the same
 *   target over the ones it holds data for and answers which of them match and which it holds. The answer
 *   (mergeTarget): an id this master holds data for keeps its local verdict; an unknown id held elsewhere
 *   matches when a holder says so; an unknown id no master holds keeps the local verdict (which is the
 *   no-data one: `greedy`).
 */
import { newerStamp, type DataRecord, type MineRecord, type Stamp } from "./sync-records.js";

/** The two banks a minion's cached data lives in: `data` ({grains, pillar}) and `mine`. */
export type MinionBank = "data" | "mine";

/** The outbox keys of minion records start with this; every job key (a jid) sorts before it. */
export const MINION_OUTBOX_PREFIX = "~";

const BANK_TAG: Record<MinionBank, string> = { data: "d", mine: "m" };

/** The routed data type that places a bank: `grains` places the data record (grains and pillar), `mine` the mine. */
export function dataTypeOf(bank: MinionBank): "grains" | "mine" {
  return bank === "data" ? "grains" : "mine";
}

/** The outbox key of `id`'s record in `bank`. */
export function minionOutboxKey(bank: MinionBank, id: string): string {
  return `${MINION_OUTBOX_PREFIX}${BANK_TAG[bank]}/${id}`;
}

/** The bank and id of a minion outbox key, undefined for any other key (a job's). */
export function parseMinionOutboxKey(key: string): { bank: MinionBank; id: string } | undefined {
  if (key.length < 4 || key[0] !== MINION_OUTBOX_PREFIX || key[2] !== "/") return undefined;
  const bank = key[1] === "d" ? "data" : key[1] === "m" ? "mine" : undefined;
  return bank ? { bank, id: key.slice(3) } : undefined;
}

export type MinionRecord = DataRecord | MineRecord;

/** The newest record of each id among every master's (last writer wins; a tombstone counts as a record). */
export function newestRecords(lists: readonly (readonly MinionRecord[])[]): Map<string, MinionRecord> {
  const out = new Map<string, MinionRecord>();
  for (const l of lists) for (const r of l) if (newerStamp(r, out.get(r.id))) out.set(r.id, r);
  return out;
}

/**
 * A target context that notes which ids' data it was asked for and does not hold: the first pass of a
 * cluster-wide target (the ids a glob or list target decides are never looked up, so `unknown` stays empty).
 */
export function notingUnknown<C extends { minionData(id: string): unknown }>(ctx: C): { ctx: C; unknown: Set<string> } {
  const unknown = new Set<string>();
  const minionData = (id: string) => {
    const d = ctx.minionData(id);
    if (d === undefined) unknown.add(id);
    return d;
  };
  return { unknown, ctx: { ...ctx, minionData } };
}

/** The other masters' answer to a target, merged: ids that match there, ids whose data is held there. */
export interface TargetAnswer {
  matched: readonly string[];
  held: readonly string[];
}

/**
 * The cluster-wide match set: `local` (the first pass's minions), corrected for the `unknown` ids with the
 * others' answers (see the header). Sorted as `order` sorts ids.
 */
export function mergeTarget(local: readonly string[], unknown: ReadonlySet<string>, answer: TargetAnswer, order: (a: string, b: string) => number): string[] {
  const held = new Set(answer.held);
  const out = new Set<string>();
  for (const id of local) if (!unknown.has(id) || !held.has(id)) out.add(id);
  for (const id of answer.matched) if (unknown.has(id)) out.add(id);
  return [...out].sort(order);
}

/** A target evaluated on the other masters over the ids they hold data for. */
export interface TargetQuery {
  tgt: string | string[];
  tgtType: string;
  delimiter: string;
  greedy: boolean;
  /** the asking master's `nodegroups` (for `N@` and nodegroup targets) */
  nodegroups: Record<string, unknown>;
  /** a minion's target: its patterns are evaluated in linear time or match nothing (src/lib/targeting/pcre.ts) */
  linear?: boolean;
  /** the ids to evaluate (those the asking master holds no data for) */
  ids: string[];
}

/** What a thread may ask its Raft worker about the cluster's minion data (api.ts `minionQuery`). */
export type MinionQuery =
  | { op: "records"; bank: MinionBank; ids: string[]; addrs?: boolean }
  | ({ op: "target" } & TargetQuery)
  | { op: "ids"; bank: MinionBank }
  | { op: "held"; bank: MinionBank }
  /**
   * cluster.collect_from_peers of a minion bank: pull from every other master the records this one lacks or holds
   * older. Starts the collection (or joins the bank's under way; with `id`, that one) and waits for it at most
   * `waitMs` (no bound when absent); MinionAnswer.collect says whether it is done.
   */
  | { op: "collect"; bank: MinionBank; id?: number; waitMs?: number }
  /** cluster.shed_unowned of a minion bank on this master (planMinionShed) */
  | { op: "shed"; ring: string; bank: MinionBank; dryRun: boolean };

/** What one pull from one master did (collect_from_peers' per-master report, as the state-sync thread's). */
export interface PullReport {
  items: number;
  bytes: number;
  errors: string[];
  ms: number;
  failed?: string[];
  /** the pull from this master goes on (what it gave so far is counted) */
  in_flight?: true;
}

/** A minion bank's shed on one master: Salt's counts, and what was kept as possibly the only copy. */
export interface MinionShedAnswer {
  status: "ok" | "skipped";
  dropped: number;
  kept: number;
  kept_sole_copy: number;
  reason?: string;
}

/** One master's ids in a bank (its first `idsAnswerMax`), and its records of the bank waiting in its outbox. */
export interface HeldIds {
  ids: string[];
  truncated: boolean;
  pending: number;
  /** the bank is back to broadcast and this master has not yet pulled every other master's records (mustGather) */
  gathering?: boolean;
  /** its last gather back to broadcast ended without these masters' records (another version), with why */
  gathered_without?: Record<string, string>;
}

export interface MinionAnswer {
  /** `records`: the newest record of each asked id any master holds (this master's included; tombstones too) */
  records?: MinionRecord[];
  /** `target`: ids that match on the master holding their data; `held`: ids some other master holds data for */
  matched?: string[];
  held?: string[];
  /** `ids`: every id with a record in the bank on some master (this one included), sorted */
  ids?: string[];
  /** `held` (cluster.placement_check): node id -> what it holds, or why it could not be asked (this master's included) */
  held_by?: Record<string, HeldIds | { error: string }>;
  /** `collect`: node id -> what the pull from it did */
  collected?: Record<string, PullReport>;
  /** `collect`: the collection's id (to ask again), whether it is done, and the peers' answers so far */
  collect?: { id: number; done: boolean; requests: number };
  /** `shed`: what this master dropped or kept */
  shed?: MinionShedAnswer;
  /** masters that could not be asked, with why */
  unreachable: Record<string, string>;
}

/**
 * A data record cut down to what presence matches connections against (grains `ipv4`, `ipv6`): a `records`
 * question with `addrs` is answered so (a few dozen bytes a minion instead of its whole grains and pillar).
 */
export function addressesOnly(v: Record<string, unknown> | null): Record<string, unknown> | null {
  if (v === null) return null;
  const g = typeof v.grains === "object" && v.grains !== null ? (v.grains as Record<string, unknown>) : {};
  const grains: Record<string, unknown> = {};
  if (g.ipv4 !== undefined) grains.ipv4 = g.ipv4;
  if (g.ipv6 !== undefined) grains.ipv6 = g.ipv6;
  return { grains };
}

// --- the way back to broadcast, collect_from_peers and shed_unowned of the minion banks -----------------------

/** Salt's cache bank names of the minion banks, as `collect_from_peers` and `shed_unowned` take them. */
export const MINION_BANK_NAMES: Readonly<Record<string, MinionBank>> = Object.freeze({ "minions/data": "data", "minions/mine": "mine" });

/** The `jobs/placed-by` key under which the table a bank's copies were placed by on `ring` is kept. */
export function placedByKey(bank: MinionBank, ring: string): string {
  return `${MINION_OUTBOX_PREFIX}${bank}/${ring}`;
}

/** The `jobs/placed-by` key of `bank` set while it is placed on any ring (never a ring's name: `~` cannot start one). */
export function placedMarkKey(bank: MinionBank): string {
  return placedByKey(bank, "~placed");
}

/** The prefix of every `jobs/placed-by` key of `bank` (one per ring it was placed on). */
export function placedByPrefix(bank: MinionBank): string {
  return `${MINION_OUTBOX_PREFIX}${bank}/`;
}

/**
 * Whether this master must gather `bank` from the others (the way back to broadcast): the bank's data type is
 * routed to no ring now, and this master's copies were placed on one (a `jobs/placed-by` key of the bank is
 * left): each master then holds only what it owned, and pulls what it lacks until it holds every record.
 */
export function mustGather(route: string | null, placedByKeys: readonly string[]): boolean {
  return route === null && placedByKeys.length > 0;
}

/** A record's stamp as a master lists it (`raft/minions` `stamps`): [id, time ms, origin master]. */
export type StampEntry = [id: string, t: number, o: string];

/** The ids whose record another master holds newer than this one's (or that this master lacks): what a pull fetches. */
export function wantedFrom(theirs: readonly StampEntry[], mine: (id: string) => Stamp | undefined): string[] {
  const out: string[] = [];
  for (const [id, t, o] of theirs) if (newerStamp({ t, o }, mine(id))) out.push(id);
  return out;
}

export interface MinionShedPlan {
  /** ids this master does not own and an owner holds at the same stamp or newer: dropped */
  drop: string[];
  /** ids this master owns */
  owned: number;
  /** ids this master does not own and no owner that answered holds as new as here: kept (never the only copy) */
  sole: string[];
}

/**
 * shed_unowned of a minion bank: a record this master does not own is dropped only when one of its owners holds
 * it at the same stamp or newer (a newer one there, a tombstone included, supersedes this copy); otherwise this
 * copy may be the only one, or the newest, and it stays. `held(owner, id)` is the stamp `owner` answered for
 * `id` (undefined: it has no record of it, or it could not be asked).
 */
export function planMinionShed(input: {
  ids: readonly string[];
  self: string;
  owners: (id: string) => readonly string[];
  mine: (id: string) => Stamp | undefined;
  held: (owner: string, id: string) => Stamp | undefined;
}): MinionShedPlan {
  const plan: MinionShedPlan = { drop: [], owned: 0, sole: [] };
  for (const id of input.ids) {
    const owners = input.owners(id);
    if (owners.length === 0 || owners.includes(input.self)) {
      plan.owned++;
      continue;
    }
    const here = input.mine(id);
    const covered = owners.some((o) => {
      const there = input.held(o, id);
      return there !== undefined && (here === undefined || !newerStamp(here, there));
    });
    (covered ? plan.drop : plan.sole).push(id);
  }
  return plan;
}

// --- when the placement tick may skip the store --------------------------------------------------------------

/**
 * How long after the routes of `mine` and `grains` last changed a tick still looks in the store with neither
 * routed: a thread that read the old route (placed) puts its outbox key in the same synchronous step, and lmdb-js
 * commits it within milliseconds; this waits for it with a wide margin, ms.
 */
export const idleSettleMs = 10_000;

/**
 * Whether the minion placement's tick may skip every look at the job store (sans I/O; the shell reports what it
 * sees). Neither bank routed, a look that found no minion key in the outbox and no mark that a bank was placed
 * (nothing to hand off, spread or gather), made idleSettleMs or more after the routes last changed: nothing can
 * put work there until a route changes (only a placed bank's writes fill the outbox, only a placement scan sets
 * the marks), so the tick does nothing until then. A route change, a master's start (its first tick), or a look
 * that found work ends the quiet.
 */
export class PlacementQuiet {
  private routes: string | undefined;
  private changedAt = 0;
  /** the time of the last look that found nothing to do, since the routes' last change */
  private emptyAt: number | undefined;

  constructor(private readonly settleMs = idleSettleMs) {}

  /** Called on every tick with the routes now (`grains`, `mine`; null: broadcast): true when the tick may skip the store. */
  quiet(grains: string | null, mine: string | null, now: number): boolean {
    const routes = `${grains ?? ""}\u0000${mine ?? ""}`;
    if (routes !== this.routes) {
      this.routes = routes;
      this.changedAt = now;
      this.emptyAt = undefined;
      return false;
    }
    if (grains !== null || mine !== null) return false;
    return this.emptyAt !== undefined && this.emptyAt - this.changedAt >= this.settleMs;
  }

  /** What a look at the store found at `now`: `empty` when no minion key waits in the outbox and no bank is marked placed. */
  looked(empty: boolean, now: number): void {
    this.emptyAt = empty ? now : undefined;
  }
}
