/**
 * mine.get(tgt, fun, tgt_type): the mine data of the targeted minions, as Salt's RemoteFuncs._mine_get answers
 * the master itself (its `id` is the requester), with the rules of src/lib/mine/get.ts (the same a minion's
 * `_mine_get` follows).
 * mine.update publishes mine.update to the targeted minions.
 */
import { argOf, clusterMinionsOf, clusterTargetIds, type RunnerContext, type RunnerFn } from "./context.js";
import { clusterRecords } from "../lib/targeting/cluster.js";
import { readMine } from "../lib/mine/get.js";

export async function mineGet(ctx: RunnerContext, tgt: unknown, fun: unknown, tgtType: string): Promise<Record<string, unknown>> {
  const cfg = ctx.cfg as unknown as Record<string, unknown>;
  const deps = {
    targetIds: (t: unknown, type: string, greedy: boolean) => clusterTargetIds(ctx, t, type, greedy),
    mineOf: (ids: readonly string[]) => clusterRecords("mine", ids, (id) => ctx.minions.mine(id), clusterMinionsOf(ctx)),
  };
  return readMine(deps, String(ctx.cfg.id), tgt, fun, tgtType, cfg.mine_get, "mine_get" in cfg);
}

/**
 * mine.update(tgt, tgt_type="glob", clear=False, mine_functions=None): publishes mine.update to the targeted
 * minions (Salt's salt.execute): {minion: its return}, False for a minion that did not return.
 */
const mineUpdate: RunnerFn = async (ctx, arg, kwarg) => {
  const tgt = argOf(arg, kwarg, 0, "tgt", null);
  if (tgt === null || tgt === undefined) throw new Error("update() missing 1 required positional argument: 'tgt'");
  const tgtType = String(argOf(arg, kwarg, 1, "tgt_type", "glob"));
  const fnKwargs = { clear: argOf(arg, kwarg, 2, "clear", false), mine_functions: argOf(arg, kwarg, 3, "mine_functions", null), __kwarg__: true };
  const out: Record<string, unknown> = {};
  for await (const r of ctx.client.cmdIter({ tgt: tgt as string, fun: "mine.update", arg: [fnKwargs], tgtType, timeoutS: Number(kwarg.timeout ?? ctx.cfg.timeout) }, { gatherJobTimeoutS: ctx.cfg.gather_job_timeout })) {
    out[r.id] = "missing" in r ? false : r.data.return;
  }
  return out;
};

export const mineRunners: Record<string, RunnerFn> = {
  "mine.get": async (ctx, arg, kwarg) => mineGet(ctx, argOf(arg, kwarg, 0, "tgt", null), argOf(arg, kwarg, 1, "fun", null), String(argOf(arg, kwarg, 2, "tgt_type", "glob"))),
  "mine.update": mineUpdate,
};
