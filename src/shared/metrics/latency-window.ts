/**
 * The last few hundred proposal latencies of one Raft group, for its status: what an operator (and
 * bench/cluster.ts) reads to see how long a commit takes inside the Raft worker, apart from the hops a
 * caller on another thread adds. A fixed ring of samples; percentiles are computed when asked, never on
 * the pump's path.
 */

/** proposal latencies a group keeps for its status, count */
export const COMMIT_LATENCY_SAMPLES = 256;
/** upper bounds of the commit latency histogram (every proposal since the worker started), ms; then +Inf */
export const COMMIT_LATENCY_BUCKETS_MS = [0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500] as const;

/** Every sample since start, in fixed buckets (the metrics endpoint's histogram). */
export interface LatencyHistogram {
  /** per bucket of COMMIT_LATENCY_BUCKETS_MS, then +Inf; not cumulative */
  counts: number[];
  sumMs: number;
  count: number;
}

export interface LatencySummary {
  /** samples the percentiles cover (at most COMMIT_LATENCY_SAMPLES, the most recent) */
  samples: number;
  p50Ms: number;
  p99Ms: number;
}

export class LatencyWindow {
  private readonly ms: Float64Array;
  private next = 0;
  private count = 0;
  private readonly buckets = new Float64Array(COMMIT_LATENCY_BUCKETS_MS.length + 1);
  private total = 0;
  private sumMs = 0;

  constructor(capacity = COMMIT_LATENCY_SAMPLES) {
    this.ms = new Float64Array(capacity);
  }

  add(ms: number): void {
    this.ms[this.next] = ms;
    this.next = (this.next + 1) % this.ms.length;
    if (this.count < this.ms.length) this.count++;
    let b = 0;
    while (b < COMMIT_LATENCY_BUCKETS_MS.length && ms > COMMIT_LATENCY_BUCKETS_MS[b]!) b++;
    this.buckets[b]!++;
    this.total++;
    this.sumMs += ms;
  }

  histogram(): LatencyHistogram {
    return { counts: Array.from(this.buckets), sumMs: this.sumMs, count: this.total };
  }

  /** undefined before the first sample */
  summary(): LatencySummary | undefined {
    if (this.count === 0) return undefined;
    const sorted = this.ms.slice(0, this.count).sort();
    const at = (p: number) => sorted[Math.min(this.count - 1, Math.floor(p * this.count))]!;
    return { samples: this.count, p50Ms: at(0.5), p99Ms: at(0.99) };
  }
}
