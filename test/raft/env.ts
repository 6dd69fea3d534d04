/**
 * The interaction environment: several RawNodes, each with the simulator's node harness (MemoryStorage disk,
 * Ready loop in contract order), and a message queue the test delivers explicitly. Every Ready and every
 * delivered message is written to `out`, which is what the golden scenario files record.
 *
 * Randomness is pinned (rand = 0), so every election timeout is exactly electionTicksMin ticks.
 */
import { BrineError } from "../../src/shared/errors.js";
import { describeMessage, describeReady, describeStatus } from "../../src/workers/raft/core/describe.js";
import type { RaftLimits } from "../../src/workers/raft/core/limits.js";
import type { NodeObserver } from "../../tools/raft-sim/node.js";
import { SimNode } from "../../tools/raft-sim/node.js";
import { Rng } from "../../tools/raft-sim/rng.js";
import { MemoryStorage } from "../../src/workers/raft/core/storage.js";
import type { ConfChange, Entry, Message, NodeId, Ready, RequestId, RequestResult } from "../../src/workers/raft/core/types.js";
import { bytes } from "./helpers.js";

export const ENV_LIMITS: Partial<RaftLimits> = {
  electionTicksMin: 10,
  heartbeatTicks: 1,
  maxInflightMsgs: 16,
  snapshotChunkBytes: 64,
  snapshotResendTicks: 3,
  requestDeadlineTicks: 30,
};

/** A Rng whose draws are all 0: randomized timeouts collapse to their minimum. */
class ZeroRng extends Rng {
  override next(): number {
    return 0;
  }
}

/** Founders `voters` (+ `learners`), node `voters[0]` elected and everything delivered. */
export function electedEnv(voters: NodeId[] = [1, 2, 3], learners: NodeId[] = [], limits: Partial<RaftLimits> = {}): Env {
  const env = new Env(limits);
  env.addNodes([...voters, ...learners], voters, learners);
  env.campaign(voters[0]!);
  env.stabilize();
  return env;
}

export class Env implements NodeObserver {
  readonly nodes = new Map<NodeId, SimNode>();
  queue: Message[] = [];
  out: string[] = [];
  readonly results = new Map<NodeId, RequestResult[]>();
  readonly appliedBy = new Map<NodeId, Entry[]>();
  private groups: Map<NodeId, number> | undefined;
  readonly limits: Partial<RaftLimits>;
  /** leaders write their own entries in the background (the worker's way); `landWrites` lands them */
  readonly asyncWrites: boolean;

  constructor(limits: Partial<RaftLimits> = {}, opts: { asyncWrites?: boolean } = {}) {
    this.limits = { ...ENV_LIMITS, ...limits };
    this.asyncWrites = opts.asyncWrites === true;
  }

  // ------------------------------------------------------------------ setup

  /** Founding members: every id in `ids` starts from the genesis snapshot of voters+learners. */
  addNodes(ids: NodeId[], voters: NodeId[] = ids, learners: NodeId[] = []): void {
    for (const id of ids) this.addNode(id, MemoryStorage.bootstrap(voters, learners));
  }

  /** A node with empty storage, to be added by a membership change. */
  addJoiner(id: NodeId): void {
    this.addNode(id, new MemoryStorage());
  }

  private addNode(id: NodeId, disk: MemoryStorage): void {
    const node = new SimNode(
      id,
      disk,
      new ZeroRng(0),
      { limits: this.limits, snapshotEveryEntries: Number.MAX_SAFE_INTEGER, snapshotKeepEntries: 0, snapshotPadBytes: 0, asyncLeaderWrites: this.asyncWrites, deferStateOnlyWrites: this.asyncWrites },
      this,
    );
    node.start();
    this.nodes.set(id, node);
    this.results.set(id, []);
    this.appliedBy.set(id, []);
  }

  node(id: NodeId): SimNode {
    const n = this.nodes.get(id);
    if (!n) throw new Error(`no node ${id}`);
    return n;
  }

  rn(id: NodeId) {
    const rn = this.node(id).rn;
    if (!rn) throw new Error(`node ${id} is down`);
    return rn;
  }

  ids(): NodeId[] {
    return [...this.nodes.keys()].sort((a, b) => a - b);
  }

  // ------------------------------------------------------------------ NodeObserver: record everything

  persisted(node: SimNode, rd: Ready): void {
    this.out.push(`> ${node.id} handling Ready`);
    for (const line of describeReady(rd)) this.out.push(`  ${line}`);
  }

  sent(_node: SimNode, m: Message): void {
    this.queue.push(m);
  }

  applied(node: SimNode, e: Entry): void {
    this.appliedBy.get(node.id)!.push(e);
  }

  snapshotInstalled(): void {}

  result(node: SimNode, r: RequestResult): void {
    this.results.get(node.id)!.push(r);
  }

  // ------------------------------------------------------------------ driving

  processReady(id: NodeId): void {
    this.node(id).processReady();
  }

