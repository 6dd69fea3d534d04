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
import { newerStamp, type DataRecord, type MineRecord } from "./sync-records.js";

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
export type MinionQuery = { op: "records"; bank: MinionBank; ids: string[]; addrs?: boolean } | ({ op: "target" } & TargetQuery) | { op: "ids"; bank: MinionBank } | { op: "held"; bank: MinionBank };

/** One master's ids in a bank (its first `idsAnswerMax`), and its records of the bank waiting in its outbox. */
export interface HeldIds {
  ids: string[];
  truncated: boolean;
  pending: number;
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
