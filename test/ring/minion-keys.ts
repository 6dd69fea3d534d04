/**
 * Deterministic minion-id-like keys for ring tests and the ring benchmark: the mix of shapes real fleets use
 * (numbered role hosts, FQDNs, cloud instance ids, Kubernetes node names, short names), from a seeded PRNG so
 * every run, thread and machine sees the same keys.
 */

/** mulberry32: tiny seeded PRNG, uniform in [0, 1). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ROLES = ["web", "db", "cache", "api", "worker", "lb", "mq", "build", "k8s-node", "edge"];
const SITES = ["dc1", "dc2", "fra1", "iad3", "sjc2", "ams4"];
const DOMAINS = ["example.com", "corp.example.net", "prod.internal"];

/** `count` distinct minion ids (distinct by construction: every shape embeds the running index). */
export function minionKeys(count: number, seed = 1): string[] {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const hex = (n: number): string => {
    let s = "";
    for (let i = 0; i < n; i++) s += Math.floor(rnd() * 16).toString(16);
    return s;
  };
  const keys: string[] = [];
  for (let i = 0; i < count; i++) {
    switch (i % 5) {
      case 0:
        keys.push(`${pick(ROLES)}-${String(i).padStart(6, "0")}.${pick(SITES)}.${pick(DOMAINS)}`);
        break;
      case 1:
        keys.push(`i-${hex(9)}${i.toString(16).padStart(8, "0")}`);
        break;
      case 2:
        keys.push(`${pick(ROLES)}${i}`);
        break;
      case 3:
        keys.push(`gke-${pick(SITES)}-pool-${hex(4)}-${i.toString(36)}`);
        break;
      default:
        keys.push(`${pick(ROLES)}-${pick(SITES)}-${i}`);
    }
  }
  return keys;
}

/** Node ids for a test ring of `n` masters: stable ids that are not addresses. */
export function masterIds(n: number, prefix = "master"): string[] {
  return Array.from({ length: n }, (_, i) => `${prefix}-${String(i + 1).padStart(2, "0")}`);
}
