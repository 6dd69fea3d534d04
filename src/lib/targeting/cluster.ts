/**
 * Targeting and minion data reads across masters, while `grains` (the data record: grains and pillar) or `mine`
 * is placed on a ring's owners (src/workers/raft/minion-placement.ts): no master holds every minion's data then.
 * Sans I/O: the question to the other masters is injected (`ask`: a request worker's goes through the main
 * thread, a runner's to its Raft worker).
 *
 * A target is evaluated here first; only when it looked up the data of ids this master does not hold (a grain,
 * pillar or ipcidr target, or a compound with one) are those ids sent, in one question, to every other master,
 * and the answers merged (src/shared/minion-placement.ts, mergeTarget). A glob, list or pcre target never asks.
 * A minion's target (`linear`: `_mine_get`) is evaluated with linear-time patterns there too (pcre.ts).
 */
import { compareIds } from "../../shared/protocol/ids.js";
import { mergeTarget, notingUnknown, type MinionAnswer, type MinionBank, type MinionQuery } from "../../shared/minion-placement.js";
import { checkMinions, type CheckMinionsOptions, type CheckMinionsResult, type TargetContext } from "./check-minions.js";

/** How this master reaches the others' minion data, and which banks are placed now. */
export interface ClusterMinions {
  ask: (q: MinionQuery) => Promise<MinionAnswer>;
  /** whether a bank is placed on a ring now (`data`: data type `grains` routed; `mine`: `mine` routed) */
  placed: (bank: MinionBank) => boolean;
  /** told when a question failed (this master's data answers alone) or some masters could not be asked */
  warn: (line: string) => void;
}

/**
 * checkMinions over the cluster's data: this master's evaluation, corrected for the ids whose data lives on other
 * masters. Without `cluster`, or with `grains` not placed, exactly checkMinions.
 */
export async function clusterCheckMinions(tgt: unknown, tgtType: string, ctx: TargetContext, opts: CheckMinionsOptions, cluster: ClusterMinions | undefined, linear = false): Promise<CheckMinionsResult> {
  if (!cluster || !cluster.placed("data")) return checkMinions(tgt, tgtType, ctx, opts);
  const noting = notingUnknown(ctx);
  const local = checkMinions(tgt, tgtType, noting.ctx, opts);
  if (noting.unknown.size === 0 || !(typeof tgt === "string" || (Array.isArray(tgt) && tgt.every((x) => typeof x === "string")))) return local;
  let a: MinionAnswer;
  try {
    a = await cluster.ask({ op: "target", tgt, tgtType, delimiter: opts.delimiter ?? ":", greedy: ctx.greedy !== false, nodegroups: (ctx.nodegroups ?? {}) as Record<string, unknown>, linear, ids: [...noting.unknown] });
  } catch (e) {
    cluster.warn(`target ${JSON.stringify(tgt).slice(0, 128)} (${tgtType}) evaluated on this master's data alone: the other masters could not be asked (${(e as Error).message})`);
    return local;
  }
  unreachable(cluster, "a target", a);
  return { minions: mergeTarget(local.minions, noting.unknown, { matched: a.matched ?? [], held: a.held ?? [] }, compareIds), missing: local.missing };
}

/**
 * The cached record of each of `ids` in `bank` as the cluster holds it (the newest copy; an id without one is
 * absent). Not placed: this master's (`local`). `addrs`: only the grains presence needs (addressesOnly).
 */
export async function clusterRecords(bank: MinionBank, ids: readonly string[], local: (id: string) => Record<string, unknown> | undefined, cluster: ClusterMinions | undefined, addrs = false): Promise<Map<string, Record<string, unknown>>> {
  const out = new Map<string, Record<string, unknown>>();
  const fromHere = () => {
    for (const id of ids) {
      const v = local(id);
      if (v !== undefined) out.set(id, v);
    }
    return out;
  };
  if (!cluster || !cluster.placed(bank) || ids.length === 0) return fromHere();
  let a: MinionAnswer;
  try {
    a = await cluster.ask({ op: "records", bank, ids: [...ids], ...(addrs ? { addrs } : {}) });
  } catch (e) {
    cluster.warn(`the ${bank === "data" ? "grains and pillar" : "mine data"} of ${ids.length} minion(s) read from this master alone: the other masters could not be asked (${(e as Error).message})`);
    return fromHere();
  }
  unreachable(cluster, `a ${bank} read`, a);
  for (const r of a.records ?? []) if (r.v !== null) out.set(r.id, r.v);
  return out;
}

/** Every id with a record in `bank` somewhere in the cluster (placed), or here (`local`), sorted. */
export async function clusterIds(bank: MinionBank, local: () => string[], cluster: ClusterMinions | undefined): Promise<string[]> {
  if (!cluster || !cluster.placed(bank)) return local();
  try {
    const a = await cluster.ask({ op: "ids", bank });
    unreachable(cluster, `a list of ${bank} ids`, a);
    return a.ids ?? [];
  } catch (e) {
    cluster.warn(`the ids with ${bank} records listed from this master alone: the other masters could not be asked (${(e as Error).message})`);
    return local();
  }
}

function unreachable(cluster: ClusterMinions, what: string, a: MinionAnswer): void {
  const down = Object.entries(a.unreachable ?? {});
  if (down.length > 0) cluster.warn(`${what}: ${down.length} master(s) could not be asked, answered from the others: ${down.map(([n, why]) => `${n} (${why})`).join(", ")}`);
}

/** how long a PlacedAddresses keeps the addresses it was told, ms */
export const addressesKeepMs = 10_000;
/** ids a PlacedAddresses keeps addresses of at most (the whole table is dropped past it), count */
export const addressesKeptMax = 200_000;

type Grains = Record<string, unknown> | undefined;

/**
 * The grains presence matches connections against (`ipv4`, `ipv6`: presence.ts, `brine_presence: connections`)
 * while `grains` is placed on a ring: a master holds the data of the minions it owns, but minions connected to it
 * may be any. The addresses of the ids it holds no data for are asked of the other masters in one question (only
 * those two grains travel: addressesOnly) and kept addressesKeepMs, so a request thread's presence pass and a
 * publish's "[Not connected]" look-up cost at most one question per ten seconds, not one per minion.
 */
export class PlacedAddresses {
  private kept = new Map<string, { g: Grains; at: number }>();

  constructor(
    private readonly local: (id: string) => Grains,
    private readonly cluster: () => ClusterMinions | undefined,
    private readonly now: () => number,
  ) {}

  /** A look-up of the grains of `ids` that presence may use: this master's data, else the cluster's addresses. */
  async lookup(ids: readonly string[]): Promise<(id: string) => Grains> {
    const local = this.local;
    const cluster = this.cluster();
    if (!cluster || !cluster.placed("data")) return local;
    const now = this.now();
    const ask = ids.filter((id) => local(id) === undefined && !(now - (this.kept.get(id)?.at ?? -Infinity) < addressesKeepMs));
    if (ask.length > 0) {
      const got = await clusterRecords("data", ask, () => undefined, cluster, true);
      if (this.kept.size + ask.length > addressesKeptMax) this.kept = new Map();
      for (const id of ask) this.kept.set(id, { g: got.get(id)?.grains as Grains, at: now });
    }
    return (id) => local(id) ?? this.kept.get(id)?.g;
  }
}
