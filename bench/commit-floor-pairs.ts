/**
 * Issue 17's ratio (commit p50 inside the leader's Raft worker against the box's floor) measured in turns:
 * the floor's three processes (bench/commit-floor.ts, openFloor) and brine's warm three-master cluster both
 * kept running, and short segments of each alternated, so that each floor segment and the brine segment
 * beside it see the same moment of a shared box. Measured one after the other (the figure before session
 * 17), the floor's p50 moved 0.85-3.30 ms between runs of one lock hold, more than brine's did.
 *
 * The claim of the row: the median over `pairs` adjacent pairs of (brine's p50 over one segment, timed by the
 * leader's Raft worker) / (the floor's p50 over one segment of as many entries, measured right before or
 * right after it, the order alternating pair by pair so that a drift of the box counts against neither)
 * is at most the target. A slower Raft thread raises every pair's numerator, so the row fails with it.
 */
import os from "node:os";
import type { OpenFloor } from "./commit-floor.js";
import type { BenchRow } from "./types.js";

/** issue 17's bound on the ratio, × the floor */
export const COMMIT_FLOOR_TARGET = 1.5;

/** One brine segment: its commits' p50 inside the leader's worker (ms) and what each master spent per commit. */
export interface BrineSegment {
  p50Ms: number;
  /** the leader's Raft thread, µs on a CPU per commit */
  leaderRaftUs: number;
  /** a follower's Raft thread (the followers' mean), µs on a CPU per commit */
  followerRaftUs: number;
  /** a follower's whole process (the followers' mean), µs on a CPU per commit */
  followerAllUs: number;
}

export interface CommitPair {
  /** which ran first: brine ("BF") or the floor ("FB") */
  order: "BF" | "FB";
  brine: BrineSegment;
  floorP50Ms: number;
  /** the floor's follower process, µs on a CPU per entry */
  floorFollowerUs: number;
  ratio: number;
  /** the 1-minute load average when the pair started */
  load: number;
}

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * `pairs` pairs of segments of `n` commits each: brine's (`brine(n)`) and the floor's (`floor.segment(n)`), the
 * first pair brine first, the next the floor first, and so on.
 */
export async function interleavedPairs(brine: (n: number) => Promise<BrineSegment>, floor: OpenFloor, pairs: number, n: number): Promise<CommitPair[]> {
  const out: CommitPair[] = [];
  for (let k = 0; k < pairs; k++) {
    const load = os.loadavg()[0]!;
    const order = k % 2 === 0 ? "BF" : "FB";
    let b: BrineSegment;
    let f: Awaited<ReturnType<OpenFloor["segment"]>>;
    if (order === "BF") {
      b = await brine(n);
      f = await floor.segment(n);
    } else {
      f = await floor.segment(n);
      b = await brine(n);
    }
    const fp50 = f.lat[Math.floor(f.lat.length / 2)]!;
    out.push({ order, brine: b, floorP50Ms: fp50, floorFollowerUs: f.followerRunUs, ratio: b.p50Ms / fp50, load });
  }
  return out;
}

/** The pairs in one line each, for stderr: a table, not a figure. */
export function pairLines(ps: CommitPair[]): string[] {
  return ps.map((p, k) => `${String(k + 1).padStart(2)} ${p.order}  brine ${p.brine.p50Ms.toFixed(3)} ms / floor ${p.floorP50Ms.toFixed(3)} ms = ${p.ratio.toFixed(2)}×   Raft thread µs/commit: leader ${p.brine.leaderRaftUs.toFixed(0)}, follower ${p.brine.followerRaftUs.toFixed(0)} (its process ${p.brine.followerAllUs.toFixed(0)}; the floor's follower ${p.floorFollowerUs.toFixed(0)})   load ${p.load.toFixed(2)}`);
}

/**
 * The row: the median of the pairs' ratios against `target`, with what it is made of and, in so many words,
 * whether it is met. `segment`: commits per segment.
 */
export function pairsRow(ps: CommitPair[], segment: number, target = COMMIT_FLOOR_TARGET): BenchRow {
  const m = median(ps.map((p) => p.ratio));
  const value = Math.round(m * 100) / 100;
  const loads = ps.map((p) => p.load);
  const med = (f: (p: CommitPair) => number) => median(ps.map(f));
  const range = `${Math.min(...ps.map((p) => p.ratio)).toFixed(2)}–${Math.max(...ps.map((p) => p.ratio)).toFixed(2)}×`;
  return {
    figure: "  the same in turns with the floor: median of adjacent pairs' ratios",
    value,
    unit: "×",
    target,
    better: "lower",
    note: `${ps.length} pairs of ${segment} commits each, the floor's processes and brine's warm cluster both running, the order alternating (BF, FB, …); per pair brine's p50 inside the leader's worker over its segment / the floor's p50 over its own, right before or after; ratios ${range}, medians brine ${med((p) => p.brine.p50Ms).toFixed(3)} ms, floor ${med((p) => p.floorP50Ms).toFixed(3)} ms; Raft thread µs per commit (median of segments): leader ${med((p) => p.brine.leaderRaftUs).toFixed(0)}, a follower ${med((p) => p.brine.followerRaftUs).toFixed(0)} (its process ${med((p) => p.brine.followerAllUs).toFixed(0)}; the floor's follower process ${med((p) => p.floorFollowerUs).toFixed(0)}); load ${Math.min(...loads).toFixed(1)}–${Math.max(...loads).toFixed(1)} on ${os.cpus().length} cores; ≤ ${target}×: ${value <= target ? "met" : "not met"}`,
  };
}
