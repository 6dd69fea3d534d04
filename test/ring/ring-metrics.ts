/** Balance and movement figures shared by the ring tests and bench/ring.ts. */
import { hashString } from "../../src/shared/sab-ring/hash.js";
import { ringSlots } from "../../src/shared/sab-ring/layout.js";
import type { RingAssignment } from "../../src/shared/sab-ring/assign.js";

/** Slot of every key (hashing once, reused across tables). */
export function keySlots(keys: readonly string[]): Uint16Array {
  const out = new Uint16Array(keys.length);
  for (let i = 0; i < keys.length; i++) out[i] = hashString(keys[i]!) & (ringSlots - 1);
  return out;
}

/** Keys per node of `a`, indexed like a.nodes. */
export function keyCounts(a: RingAssignment, slots: Uint16Array): number[] {
  const counts = new Array<number>(a.nodes.length).fill(0);
  for (const s of slots) counts[a.owners[s]!]!++;
  return counts;
}

/** Coefficient of variation (population std / mean). */
export function cv(counts: readonly number[]): number {
  const mean = counts.reduce((x, y) => x + y, 0) / counts.length;
  const variance = counts.reduce((acc, c) => acc + (c - mean) ** 2, 0) / counts.length;
  return Math.sqrt(variance) / mean;
}

/**
 * The binomial noise floor of the CV: the CV a perfect (uniformly random) placement of `keys` keys on
 * `nodes` nodes shows on average, sqrt(p(1-p)K)/(pK) with p = 1/N, i.e. sqrt((N-1)/K).
 */
export function noiseFloor(nodes: number, keys: number): number {
  return Math.sqrt((nodes - 1) / keys);
}

/** Fraction of keys whose owner differs between two tables. */
export function movedFraction(a: RingAssignment, b: RingAssignment, slots: Uint16Array): number {
  let moved = 0;
  for (const s of slots) if (a.nodes[a.owners[s]!] !== b.nodes[b.owners[s]!]) moved++;
  return moved / slots.length;
}
