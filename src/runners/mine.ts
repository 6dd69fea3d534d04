/**
 * mine.get(tgt, fun, tgt_type): the mine data of the targeted minions, as Salt's RemoteFuncs._mine_get answers
 * the master itself (its `id` is the requester): one function gives {minion: data}, several (comma-separated
 * or a list) give {function: {minion: data}}; entries stored with a minion-side ACL (`__saltmine_acl__`) are
 * unwrapped, and skipped when their `allow_tgt` does not allow the master's id; the master's `mine_get` ACL
 * applies as in Salt. compound and pillar targets compare pillar values exactly, as Salt's mine does.
 * mine.update publishes mine.update to the targeted minions.
 */
import { pcreMatch } from "../lib/targeting/index.js";
import { argOf, clusterMinionsOf, clusterTargetIds, type RunnerContext, type RunnerFn } from "./context.js";
import { clusterRecords } from "../lib/targeting/cluster.js";

const ACL_ID = "__saltmine_acl__";
const ACL_DATA = "__data__";

function functionsOf(fun: unknown): { functions: string[]; asDict: boolean } | null {
  if (typeof fun === "string") {
    const functions = [...new Set(fun.split(","))];
    return { functions, asDict: functions.length > 1 };
  }
  if (Array.isArray(fun)) return { functions: fun.map(String), asDict: true };
  return null;
}

/** The master's `mine_get` ACL ({id regex: [function regex]}) for the requester `id`; null: no ACL set. */
function allowedByAcl(cfg: Record<string, unknown>, id: string, functions: string[]): string[] | null {
  if (!("mine_get" in cfg)) return null;
  const acl = cfg.mine_get;
  if (!acl || typeof acl !== "object" || Array.isArray(acl)) return [];
  const perms: string[] = [];
  for (const [match, list] of Object.entries(acl)) if (pcreMatch(id, match) && Array.isArray(list)) perms.push(...list.map(String));
  return functions.filter((f) => perms.some((p) => pcreMatch(f, p)));
}

export async function mineGet(ctx: RunnerContext, tgt: unknown, fun: unknown, tgtType: string): Promise<Record<string, unknown>> {
  const f = functionsOf(fun);
  if (!f || tgt === null || tgt === undefined) return {};
  const requester = String(ctx.cfg.id);
  const allowed = allowedByAcl(ctx.cfg as unknown as Record<string, unknown>, requester, f.functions) ?? f.functions;
  if (!allowed.length) return {};
  const type = tgtType.toLowerCase() === "pillar" ? "pillar_exact" : tgtType.toLowerCase() === "compound" ? "compound_pillar_exact" : tgtType;
  const ret: Record<string, Record<string, unknown> | unknown> = {};
  const ids = await clusterTargetIds(ctx, tgt, type, false);
  const mine = await clusterRecords("mine", ids, (id) => ctx.minions.mine(id), clusterMinionsOf(ctx));
  for (const minion of ids) {
    const data = mine.get(minion);
    if (!data || typeof data !== "object") continue;
    for (const fn of allowed) {
      if (!(fn in data)) continue;
      let value = data[fn];
      if (value && typeof value === "object" && ACL_ID in value) {
        const entry = value as Record<string, unknown>;
        value = entry[ACL_DATA];
        if ("allow_tgt" in entry) {
          const allowedIds = await clusterTargetIds(ctx, entry.allow_tgt, String(entry.allow_tgt_type ?? "glob"));
          if (!allowedIds.length || !allowedIds.includes(requester)) continue;
        }
      }
      if (f.asDict) ((ret[fn] ??= {}) as Record<string, unknown>)[minion] = value;
      else ret[minion] = value;
    }
  }
  return ret;
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
