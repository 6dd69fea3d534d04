/** One line of the benchmark table printed by `npm run bench`. */
export interface BenchRow {
  /** what was measured, e.g. "auth path (per thread)" */
  figure: string;
  value: number;
  unit: string;
  /** the target from the issues / reference-points.md, same unit */
  target?: number;
  /** "higher" when bigger is better (rates), "lower" for latencies */
  better?: "higher" | "lower";
  note?: string;
}

/** A benchmark module exports `run(opts)` returning its rows. */
export interface BenchOptions {
  /** full-size runs (e.g. 5,000-minion swarm) instead of the quick defaults */
  full: boolean;
}
export type BenchModule = { run(opts: BenchOptions): Promise<BenchRow[]> };
