/**
 * cache.* runners over the minion data cache (Salt's salt/runners/cache.py through MasterPillarUtil): the
 * cached grains, pillar and mine of the targeted minions, and clearing them.
 *
 * A clear is an ordinary write of the minion data cache (grains and pillar share one record, as Salt's
 * `data.p`; the mine is its own): clustered, the runner thread's MinionCache stamps it and the records go to
 * the peers through the main thread exactly as a request worker's `_pillar` write does (runner-thread.ts,
 * cache-sync/outbox.ts), so a cleared pillar is cleared on every master and stays cleared (a tombstone).
 *
 * With `grains` (the data record) or `mine` placed on a ring (src/workers/raft/minion-placement.ts), targets and
 * reads see every master's data (src/lib/targeting/cluster.ts, through the runner's Raft worker) and a clear is
 * written here as a tombstone that the hand-off gives to the minion's owners.
 */
import { validId } from "../shared/protocol/ids.js";
import { clusterIds, clusterRecords } from "../lib/targeting/cluster.js";
import type { MinionData } from "../lib/store/minion-cache.js";
import { argOf, clusterMinionsOf, clusterTargetIds, type RunnerContext, type RunnerFn } from "./context.js";

type Bank = "grains" | "pillar";

function tgtOf(arg: unknown[], kwarg: Record<string, unknown>): { tgt: unknown; tgtType: string } {
  const tgt = argOf(arg, kwarg, 0, "tgt", null);
  const tgtType = String(argOf(arg, kwarg, 1, "tgt_type", kwarg.expr_form ?? "glob"));
  return { tgt: tgt === "" ? null : tgt, tgtType };
}

/** Every id with cached data (Salt's cache.list("minions")), sorted; with a bank placed, every master's. */
async function cachedIds(ctx: RunnerContext): Promise<string[]> {
  const cluster = clusterMinionsOf(ctx);
  const [data, mine] = await Promise.all([
    clusterIds("data", () => [...ctx.minions.store.minionData.getKeys()].map(String), cluster),
    clusterIds("mine", () => [...ctx.minions.store.mine.getKeys()].map(String), cluster),
  ]);
  return [...new Set([...data, ...mine])].sort();
}

/** The data records (grains and pillar) of `ids` as the cluster holds them. */
async function dataOf(ctx: RunnerContext, ids: readonly string[]): Promise<Map<string, MinionData>> {
  return clusterRecords("data", ids, (id) => ctx.minions.get(id) as Record<string, unknown> | undefined, clusterMinionsOf(ctx)) as Promise<Map<string, MinionData>>;
}

/** The mine records of `ids` as the cluster holds them. */
function mineOf(ctx: RunnerContext, ids: readonly string[]): Promise<Map<string, Record<string, unknown>>> {
  return clusterRecords("mine", ids, (id) => ctx.minions.mine(id), clusterMinionsOf(ctx));
}

const nonEmpty = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && Object.keys(v).length > 0;

/**
 * grains / pillar of the targeted minions: {id: data}, {} for a targeted minion with nothing cached. No target
 * (pillar only; Salt requires one for grains): every minion whose cache holds some.
 */
async function cached(ctx: RunnerContext, bank: Bank, tgt: unknown, tgtType: string): Promise<Record<string, unknown>> {
  const ids = tgt === null || tgt === undefined ? null : await clusterTargetIds(ctx, tgt, tgtType);
  if (ids && !ids.length) return {};
  const out: Record<string, unknown> = {};
  const all = ids ?? (await cachedIds(ctx));
  const data = await dataOf(ctx, all);
  for (const id of all) {
    const v = data.get(id)?.[bank];
    if (nonEmpty(v)) out[id] = v;
    else if (ids) out[id] = {};
  }
  return out;
}

