/**
 * What applying one committed entry did. Apply never throws for bad content: every master applies the same
 * log, so a refusal must be a deterministic no-op on all of them (as etcd ignores an invalid ConfChange),
 * never a crash that every replica would repeat on every restart.
 *
 * - applied: state changed (or was re-stated) and the machine's version is now the entry's index;
 * - stale:   the index is at or below what the machine already reflects (replay after restart); no change;
 * - refused: the entry is valid on its own but not against the current state; no change, `error` says why.
 */
import { BrineError } from "../../../shared/errors.js";

export type ApplyResult =
  | { readonly outcome: "applied" }
  | { readonly outcome: "stale" }
  | { readonly outcome: "refused"; readonly error: BrineError };

export const APPLIED: ApplyResult = Object.freeze({ outcome: "applied" });
export const STALE: ApplyResult = Object.freeze({ outcome: "stale" });
export function refused(error: BrineError): ApplyResult {
  return Object.freeze({ outcome: "refused", error });
}

/** Raft indexes are safe integers >= 0 (Salt starts at 0, brine's core at 1); -1 means "nothing applied". */
export function checkIndex(index: number): void {
  if (!Number.isSafeInteger(index) || index < 0) throw new BrineError("CLUSTER_BAD_ENTRY", `raft index ${index}`);
}
