/**
 * Majority arithmetic over the voters of one configuration. Learners never appear here: callers pass the
 * voter set only, which is how "learners never count toward quorum" is enforced in one place.
 *
 * A single configuration suffices because membership changes one node at a time (any two majorities of
 * configurations that differ by one voter intersect), so joint consensus is not needed.
 */
import type { NodeId } from "./types.js";

export type VoteResult = "won" | "lost" | "pending";

export function majority(voterCount: number): number {
  return Math.floor(voterCount / 2) + 1;
}

/**
 * The highest index replicated on a majority of voters: sort the voters' match indexes descending and take
 * the q-th. With no voters the answer is 0 (nothing can commit in an empty configuration).
 */
export function committedIndex(voters: ReadonlySet<NodeId>, matchOf: (id: NodeId) => number): number {
  const n = voters.size;
  if (n === 0) return 0;
  const matches: number[] = [];
  for (const id of voters) matches.push(matchOf(id));
  matches.sort((a, b) => b - a);
  return matches[majority(n) - 1]!;
}

/** Outcome of an election given the votes recorded so far (true = granted). Non-voters' votes are ignored. */
export function voteResult(voters: ReadonlySet<NodeId>, votes: ReadonlyMap<NodeId, boolean>): VoteResult {
  const n = voters.size;
  if (n === 0) return "lost";
  const q = majority(n);
  let granted = 0;
  let rejected = 0;
  for (const id of voters) {
    const v = votes.get(id);
    if (v === true) granted++;
    else if (v === false) rejected++;
  }
  if (granted >= q) return "won";
  if (rejected > n - q) return "lost";
  return "pending";
}

/** True when at least a majority of voters satisfy `pred` (check-quorum, read-index acknowledgements). */
export function hasQuorum(voters: ReadonlySet<NodeId>, pred: (id: NodeId) => boolean): boolean {
  const n = voters.size;
  if (n === 0) return false;
  let count = 0;
  for (const id of voters) if (pred(id)) count++;
  return count >= majority(n);
}
