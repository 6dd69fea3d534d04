/**
 * Helpers for restoring state machines from snapshots: a snapshot comes from disk or from a peer, so it is
 * validated like an entry, and any problem is CLUSTER_BAD_SNAPSHOT (the caller must not half-restore).
 */
import { BrineError, isBrineError } from "../../../shared/errors.js";

export function snapshotObject(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new BrineError("CLUSTER_BAD_SNAPSHOT", `${what} is not a map`);
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) throw new BrineError("CLUSTER_BAD_SNAPSHOT", `${what} is not a plain map`);
  return v as Record<string, unknown>;
}

export function snapshotField(o: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(o, key) ? o[key] : undefined;
}

/** A version: -1 (nothing applied) or a raft index. */
export function snapshotVersion(v: unknown, what: string): number {
  if (!Number.isSafeInteger(v) || (v as number) < -1) throw new BrineError("CLUSTER_BAD_SNAPSHOT", `${what} version ${String(v)}`);
  return v as number;
}

/** Runs a validator written for entries, reporting its failure as a snapshot problem. */
export function asSnapshotCheck<T>(what: string, check: () => T): T {
  try {
    return check();
  } catch (e) {
    if (isBrineError(e)) throw new BrineError("CLUSTER_BAD_SNAPSHOT", `${what}: ${e.message}`);
    throw e;
  }
}