  /** Delivers queued messages addressed to `ids` (all nodes when empty), in queue order. */
  deliver(ids: NodeId[] = []): number {
    const wanted = (m: Message) => ids.length === 0 || ids.includes(m.to);
    const now = this.queue.filter(wanted);
    this.queue = this.queue.filter((m) => !wanted(m));
    for (const m of now) {
      const node = this.nodes.get(m.to);
      if (!node?.rn || !this.canReach(m.from, m.to)) {
        this.out.push(`  dropped: ${describeMessage(m)}`);
        continue;
      }
      this.out.push(`  ${describeMessage(m)}`);
      node.rn.step(m);
    }
    return now.length;
  }

  /** Drops queued messages addressed to `ids` (all when empty). */
  dropQueued(ids: NodeId[] = []): void {
    const wanted = (m: Message) => ids.length === 0 || ids.includes(m.to);
    for (const m of this.queue.filter(wanted)) this.out.push(`  dropped: ${describeMessage(m)}`);
    this.queue = this.queue.filter((m) => !wanted(m));
  }

  /** Lands the first `n` (all by default) of node `id`'s writes in flight on its disk. */
  landWrites(id: NodeId, n?: number): void {
    const node = this.node(id);
    this.out.push(`> ${id} lands ${n ?? node.writesInFlight} of ${node.writesInFlight} writes in flight`);
    node.landWrites(n);
  }

  /** Process Readies, land writes in flight and deliver messages until nothing moves. */
  stabilize(ids: NodeId[] = this.ids()): void {
    for (let round = 0; round < 1000; round++) {
      let moved = false;
      for (const id of ids) {
        if ((this.nodes.get(id)?.writesInFlight ?? 0) === 0) continue;
        this.landWrites(id);
        moved = true;
      }
      for (const id of ids) {
        const rn = this.nodes.get(id)?.rn;
        if (rn?.hasReady()) {
          this.processReady(id);
          moved = true;
        }
      }
      if (this.queue.some((m) => ids.includes(m.to))) {
        this.deliver(ids);
        moved = true;
      }
      if (!moved) return;
    }
    throw new Error("stabilize: no fixed point after 1000 rounds");
  }

  /**
   * One heartbeat interval on leader `id`, then stabilize: the followers learn the leader's commit index (a new
   * commit travels with the next append or heartbeat, not in a message of its own).
   */
  heartbeat(id: NodeId): void {
    this.tick(id, this.rn(id).raft.limits.heartbeatTicks);
    this.stabilize();
  }

  tick(id: NodeId, n = 1): void {
    for (let i = 0; i < n; i++) this.rn(id).tick();
  }

  tickAll(n = 1): void {
    for (let i = 0; i < n; i++) for (const id of this.ids()) this.nodes.get(id)!.rn?.tick();
  }

  campaign(id: NodeId): void {
    this.rn(id).campaign();
  }

  propose(id: NodeId, data: string): RequestId {
    return this.rn(id).propose(bytes(data));
  }

  proposeConf(id: NodeId, cc: ConfChange): RequestId {
    return this.rn(id).proposeConfChange(cc);
  }

  readIndex(id: NodeId): RequestId {
    return this.rn(id).readIndex();
  }

  transfer(id: NodeId, target: NodeId): void {
    try {
      this.rn(id).transferLeader(target);
    } catch (e) {
      if (e instanceof BrineError) this.out.push(`  error: ${e.code}`);
      else throw e;
    }
  }

  partition(groups: NodeId[][]): void {
    this.groups = new Map();
    groups.forEach((g, k) => g.forEach((id) => this.groups!.set(id, k)));
  }

  heal(): void {
    this.groups = undefined;
  }

  canReach(a: NodeId, b: NodeId): boolean {
    if (!this.groups) return true;
    return (this.groups.get(a) ?? -a) === (this.groups.get(b) ?? -b);
  }

  crash(id: NodeId): void {
    this.node(id).crash();
  }

  restart(id: NodeId): void {
    this.node(id).start();
  }

  /** The application snapshots its state at its applied index and compacts the log through it. */
  compact(id: NodeId): void {
    const node = this.node(id);
    const rn = this.rn(id);
    node.disk.createSnapshot(node.app.applied, rn.raft.confState, node.app.snapshotData(100));
    node.disk.compact(node.app.applied);
  }

  status(id: NodeId): string {
    const node = this.node(id);
    if (!node.rn) return `${id} down`;
    return describeStatus(node.rn.status());
  }

  /** Results gathered on `id` since the last call. */
  takeResults(id: NodeId): RequestResult[] {
    const r = this.results.get(id)!;
    this.results.set(id, []);
    return r;
  }

  leader(): NodeId | undefined {
    let best: { id: NodeId; term: number } | undefined;
    for (const [id, n] of this.nodes) {
      const r = n.rn?.raft;
      if (r?.role === "leader" && (!best || r.term > best.term)) best = { id, term: r.term };
    }
    return best?.id;
  }
}