/** mine(tgt, tgt_type): {id: mine data}, {} for a targeted minion without any; no target: every minion's. */
async function cachedMine(ctx: RunnerContext, tgt: unknown, tgtType: string): Promise<Record<string, unknown>> {
  const all = tgt === null || tgt === undefined;
  const out: Record<string, unknown> = {};
  const ids = all ? await cachedIds(ctx) : await clusterTargetIds(ctx, tgt, tgtType);
  const mine = await mineOf(ctx, ids);
  for (const id of ids) {
    const m = mine.get(id);
    if (m && typeof m === "object") out[id] = m;
    else if (!all) out[id] = {};
  }
  return out;
}

interface ClearWhat {
  pillar?: boolean;
  grains?: boolean;
  mine?: boolean;
  mineFunc?: string;
}

/**
 * Salt's clear_cached_minion_data: False without a target; otherwise True, after clearing each targeted
 * minion that has a cache entry (clearing pillar keeps the grains, and the reverse; both gone removes the record).
 */
async function clear(ctx: RunnerContext, tgt: unknown, tgtType: string, what: ClearWhat): Promise<boolean> {
  if (tgt === null || tgt === undefined) return false;
  if (!what.pillar && !what.grains && !what.mine && what.mineFunc === undefined) return false;
  const cachedNow = new Set(await cachedIds(ctx));
  const ids = (await clusterTargetIds(ctx, tgt, tgtType)).filter((id) => validId(id) && cachedNow.has(id));
  const [datas, mines] = await Promise.all([dataOf(ctx, ids), mineOf(ctx, ids)]);
  for (const id of ids) {
    if (what.pillar || what.grains) {
      const data = datas.get(id);
      const keepGrains = !what.grains && nonEmpty(data?.grains);
      const keepPillar = !what.pillar && nonEmpty(data?.pillar);
      if (data && (keepGrains || keepPillar)) await ctx.minions.put(id, keepGrains ? { grains: data.grains! } : { pillar: data.pillar! });
      else if (data) await ctx.minions.removeBank("data", id);
    }
    if (what.mine) {
      if (mines.get(id) !== undefined) await ctx.minions.removeBank("mine", id);
    } else if (what.mineFunc !== undefined) {
      const m = mines.get(id);
      if (m && typeof m === "object" && what.mineFunc in m && m[what.mineFunc]) {
        const { [what.mineFunc]: _gone, ...rest } = m;
        await ctx.minions.setMine(id, rest);
      }
    }
  }
  return true;
}

const clearing =
  (what: ClearWhat): RunnerFn =>
  async (ctx, arg, kwarg) => {
    const { tgt, tgtType } = tgtOf(arg, kwarg);
    return clear(ctx, tgt, tgtType, what);
  };

export const cacheRunners: Record<string, RunnerFn> = {
  "cache.grains": async (ctx, arg, kwarg) => {
    const { tgt, tgtType } = tgtOf(arg, kwarg);
    if (tgt === null || tgt === undefined) throw new Error("grains() missing 1 required positional argument: 'tgt'");
    return cached(ctx, "grains", tgt, tgtType);
  },
  "cache.pillar": async (ctx, arg, kwarg) => {
    const { tgt, tgtType } = tgtOf(arg, kwarg);
    return cached(ctx, "pillar", tgt, tgtType);
  },
  "cache.mine": async (ctx, arg, kwarg) => {
    const { tgt, tgtType } = tgtOf(arg, kwarg);
    return cachedMine(ctx, tgt, tgtType);
  },
  "cache.clear_pillar": clearing({ pillar: true }),
  "cache.clear_grains": clearing({ grains: true }),
  "cache.clear_mine": clearing({ mine: true }),
  "cache.clear_all": clearing({ pillar: true, grains: true, mine: true }),
  "cache.clear_mine_func": async (ctx, arg, kwarg) => {
    const { tgt, tgtType } = tgtOf(arg, kwarg);
    const fn = argOf(arg, kwarg, 2, "clear_mine_func_flag", null);
    return clear(ctx, tgt, tgtType, fn === null || fn === undefined ? {} : { mineFunc: String(fn) });
  },
};
