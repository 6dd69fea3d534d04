/**
 * pillar.show_pillar and pillar.show_top: a minion's pillar and pillar top, compiled on the master by brine's
 * pillar compiler (src/lib/pillar/) from the minion's cached grains, as Salt's runners compile them.
 */
import { PillarCompiler } from "../lib/pillar/compile.js";
import { argOf, clusterMinionsOf, type RunnerContext, type RunnerFn } from "./context.js";
import { clusterIds, clusterRecords } from "../lib/targeting/cluster.js";

/** Salt's get_minion_data: the cached grains of `minion` (null when none), or of the first cached minion when none is named. */
async function minionData(ctx: RunnerContext, minion: string | null): Promise<{ id: string | null; grains: Record<string, unknown> | null }> {
  // with grains placed on a ring, a minion's data may be on other masters only (src/lib/targeting/cluster.ts)
  const cluster = clusterMinionsOf(ctx);
  if (minion !== null) {
    const g = (await clusterRecords("data", [minion], (id) => ctx.minions.get(id) as Record<string, unknown> | undefined, cluster)).get(minion)?.grains;
    return { id: minion, grains: g && typeof g === "object" ? { ...(g as Record<string, unknown>) } : null };
  }
  for (const id of ctx.minions.store.minionData.getKeys()) {
    const g = ctx.minions.get(String(id))?.grains;
    if (g && typeof g === "object") return { id: null, grains: { ...(g as Record<string, unknown>) } };
  }
  const first = (await clusterIds("data", () => [], cluster))[0];
  const g = first === undefined ? undefined : (await clusterRecords("data", [first], () => undefined, cluster)).get(first)?.grains;
  return { id: null, grains: g && typeof g === "object" ? { ...(g as Record<string, unknown>) } : null };
}

/**
 * show_pillar(minion="*", saltenv=…, pillarenv=…, any other key=value: a grain): the compiled pillar; a minion
 * without cached grains compiles with {fqdn: minion}, so `*` gives the pillar every minion gets.
 */
const showPillar: RunnerFn = async (ctx, arg, kwarg) => {
  const minion = String(argOf(arg, kwarg, 0, "minion", "*"));
  let saltenv = "base";
  let pillarenv: string | null = null;
  const grains = (await minionData(ctx, minion)).grains ?? { fqdn: minion };
  for (const [k, v] of Object.entries(kwarg)) {
    if (k === "minion") continue;
    if (k === "saltenv") saltenv = String(v);
    else if (k === "pillarenv") pillarenv = v === null ? null : String(v);
    else grains[k] = v;
  }
  return new PillarCompiler(ctx.cfg).compile({ id: minion, grains, saltenv, pillarenv });
};

/** show_top(minion=None, saltenv="base"): the merged pillar top, or the list of errors when rendering failed. */
const showTop: RunnerFn = async (ctx, arg, kwarg) => {
  const named = argOf(arg, kwarg, 0, "minion", null);
  const saltenv = String(argOf(arg, kwarg, 1, "saltenv", "base"));
  const { id, grains } = await minionData(ctx, named === null || named === undefined || named === "" ? null : String(named));
  const { top, errors } = await new PillarCompiler(ctx.cfg).top({ id: id ?? String(grains?.id ?? ""), grains: grains ?? {}, saltenv });
  if (errors.length) {
    ctx.print(errors.join("\n"));
    return errors;
  }
  return top;
};

export const pillarRunners: Record<string, RunnerFn> = {
  "pillar.show_pillar": showPillar,
  "pillar.show_top": showTop,
};
