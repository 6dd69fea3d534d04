/**
 * A seeded fake network: every message gets a delivery tick; faults are drawn from the run's Rng.
 * - drop: lost at send time with probability dropRate;
 * - duplicate: delivered twice (independent delays) with probability dupRate;
 * - delay/reorder: delay uniform in [delayMinTicks, delayMaxTicks], plus with probability reorderRate an
 *   extra spike up to spikeTicks, and a shuffle of messages due in the same tick;
 * - partition: nodes in different groups cannot talk; checked at send and again at delivery, so a partition
 *   also swallows messages already in flight.
 */
import type { Message, NodeId } from "../../src/workers/raft/core/types.js";
import type { Rng } from "./rng.js";

export interface NetFaults {
  dropRate: number;
  dupRate: number;
  delayMinTicks: number;
  delayMaxTicks: number;
  reorderRate: number;
  spikeTicks: number;
}

export const QUIET_NET: NetFaults = { dropRate: 0, dupRate: 0, delayMinTicks: 1, delayMaxTicks: 1, reorderRate: 0, spikeTicks: 0 };

export class Network {
  now = 0;
  faults: NetFaults;
  private readonly rng: Rng;
  private readonly buckets = new Map<number, Message[]>();
  private groupOf: Map<NodeId, number> | undefined;
  delivered = 0;
  dropped = 0;

  constructor(rng: Rng, faults: NetFaults) {
    this.rng = rng;
    this.faults = faults;
  }

  /** Splits the nodes into groups that cannot reach each other; nodes not listed form their own group. */
  partition(groups: NodeId[][]): void {
    this.groupOf = new Map();
    groups.forEach((g, k) => g.forEach((id) => this.groupOf!.set(id, k)));
  }

  heal(): void {
    this.groupOf = undefined;
  }

  get partitioned(): boolean {
    return this.groupOf !== undefined;
  }

  describePartition(): string {
    if (!this.groupOf) return "none";
    const groups = new Map<number, NodeId[]>();
    for (const [id, g] of this.groupOf) groups.set(g, [...(groups.get(g) ?? []), id]);
    return [...groups.values()].map((g) => g.sort((a, b) => a - b).join(" ")).join(" | ");
  }

  canReach(a: NodeId, b: NodeId): boolean {
    if (!this.groupOf) return true;
    return (this.groupOf.get(a) ?? -a) === (this.groupOf.get(b) ?? -b);
  }

  send(m: Message): void {
    if (!this.canReach(m.from, m.to) || this.rng.chance(this.faults.dropRate)) {
      this.dropped++;
      return;
    }
    this.enqueue(m);
    if (this.rng.chance(this.faults.dupRate)) this.enqueue(m);
  }

  private enqueue(m: Message): void {
    const f = this.faults;
    let delay = this.rng.range(f.delayMinTicks, f.delayMaxTicks);
    if (f.spikeTicks > 0 && this.rng.chance(f.reorderRate)) delay += this.rng.range(1, f.spikeTicks);
    const at = this.now + delay;
    const b = this.buckets.get(at);
    if (b) b.push(m);
    else this.buckets.set(at, [m]);
  }

  /** Messages due now (including ones sent with zero delay during this tick), partition permitting. */
  takeDue(): Message[] {
    const b: Message[] = [];
    for (const [at, msgs] of this.buckets) {
      if (at > this.now) continue;
      this.buckets.delete(at);
      for (const m of msgs) b.push(m);
    }
    if (b.length === 0) return b;
    if (b.length > 1 && this.rng.chance(this.faults.reorderRate)) {
      for (let i = b.length - 1; i > 0; i--) {
        const j = this.rng.int(i + 1);
        [b[i], b[j]] = [b[j]!, b[i]!];
      }
    }
    const out = b.filter((m) => this.canReach(m.from, m.to));
    this.dropped += b.length - out.length;
    this.delivered += out.length;
    return out;
  }

  inFlight(): number {
    let n = 0;
    for (const b of this.buckets.values()) n += b.length;
    return n;
  }
}
