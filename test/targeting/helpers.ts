/**
 * Shared fixtures for the targeting tests: a master-side TargetContext built from a list of minions, and
 * a seeded PRNG so generated fleets are the same on every run.
 */
import type { MinionData, MinionIdentity, NodegroupConfig, TargetContext } from "../../src/lib/targeting/index.js";

export interface FakeMinion {
  id: string;
  /** undefined: the master has no cached data for this minion */
  data?: MinionData;
}

export function contextOf(
  minions: readonly FakeMinion[],
  extra: { nodegroups?: NodegroupConfig; greedy?: boolean } = {},
): TargetContext {
  const byId = new Map(minions.map((m) => [m.id, m.data]));
  return {
    acceptedIds: minions.map((m) => m.id).sort(),
    minionData: (id) => byId.get(id),
    ...extra,
  };
}

/** The minion's own view of a fake minion (grains/pillar as it would have them). */
export function identityOf(m: FakeMinion): MinionIdentity {
  return { id: m.id, grains: m.data?.grains ?? {}, pillar: m.data?.pillar ?? {} };
}

/** mulberry32: a tiny deterministic PRNG returning floats in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function pick<T>(rand: () => number, items: readonly T[]): T {
  return items[Math.floor(rand() * items.length)]!;
}
