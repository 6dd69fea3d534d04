/**
 * Salt targeting as a pure module (no I/O): the master's `checkMinions` and the minion's
 * `minionMatches`, plus the matchers they are built from. Behaviour follows Salt 3006/3007
 * (salt/utils/minions.py, salt/matchers/, salt/utils/data.py); see docs in each file for divergences.
 */
export {
  checkMinions,
  type CheckMinionsOptions,
  type CheckMinionsResult,
  type MinionData,
  type TargetContext,
} from "./check-minions.js";
export { minionMatches, type MinionIdentity, type PublishTarget } from "./minion-match.js";
export {
  parseCompound,
  evaluateCompoundSet,
  evaluateCompoundBool,
  compoundTerms,
  compoundTermsMax,
  compoundDepthMax,
  type CompoundNode,
  type CompoundTerm,
  type Engine,
} from "./compound.js";
export { expandNodegroup, nodegroupWordsMax, type NodegroupConfig } from "./nodegroups.js";
export { fnmatch, fnmatchFilter, fnmatchToRegExp, patternCacheEntriesMax } from "./fnmatch.js";
export { pcreMatch, compilePcre, regexCacheEntriesMax, regexPatternLengthMax } from "./pcre.js";
export { subdictMatch, subdictStepsMax, DEFAULT_TARGET_DELIMITER, type SubdictOptions } from "./subdict.js";
export { ipcidrMatch, parseIpTarget, type IpTarget, type IpFamily } from "./ipcidr.js";
