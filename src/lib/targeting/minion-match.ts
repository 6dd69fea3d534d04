/**
 * The minion's side of targeting: is a publish for me? This is Salt's `Minion._target_load` plus the
 * matchers in salt/matchers/, for brine's test minion and load tool.
 *
 * - No `tgt` → not for me. (Checking `jid`, `fun`, `arg` is the caller's job.)
 * - No `tgt_type` → glob on the id; a `tgt_type` with no matcher → not for me.
 * - Only `grain`, `grain_pcre` and `pillar` take the load's `delimiter`; `pillar_pcre` and
 *   `pillar_exact` always use `:` on a Salt minion, and so do we.
 * - Grain and pillar targets must contain their delimiter.
 * - In a compound target, `R@` (range) makes the whole publish not for me: a Salt minion without the
 *   `seco.range` library has no range matcher and rejects the expression. (The master, by contrast,
 *   counts R@ as every minion; see check-minions.ts.)
 * Nothing here throws.
 */
import {
  compoundTerms,
  evaluateCompoundBool,
  parseCompound,
  type CompoundNode,
  type CompoundTerm,
} from "./compound.js";
import { fnmatch } from "./fnmatch.js";
import { ipcidrMatch } from "./ipcidr.js";
import { expandNodegroup, type NodegroupConfig } from "./nodegroups.js";
import { pcreMatch } from "./pcre.js";
import { DEFAULT_TARGET_DELIMITER, subdictMatch, type SubdictOptions } from "./subdict.js";

/** The targeting fields of a publish load. */
export interface PublishTarget {
  tgt?: unknown;
  tgt_type?: unknown;
  delimiter?: unknown;
}

/** What a minion knows about itself. */
export interface MinionIdentity {
  id: string;
  grains?: unknown;
  pillar?: unknown;
  /** the minion's own `nodegroups` setting (rarely set; `N@` needs it on the minion side) */
  nodegroups?: NodegroupConfig;
}

/** Salt's list matcher: a comma-separated string holding the id as an item, or a list containing it. */
function listMatch(tgt: unknown, id: string): boolean {
  if (typeof tgt === "string") {
    return tgt === id || tgt.includes(`,${id},`) || tgt.startsWith(`${id},`) || tgt.endsWith(`,${id}`);
  }
  return Array.isArray(tgt) && tgt.includes(id);
}

/** grain/pillar matchers: the target must be a string containing its delimiter. */
function dataMatch(data: unknown, tgt: unknown, delimiter: unknown, options: SubdictOptions): boolean {
  if (typeof tgt !== "string" || typeof delimiter !== "string" || delimiter === "") return false;
  if (!tgt.includes(delimiter)) return false;
  return subdictMatch(data, tgt, delimiter, options);
}

function usesRange(node: CompoundNode): boolean {
  return compoundTerms(node).some((t) => t.kind === "engine" && t.engine === "R");
}

function termMatches(term: CompoundTerm, self: MinionIdentity, pillarExact: boolean): boolean {
  if (term.kind === "glob") return fnmatch(self.id, term.pattern);
  const { engine, pattern, delimiter } = term;
  switch (engine) {
    case "G":
      return dataMatch(self.grains, pattern, delimiter, {});
    case "P":
      return dataMatch(self.grains, pattern, delimiter, { regex: true });
    case "I":
      return dataMatch(self.pillar, pattern, delimiter, pillarExact ? { exact: true } : {});
    case "J":
      return dataMatch(self.pillar, pattern, delimiter, pillarExact ? { exact: true } : { regex: true });
    case "L":
      return listMatch(pattern, self.id);
    case "E":
      return pcreMatch(self.id, pattern);
    case "S":
      return ipcidrMatch(pattern, self.grains);
    case "R":
      return false; // unreachable: compoundMatch rejects R@ first
  }
}

function compoundMatch(tgt: unknown, self: MinionIdentity, pillarExact: boolean): boolean {
  const node = parseCompound(tgt, self.nodegroups);
  if (node === null || usesRange(node)) return false;
  return evaluateCompoundBool(node, (term) => termMatches(term, self, pillarExact));
}

function matchByType(load: PublishTarget, self: MinionIdentity): boolean {
  const { tgt } = load;
  const tgtType = load.tgt_type === undefined ? "glob" : load.tgt_type;
  const loadDelimiter = load.delimiter === undefined ? DEFAULT_TARGET_DELIMITER : load.delimiter;
  switch (tgtType) {
    case "glob":
      return typeof tgt === "string" && fnmatch(self.id, tgt);
    case "pcre":
      return pcreMatch(self.id, tgt);
    case "list":
      return listMatch(tgt, self.id);
    case "grain":
      return dataMatch(self.grains, tgt, loadDelimiter, {});
    case "grain_pcre":
      return dataMatch(self.grains, tgt, loadDelimiter, { regex: true });
    case "pillar":
      return dataMatch(self.pillar, tgt, loadDelimiter, {});
    case "pillar_pcre":
      return dataMatch(self.pillar, tgt, DEFAULT_TARGET_DELIMITER, { regex: true });
    case "pillar_exact":
      return dataMatch(self.pillar, tgt, DEFAULT_TARGET_DELIMITER, { exact: true });
    case "ipcidr":
      return ipcidrMatch(typeof tgt === "string" ? tgt : "", self.grains);
    case "compound":
      return compoundMatch(tgt, self, false);
    case "compound_pillar_exact":
      return compoundMatch(tgt, self, true);
    case "nodegroup": {
      const words = expandNodegroup(tgt, self.nodegroups);
      return words !== null && compoundMatch(words, self, false);
    }
    default:
      return false;
  }
}

/** Whether a publish with these targeting fields is addressed to this minion. */
export function minionMatches(load: PublishTarget, self: MinionIdentity): boolean {
  if (load === null || typeof load !== "object" || !("tgt" in load)) return false;
  try {
    return matchByType(load, self);
  } catch {
    return false; // a Salt minion drops a publish whose matcher raises
  }
}
