/**
 * Is a publish for this minion? Salt's `Minion._target_load`: the load must carry `tgt`, `jid`, `fun` and
 * `arg`, and the matcher named by `tgt_type` (glob when absent) must accept the minion's id, grains and
 * pillar. The matchers themselves are brine's targeting module.
 */
import { minionMatches } from "../targeting/index.js";
import type { WireValue } from "../../shared/protocol/msgpack.js";

export interface TargetSelf {
  id: string;
  grains: Record<string, unknown>;
  pillar: unknown;
}

export function isForMe(load: Record<string, WireValue>, self: TargetSelf): boolean {
  for (const k of ["tgt", "jid", "fun", "arg"]) if (!(k in load)) return false;
  return minionMatches({ tgt: load.tgt, tgt_type: load.tgt_type, delimiter: load.delimiter }, self);
}
