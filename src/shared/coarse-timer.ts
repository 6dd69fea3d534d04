/**
 * One coarse timer for many minions. A swarm of thousands of minions must not arm a Node timer per
 * request, per sleep and per retry: every deadline goes into a wheel of buckets keyed by tick, and a
 * single interval (running only while something is scheduled) fires the due buckets. Cancelling is
 * O(1). Deadlines are rounded up to the next tick, so a timeout fires at most one tick late.
 */
import { performance } from "node:perf_hooks";

export interface TimerHandle {
  cancel(): void;
}

interface Entry {
  fn: () => void;
  bucket: number;
  done: boolean;
}

export class CoarseTimer {
  private readonly buckets = new Map<number, Set<Entry>>();
  private live = 0;
  private interval: NodeJS.Timeout | undefined;
  private lastTick: number;

  constructor(readonly tickMs = 25) {
    this.lastTick = this.tickOf(performance.now());
  }

  private tickOf(t: number): number {
    return Math.floor(t / this.tickMs);
  }

  /** Run `fn` once, `ms` milliseconds from now (rounded up to the next tick). */
  after(ms: number, fn: () => void): TimerHandle {
    const now = performance.now();
    if (this.interval === undefined) this.lastTick = this.tickOf(now); // idle until now: nothing is due
    const due = Math.max(this.tickOf(now + Math.max(0, ms)) + 1, this.lastTick + 1);
    const e: Entry = { fn, bucket: due, done: false };
    let set = this.buckets.get(due);
    if (!set) this.buckets.set(due, (set = new Set()));
    set.add(e);
    this.live++;
    this.arm();
    return {
      cancel: () => {
        if (e.done) return;
        e.done = true;
        const s = this.buckets.get(e.bucket);
        if (s?.delete(e)) {
          this.live--;
          if (s.size === 0) this.buckets.delete(e.bucket);
        }
        if (this.live === 0) this.disarm();
      },
    };
  }

  /** A promise resolved after `ms`; with `signal`, rejected (AbortError) when the signal fires first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason ?? new Error("aborted"));
      const onAbort = () => {
        h.cancel();
        reject(signal!.reason ?? new Error("aborted"));
      };
      const h = this.after(ms, () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Number of pending deadlines (for tests and leak checks). */
  get pending(): number {
    return this.live;
  }

  private arm(): void {
    if (this.interval === undefined) this.interval = setInterval(() => this.tick(), this.tickMs);
  }

  private disarm(): void {
    if (this.interval !== undefined) {
      clearInterval(this.interval);
      this.interval = undefined;
    }
  }

  private tick(): void {
    const now = this.tickOf(performance.now());
    // Catch up on every tick since the last run (the loop may have been busy), but never walk more
    // empty ticks than there are buckets: jump straight through the sorted due keys instead.
    if (now - this.lastTick > this.buckets.size + 64) {
      const due = [...this.buckets.keys()].filter((k) => k <= now).sort((a, b) => a - b);
      for (const k of due) this.fire(k);
    } else {
      for (let t = this.lastTick + 1; t <= now; t++) this.fire(t);
    }
    this.lastTick = now;
    if (this.live === 0) this.disarm();
  }

  private fire(t: number): void {
    const set = this.buckets.get(t);
    if (!set) return;
    this.buckets.delete(t);
    for (const e of set) {
      e.done = true;
      this.live--;
      try {
        e.fn();
      } catch (err) {
        queueMicrotask(() => {
          throw err;
        });
      }
    }
  }
}

/** The process-wide timer every minion uses unless told otherwise. */
export const sharedTimer = new CoarseTimer(25);

/** Epoch milliseconds with sub-millisecond precision, comparable across processes on one host. */
export function nowMs(): number {
  return performance.timeOrigin + performance.now();
}
