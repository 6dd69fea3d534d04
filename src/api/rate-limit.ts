/**
 * Counting per source address in fixed one-minute windows (failed logins, requests), bounded in memory:
 * at most `sourcesMax` addresses are tracked; past that the oldest window is forgotten first, so a flood
 * from many addresses costs a bounded map, never the master's memory.
 */

/** Source addresses tracked at once per counter. */
export const sourcesMax = 100_000;
export const windowMs = 60_000;

export class PerSourceCounter {
  private readonly windows = new Map<string, { start: number; count: number }>();

  constructor(
    readonly limit: number,
    private readonly now: () => number = Date.now,
  ) {}

  private current(src: string): { start: number; count: number } | undefined {
    const w = this.windows.get(src);
    if (w && this.now() - w.start >= windowMs) {
      this.windows.delete(src);
      return undefined;
    }
    return w;
  }

  /** True when `src` has reached the limit in its current window. */
  exceeded(src: string): boolean {
    return (this.current(src)?.count ?? 0) >= this.limit;
  }

  /** Count one for `src`; returns the count in its window. */
  add(src: string): number {
    let w = this.current(src);
    if (!w) {
      if (this.windows.size >= sourcesMax) this.windows.delete(this.windows.keys().next().value!);
      w = { start: this.now(), count: 0 };
      this.windows.set(src, w);
    }
    return ++w.count;
  }

  /** Seconds until `src`'s window ends (Retry-After). */
  retryAfterS(src: string): number {
    const w = this.current(src);
    return w ? Math.max(1, Math.ceil((w.start + windowMs - this.now()) / 1000)) : 1;
  }
}
