/**
 * Slot assignment: which node owns each of the ringSlots slots. Pure and deterministic: the same inputs give
 * the same table on every master, in every thread, on every run (integer arithmetic only, canonical node
 * order, explicit tie-breaks).
 *
 * Why not plain rendezvous (HRW) per slot: with only 4096 slots, HRW hands each node a binomial share, so
 * the slot counts alone have a coefficient of variation of sqrt((N-1)/4096): 4.7 % at N = 10, while the
 * target for 200k keys is 2 x sqrt((N-1)/200000) = 1.3 %. The table has to be balanced on purpose.
 *
 * Why the previous table is an input: a table that is both exactly balanced and a function of the node set
 * alone cannot also move only the departing node's slots (that property forces the HRW form above). Measured
 * on 100 random node sets, the best set-only balanced assignment (min-cost transport over HRW scores) moved
 * 0.7 pp more than the ideal on average at N = 10, and more than ideal + 1 pp for 5 % of the sets. So a new
 * table is derived from the previous one with the fewest possible moves:
 *
 *   1. Slots of nodes that left become free.
 *   2. Quotas: every node gets floor(S/N) slots; the S mod N spare slots go to the nodes that already hold
 *      the most (ties: node id order), so that nobody gives up a slot just to make room for a rounding unit.
 *   3. A node over its quota frees the surplus slots it scores lowest on (HRW score).
 *   4. Free slots go to nodes under quota, best HRW score first (one global sort), until every quota is met.
 *
 * Consequences (asserted by test/ring/ring-movement.test.ts):
 *   - balance: every node holds floor(S/N) or ceil(S/N) slots;
 *   - adding a node moves exactly its quota, about S/(N+1), all of it to the new node;
 *   - removing a node moves exactly its slots, and no other slot, as long as N(N-1) <= S, i.e. N <= 64 for
 *     4096 slots (then ceil(S/N) <= floor(S/(N-1)), so no survivor is ever over its new quota);
 *   - from an empty previous table the same steps produce a fresh balanced HRW-flavoured table.
 * The table therefore depends on the order of membership changes. That order is the committed Raft log,
 * identical on every master, and the table is part of the group snapshot (cluster/state-machines/
 * ring-table.ts), so every master derives the same table for the same log prefix.
 */
import { BrineError } from "../errors.js";
import { hashBytes, hashString, hrwScore, nodeHash } from "./hash.js";
import { NO_OWNER, ringSlots } from "./layout.js";

/** Nodes in canonical (sorted) order, and for every slot the index of its owner in `nodes`. */
export interface RingAssignment {
  readonly nodes: readonly string[];
  /** length ringSlots; NO_OWNER only when `nodes` is empty */
  readonly owners: Uint8Array;
}

/** The empty ring: no nodes, no owners. */
export function emptyAssignment(): RingAssignment {
  return { nodes: [], owners: new Uint8Array(ringSlots).fill(NO_OWNER) };
}

/** Throws unless `a` is internally consistent: sorted unique nodes, every slot owned iff there are nodes. */
export function checkAssignment(a: RingAssignment): void {
  if (a.owners.length !== ringSlots) throw new BrineError("RING_BAD_ASSIGNMENT", `owners length ${a.owners.length}`);
  if (a.nodes.length >= NO_OWNER) throw new BrineError("RING_TOO_MANY_NODES", `${a.nodes.length} nodes`);
  for (let i = 1; i < a.nodes.length; i++) {
    if (!(a.nodes[i - 1]! < a.nodes[i]!)) throw new BrineError("RING_BAD_ASSIGNMENT", "nodes not sorted and unique");
  }
  const n = a.nodes.length;
  for (let s = 0; s < ringSlots; s++) {
    const o = a.owners[s]!;
    if (n === 0 ? o !== NO_OWNER : o >= n) throw new BrineError("RING_BAD_ASSIGNMENT", `slot ${s} owner ${o}`);
  }
}

/**
 * The table for `nextNodes`, moving as few slots as possible away from `prev` (see the file comment).
 * `nextNodes` may be in any order; the result's nodes are sorted.
 */
