/**
 * Where one thread's time goes, stage by stage: the wall time spent inside each named synchronous section
 * and how often it ran, summed since the thread started. The Raft worker keeps one (its status carries the
 * totals; bench/cluster.ts turns two snapshots into µs per commit) because a CPU profile of that thread shows
 * no hot spot: the cost is spread over many small steps, which counters name and a sampler does not.
 *
 * A section's wall time is its CPU time while the thread keeps its CPU; a section that blocks (an fsync) or
 * is descheduled (a loaded box) counts the wait too, which is why the blocking ones are named apart. Cost:
 * two clock reads and a map update per section, well under a microsecond once optimised, but ~25 sections and
 * counts per Raft commit on each master, most of them run at V8's baseline tier: the Raft worker keeps one only
 * when asked (`brine_raft_stage_clock`; the benches ask), and NO_STAGES otherwise.
 */

/** One stage's totals: µs of wall time inside it, and how many times it ran. */
export interface StageTotal {
  us: number;
  n: number;
}

export type StageTotals = Record<string, StageTotal>;

/** What a section's owner needs: the clock, and where to add what it measured. */
export interface StageSink {
  /** false for NO_STAGES: a caller that builds a stage's name (a template string) skips it when off */
  readonly on: boolean;
  /** the clock sections are timed on, ms */
  now(): number;
  /** adds the time since `since` (a value of now()) to `stage`, and one run */
  add(stage: string, since: number): void;
  /** adds `n` runs of `stage` that take no measurable time of their own (counts: frames, bodies) */
  count(stage: string, n?: number): void;
}

/** A sink that keeps nothing (tests, and code run outside a thread that keeps stages). */
export const NO_STAGES: StageSink = { on: false, now: () => 0, add: () => undefined, count: () => undefined };

export class StageClock implements StageSink {
  readonly on = true;
  private readonly totals = new Map<string, { ms: number; n: number }>();

  constructor(readonly now: () => number = () => performance.now()) {}

  add(stage: string, since: number): void {
    this.addMs(stage, this.now() - since);
  }

  count(stage: string, n = 1): void {
    const t = this.totals.get(stage);
    if (t) t.n += n;
    else this.totals.set(stage, { ms: 0, n });
  }

  /** Adds an already measured duration (ms) to `stage` (a GC pause reported after the fact). */
  addMs(stage: string, ms: number): void {
    const t = this.totals.get(stage);
    if (t) {
      t.ms += ms;
      t.n++;
    } else this.totals.set(stage, { ms, n: 1 });
  }

  snapshot(): StageTotals {
    const out: StageTotals = {};
    for (const [k, t] of this.totals) out[k] = { us: Math.round(t.ms * 1000 * 10) / 10, n: t.n };
    return out;
  }
}

/** `b - a` per stage, divided by `per` (e.g. µs and runs per commit over a window of `per` commits). */
export function stageDelta(a: StageTotals, b: StageTotals, per = 1): StageTotals {
  const out: StageTotals = {};
  for (const [k, t] of Object.entries(b)) {
    const s = a[k] ?? { us: 0, n: 0 };
    out[k] = { us: (t.us - s.us) / per, n: (t.n - s.n) / per };
  }
  return out;
}
