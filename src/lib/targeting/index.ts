/**
 * Salt targeting as a pure module (no I/O): the master's `checkMinions` and the minion's
 * `minionMatches`, plus the matchers they are built from. Behaviour follows Salt 3006/3007
 * (salt/utils/minions.py, salt/matchers/, salt/utils/data.py).
 *
 * Known divergences from Salt, all deliberate (details in the file named):
 * - compound.ts: an unclosed `(` is an error (Salt's master closes it silently, Salt's minion rejects
 *   it); `( )` is always an error; a word limit and a nesting limit apply.
 * - compound.ts / nodegroups.ts: `N@group` inside a compound is always parenthesised (Salt splices a
 *   group without nested groups in bare, so `N@g and x` could bind wrongly); an unknown or cyclic
 *   group fails the whole expression (Salt drops the word, which almost always leaves a syntax error).
 * - check-minions.ts / minion-match.ts: R@ is every minion on the master and rejects the publish on a
 *   minion, as in Salt without a range server: the one place the two sides disagree.
 * - pcre.ts: JS regex semantics under the translation: `\d \w \s \b` are ASCII-only, matching is by
 *   UTF-16 unit, a back-reference to a group that did not take part matches empty, and Python-only
 *   syntax we do not translate (`(?i:…)`, `(?(1)…)`, `\N{…}`, 3.11 possessive/atomic forms) is an
 *   invalid pattern, which matches nothing.
 * - subdict.ts: JS object keys are strings, so Salt's retry of a missing key as a YAML scalar (`1` →
 *   int 1) has nothing to do; an integral float prints as an int (`1`, not `1.0`); a work budget
 *   turns pathological nesting into "no match".
 * - ipcidr.ts: grain addresses are compared as parsed addresses, not as strings; grain values that are
 *   not addresses are skipped (Salt raises); a target with a zone index (`%eth0`) is invalid.
 * - check-minions.ts: duplicate and non-string list items are dropped and `missing` is de-duplicated;
 *   with `greedy: false` only accepted ids are considered (Salt also lists cached, unaccepted ids).
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
export { pcreMatch, compilePcre, compilePcreTarget, regexCacheEntriesMax, regexPatternLengthMax } from "./pcre.js";
export { subdictMatch, subdictStepsMax, DEFAULT_TARGET_DELIMITER, type SubdictOptions } from "./subdict.js";
export { ipcidrMatch, parseIpTarget, type IpTarget, type IpFamily } from "./ipcidr.js";