export function assignSlots(nextNodes: readonly string[], prev: RingAssignment | null = null): RingAssignment {
  const nodes = [...nextNodes].sort();
  for (let i = 1; i < nodes.length; i++) {
    if (nodes[i - 1] === nodes[i]) throw new BrineError("RING_BAD_NODE_ID", `duplicate node ${nodes[i]}`);
  }
  if (nodes.length >= NO_OWNER) throw new BrineError("RING_TOO_MANY_NODES", `${nodes.length} nodes`);
  const n = nodes.length;
  if (n === 0) return emptyAssignment();

  // 1. carry over owners that are still members; -1 = free
  const owner = new Int16Array(ringSlots).fill(-1);
  const counts = new Int32Array(n);
  if (prev !== null) {
    checkAssignment(prev);
    const index = new Map(nodes.map((id, i) => [id, i]));
    const remap = prev.nodes.map((id) => index.get(id) ?? -1);
    for (let s = 0; s < ringSlots; s++) {
      const p = prev.owners[s]!;
      const o = p === NO_OWNER ? -1 : remap[p]!;
      owner[s] = o;
      if (o >= 0) counts[o]!++;
    }
  }

  // 2. quotas; spare units to the fullest nodes, ties by node order (nodes are sorted, so index order)
  const base = Math.floor(ringSlots / n);
  const quota = new Int32Array(n).fill(base);
  const byCount = [...Array(n).keys()].sort((a, b) => counts[b]! - counts[a]! || a - b);
  for (let k = 0; k < ringSlots % n; k++) quota[byCount[k]!]!++;

  const hashes = nodes.map(nodeHash);

  // 3. surplus: each node frees the slots it scores lowest on
  for (let x = 0; x < n; x++) {
    const surplus = counts[x]! - quota[x]!;
    if (surplus <= 0) continue;
    const mine: number[] = [];
    for (let s = 0; s < ringSlots; s++) if (owner[s] === x) mine.push(s);
    mine.sort((a, b) => hrwScore(hashes[x]!, a) - hrwScore(hashes[x]!, b) || a - b);
    for (let i = 0; i < surplus; i++) owner[mine[i]!] = -1;
    counts[x] = quota[x]!;
  }

  // 4. fill deficits from the free pool, best (slot, node) score first
  fillFreeSlots(owner, counts, quota, hashes);

  const owners = new Uint8Array(ringSlots);
  for (let s = 0; s < ringSlots; s++) owners[s] = owner[s]!;
  return { nodes, owners };
}

/**
 * Gives every free slot (-1) to a node below its quota. All (free slot, needy node) pairs are ranked by HRW
 * score (ties: lower slot, then lower node index) and taken greedily. Every free slot gets an owner: the free
 * count equals the total deficit, and a slot can only be skipped when every needy node is already full.
 *
 * A pair is packed into one float64 so one typed-array sort ranks them: score (32 bits) * 2^20 +
 * (4095 - slot) * 2^8 + (255 - node), 52 bits in all, exact in a double.
 */
function fillFreeSlots(owner: Int16Array, counts: Int32Array, quota: Int32Array, hashes: readonly number[]): void {
  const needy: number[] = [];
  for (let x = 0; x < counts.length; x++) if (counts[x]! < quota[x]!) needy.push(x);
  const free: number[] = [];
  for (let s = 0; s < ringSlots; s++) if (owner[s] === -1) free.push(s);
  if (free.length === 0) return;
  const pairs = new Float64Array(free.length * needy.length);
  let p = 0;
  for (const s of free) {
    for (const x of needy) pairs[p++] = hrwScore(hashes[x]!, s) * 1048576 + (ringSlots - 1 - s) * 256 + (255 - x);
  }
  pairs.sort();
  let left = free.length;
  for (let i = pairs.length - 1; i >= 0 && left > 0; i--) {
    const v = pairs[i]!;
    const x = 255 - (v % 256);
    const s = ringSlots - 1 - (Math.floor(v / 256) % ringSlots);
    if (owner[s] !== -1 || counts[x]! >= quota[x]!) continue;
    owner[s] = x;
    counts[x]!++;
    left--;
  }
  if (left !== 0) throw new BrineError("RING_BAD_ASSIGNMENT", `${left} slots left without an owner`);
}

/**
 * Preference order of `nodes` for `slot`: the table's owner first, then the other nodes by descending HRW
 * score (ties: node order). Used by replicas(): the owner is authoritative, the rest is rendezvous order, so
 * the answer is the same in every thread for one epoch.
 */
export function preferenceOrder(
  nodes: readonly string[],
  hashes: readonly number[],
  ownerIndex: number,
  slot: number,
): number[] {
  const rest: number[] = [];
  for (let i = 0; i < nodes.length; i++) if (i !== ownerIndex) rest.push(i);
  rest.sort((a, b) => hrwScore(hashes[b]!, slot) - hrwScore(hashes[a]!, slot) || a - b);
  return ownerIndex >= 0 && ownerIndex < nodes.length ? [ownerIndex, ...rest] : rest;
}

/**
 * A 32-bit fingerprint of a table (node ids and slot owners). Readers publish it in ring_info so operators can
 * compare masters: equal epochs must have equal checksums. Node ids are chained one by one (each as a seed of
 * the next), so no separator character can make two different lists collide trivially.
 */
export function tableChecksum(a: RingAssignment): number {
  let h = a.nodes.length;
  for (const id of a.nodes) h = hashString(id, h);
  return hashBytes(a.owners, h);
}
