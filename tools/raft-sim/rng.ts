/**
 * A small seeded PRNG (mulberry32) with the helpers the simulator needs. One seed fixes every random choice
 * of a run (faults, workload, election timeouts), so a failing seed replays exactly.
 */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** uniform in [0, 1) */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** integer in [0, n) */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** integer in [lo, hi] */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from empty list");
    return items[this.int(items.length)]!;
  }

  /** A child generator: independent stream, same determinism. */
  fork(): Rng {
    return new Rng(Math.floor(this.next() * 4294967296));
  }

  /** A `() => number` for injection into the Raft core. */
  fn(): () => number {
    return () => this.next();
  }
}

/** FNV-1a over bytes, 32 bits, continuing from h. */
export function fnv1a(bytes: Uint8Array, h = 0x811c9dc5): number {
  for (let i = 0; i < bytes.length; i++) {
    h ^= bytes[i]!;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Mixes a 32-bit integer into h (FNV-1a over its four bytes). */
export function mixInt(h: number, x: number): number {
  for (let k = 0; k < 4; k++) {
    h ^= (x >>> (k * 8)) & 0xff;
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
