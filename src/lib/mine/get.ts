/**
 * The answer to a mine read, as Salt's RemoteFuncs._mine_get gives it (salt/daemons/masterapi.py, 3007.x), for a
 * minion's `_mine_get` request and for the `mine.get` runner (the master's own id is then the requester):
 * - `fun` a string names one function (comma-separated names, repeats counted once: several give the dict form),
 *   a list gives the dict form: one function answers {minion: data}, the dict form {function: {minion: data}};
 * - the master's `mine_get` ACL ({requester id regex: [function regexes]}), when set, keeps only the functions
 *   the requester may read; set to anything but a map it allows nothing;
 * - `pillar` targets compare pillar values exactly (`pillar_exact`), `compound` ones likewise
 *   (`compound_pillar_exact`), and minions without cached data do not match (greedy off);
 * - an entry stored with a minion-side ACL (`__saltmine_acl__`, from a minion's `mine_functions` with
 *   `allow_tgt`) is unwrapped to its `__data__`, and left out unless the requester is among the minions its
 *   `allow_tgt` targets (a target that matches nobody allows nobody).
 * Targeting and the mine store are injected (this master's, or the cluster's when the data is placed); no I/O here.
 */
import { pcreMatch } from "../targeting/index.js";

const aclId = "__saltmine_acl__";
const aclData = "__data__";

export interface MineReadDeps {
  /** the ids `tgt` of type `tgtType` selects (greedy: minions without cached data match too) */
  targetIds(tgt: unknown, tgtType: string, greedy: boolean): Promise<string[]>;
  /** the stored mine of each of `ids` that has one */
  mineOf(ids: readonly string[]): Promise<Map<string, Record<string, unknown>>>;
}

/** The functions asked for, and whether the answer is keyed by function; null: `fun` is neither a string nor a list. */
export function mineFunctions(fun: unknown): { functions: string[]; asDict: boolean } | null {
  if (typeof fun === "string") {
    const functions = [...new Set(fun.split(","))];
    return { functions, asDict: functions.length > 1 };
  }
  if (Array.isArray(fun)) return { functions: fun.map(String), asDict: true };
  return null;
}

/** The functions the master's `mine_get` ACL lets `requester` read; null: no ACL set (everything allowed). */
export function mineAclAllows(acl: unknown, aclSet: boolean, requester: string, functions: readonly string[]): string[] | null {
  if (!aclSet) return null;
  if (!acl || typeof acl !== "object" || Array.isArray(acl)) return [];
  const perms: string[] = [];
  for (const [match, list] of Object.entries(acl)) if (pcreMatch(requester, match) && Array.isArray(list)) perms.push(...list.map(String));
  return functions.filter((f) => perms.some((p) => pcreMatch(f, p)));
}

/** Salt's target type for a mine read: pillar values compared exactly. */
export function mineTargetType(tgtType: string): string {
  const t = tgtType.toLowerCase();
  return t === "pillar" ? "pillar_exact" : t === "compound" ? "compound_pillar_exact" : tgtType;
}

/**
 * The mine data `requester` may read of the minions `tgt` selects. `acl` is the master's `mine_get` option
 * (`aclSet` false when the option is absent).
 */
export async function readMine(deps: MineReadDeps, requester: string, tgt: unknown, fun: unknown, tgtType: string, acl: unknown, aclSet: boolean): Promise<Record<string, unknown>> {
  const f = mineFunctions(fun);
  if (!f || tgt === null || tgt === undefined) return {};
  const allowed = mineAclAllows(acl, aclSet, requester, f.functions) ?? f.functions;
  if (!allowed.length) return {};
  const ids = await deps.targetIds(tgt, mineTargetType(tgtType), false);
  const mine = await deps.mineOf(ids);
  const ret: Record<string, unknown> = {};
  for (const minion of ids) {
    const data = mine.get(minion);
    if (!data || typeof data !== "object") continue;
    for (const fn of allowed) {
      if (!Object.prototype.hasOwnProperty.call(data, fn)) continue;
      let value = data[fn];
      if (value && typeof value === "object" && !Array.isArray(value) && aclId in value) {
        const entry = value as Record<string, unknown>;
        value = entry[aclData];
        if ("allow_tgt" in entry) {
          const allowedIds = await deps.targetIds(entry.allow_tgt, typeof entry.allow_tgt_type === "string" ? entry.allow_tgt_type : "glob", true);
          if (!allowedIds.includes(requester)) continue;
        }
      }
      if (f.asDict) ((ret[fn] ??= {}) as Record<string, unknown>)[minion] = value;
      else ret[minion] = value;
    }
  }
  return ret;
}
