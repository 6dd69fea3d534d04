/**
 * The pillar top file (Salt's Pillar.get_tops, merge_tops, sort_top_targets, top_matches):
 * - one `top.sls` (the `state_top` name) per environment — only `pillarenv` when set, only the
 *   saltenv (or base) under the `none` merging strategy — plus the files its `include:` names;
 * - merged per environment and target (a later top replaces an earlier target), ordered by `order:`;
 *   `ignore_missing: True` silences "not available" for that target's SLS;
 * - a target matches with the matcher its `match:` item names (default compound: glob, list, pcre,
 *   grain, grain_pcre, pillar, ipcidr, nodegroup… via src/lib/targeting/), against the minion's id and
 *   grains (pillar targets see no pillar on the master, as in Salt).
 */
import { minionMatches } from "../targeting/index.js";
import type { NodegroupConfig } from "../targeting/index.js";
import { isDict, type Data } from "./merge.js";

export interface TopTarget {
  /** `{match: …}` and other dict items of the target */
  options: Data[];
  states: string[];
}
/** env → target → what the target lists, in order */
export type MergedTop = Map<string, Map<string, TopTarget>>;

/** A pillar top file Salt cannot use; its text is Salt's, carried in pillar `_errors` (not a BrineError). */
export class TopError extends Error {}

/** Salt's merge_tops + sort_top_targets. `ignored` collects ignore_missing SLS per environment. */
export function mergeTops(tops: Map<string, unknown[]>, ignored: Map<string, Set<string>>): MergedTop {
  const top: MergedTop = new Map();
  const orders = new Map<string, Map<string, number>>();
  for (const ctops of tops.values()) {
    for (const ctop of ctops) {
      if (!isDict(ctop)) throw new TopError("Error encountered while rendering pillar top file.");
      for (const [env, targets] of Object.entries(ctop)) {
        if (env === "include") continue;
        if (!isDict(targets)) throw new TopError("Error encountered while rendering pillar top file.");
        let envTop = top.get(env);
        if (!envTop) top.set(env, (envTop = new Map()));
        let envOrders = orders.get(env);
        if (!envOrders) orders.set(env, (envOrders = new Map()));
        for (const [tgt, compsRaw] of Object.entries(targets)) {
          const comps = Array.isArray(compsRaw) ? compsRaw : typeof compsRaw === "string" ? [compsRaw] : null;
          if (comps === null) throw new TopError("Error encountered while rendering pillar top file.");
          const options: Data[] = [];
          const states: string[] = [];
          let ignoreMissing = false;
          envOrders.set(tgt, 0);
          for (const comp of comps) {
            if (isDict(comp)) {
              if ("match" in comp) options.push(comp);
              if ("order" in comp) {
                const o = Number.parseInt(String(comp.order), 10);
                envOrders.set(tgt, Number.isNaN(o) ? 0 : o);
              }
              if (comp.ignore_missing) ignoreMissing = true;
            } else if (typeof comp === "string") {
              if (!states.includes(comp)) states.push(comp);
            }
          }
          if (ignoreMissing) {
            let set = ignored.get(env);
            if (!set) ignored.set(env, (set = new Set()));
            for (const s of states) set.add(s);
          }
          envTop.set(tgt, { options, states });
        }
      }
    }
  }
  const sorted: MergedTop = new Map();
  for (const [env, targets] of top) {
    const o = orders.get(env)!;
    const keys = [...targets.keys()];
    keys.sort((a, b) => (o.get(a) ?? 0) - (o.get(b) ?? 0));
    sorted.set(env, new Map(keys.map((k) => [k, targets.get(k)!])));
  }
  return sorted;
}

export interface MinionFacts {
  id: string;
  grains: Data;
  nodegroups: NodegroupConfig;
}

/** Salt's confirm_top: the last `match:` item names the matcher (default compound). */
export function confirmTop(tgt: string, t: TopTarget, self: MinionFacts): boolean {
  let matcher = "compound";
  for (const o of t.options) if (typeof o.match === "string") matcher = o.match;
  return minionMatches({ tgt, tgt_type: matcher }, { id: self.id, grains: self.grains, pillar: {}, nodegroups: self.nodegroups });
}

/** Salt's top_matches: env → SLS names (globs allowed) that apply to this minion. */
export function topMatches(top: MergedTop, self: MinionFacts, pillarenv: string | null): Map<string, string[]> {
  const matches = new Map<string, string[]>();
  for (const [env, body] of top) {
    if (pillarenv && env !== pillarenv) continue;
    for (const [tgt, t] of body) {
      if (!confirmTop(tgt, t, self)) continue;
      let list = matches.get(env);
      if (!list) matches.set(env, (list = []));
      for (const s of t.states) if (!list.includes(s)) list.push(s);
    }
  }
  return matches;
}
