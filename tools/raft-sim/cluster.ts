/**
 * The deterministic simulator: N nodes of one Raft group on a seeded fake network, driven tick by tick, with
 * a random workload (proposals, reads, membership changes, leadership transfers) and random faults (drop,
 * duplication, delay, reordering, partitions, crashes with restart from the disk, clock skew). The checker
 * runs after every step; the first violation ends the run.
 *
 * A run has two phases: `steps` ticks of faults, then a recovery phase (faults off, everyone restarted and
 * reconnected) that must elect a leader, commit a fresh proposal and bring every member up to every
 * acknowledged write: that is the liveness half of "no acknowledged proposal lost".
 */
import { describeMessage, describeReady } from "../../src/workers/raft/core/describe.js";
import type { RaftLimits } from "../../src/workers/raft/core/limits.js";
import { MemoryStorage } from "../../src/workers/raft/core/storage.js";
import type { ConfChangeKind, Entry, Message, NodeId, Ready, RequestId, RequestResult, Snapshot } from "../../src/workers/raft/core/types.js";
import { Checker, Violation } from "./checker.js";
import type { NetFaults } from "./network.js";
import { Network } from "./network.js";
import type { NodeObserver, SimNodeOptions } from "./node.js";
import { SimNode } from "./node.js";
import { Rng } from "./rng.js";

export interface SimOptions {
  seed: number;
  /** node slots, 3..7 (default: drawn from the seed) */
  nodes?: number;
  /** ticks of the fault phase (default 300) */
  steps?: number;
  /** random membership changes (default: drawn from the seed) */
  membership?: boolean;
  /** asynchronous leader writes, as the worker does them (default: odd seeds) */
  asyncWrites?: boolean;
  /** receives a line per event when replaying a seed */
  trace?: (line: string) => void;
}

export interface SimReport {
  seed: number;
  nodes: number;
  steps: number;
  membership: boolean;
  asyncWrites: boolean;
  violation?: string;
  ticks: number;
  acked: number;
  readsOk: number;
  failedResults: number;
  messages: number;
  elections: number;
  /** times a leader put its group to rest */
  rests: number;
}

/**
 * Limits drawn per seed, small enough that flow control, message splitting, partial batches and chunked
 * snapshots all happen in short runs.
 */
export function simLimits(rng: Rng): Partial<RaftLimits> {
  return {
    electionTicksMin: rng.pick([8, 10, 15]),
    heartbeatTicks: rng.pick([1, 2, 3]),
    maxInflightMsgs: rng.pick([1, 2, 4, 16]),
    maxSizePerMsgBytes: rng.pick([40, 96, 160, 4096]),
    maxCommittedSizePerReadyBytes: rng.pick([64, 320, 1 << 20]),
    maxUncommittedEntriesBytes: 8192,
    snapshotChunkBytes: rng.pick([16, 64, 4096]),
    snapshotResendTicks: 4,
    requestDeadlineTicks: 80,
  };
}

/**
 * Recovery may take a while when a large uncommitted backlog meets a seed with tiny messages and a window of
 * one, so liveness is judged by progress: the run fails if no node stores or applies anything new for this long...
 */
const RECOVERY_STALL_TICKS_MAX = 400;
/** ...or if recovery is not complete after this many ticks in all. */
const RECOVERY_TICKS_MAX = 10_000;
const DELIVERY_ROUNDS_PER_TICK_MAX = 50;
/** chance that a live node tries to put its group to rest (quiesce), per tick */
const QUIESCE_TRY_RATE = 0.1;
/** chance that a node crashes in the middle of a durable write (after a leader's appends left), per write */
const MID_WRITE_CRASH_RATE = 0.002;
/** chance that a node's writes in flight (some of them) land, per delivery round */
const WRITE_LANDS_RATE = 0.5;

export function simulate(opts: SimOptions): SimReport {
  return new Simulation(opts).run();
}

class Simulation implements NodeObserver {
  private readonly rng: Rng;
  private readonly work: Rng;
  private readonly faults: Rng;
  private readonly net: Network;
  private readonly checker = new Checker();
  readonly nodes: SimNode[] = [];
  private readonly report: SimReport;
  private readonly trace: ((line: string) => void) | undefined;
  private readonly crashedUntil = new Map<NodeId, number>();
  /** the last reachability each node life heard about each peer ("a.life>b"); absent = reachable */
  private readonly reachable = new Map<string, boolean>();
  private partitionUntil = 0;
  /** off during the recovery phase */
  private faultsOn = true;
  /** probability that a newly elected leader is isolated at once (drawn per seed) */
  private readonly leaderIsolationRate: number;
  private now = 0;
  private valueSeq = 0;
  private lastLeaderTerm = 0;
  private finalRequest: { node: NodeId; life: number; id: RequestId } | undefined;
  private finalDone = false;

  constructor(opts: SimOptions) {
    this.rng = new Rng(opts.seed);
    this.work = this.rng.fork();
    this.faults = this.rng.fork();
    this.trace = opts.trace;
    const n = opts.nodes ?? this.rng.range(3, 7);
    if (n < 1 || n > 7) throw new Error(`--nodes must be 1..7, got ${n}`);
    const membership = opts.membership ?? this.rng.chance(0.5);
    // With membership changes, start from three voters and let the workload add the spares (often as learners).
    const voters = membership ? Math.min(3, n) : n;
    const netFaults: NetFaults = {
      dropRate: this.rng.next() * 0.1,
      dupRate: this.rng.next() * 0.05,
      delayMinTicks: 1,
      delayMaxTicks: this.rng.range(1, 4),
      reorderRate: this.rng.next() * 0.2,
      spikeTicks: this.rng.range(0, 8),
    };
    this.net = new Network(this.rng.fork(), netFaults);
    this.leaderIsolationRate = this.rng.next() * 0.5;
    const nodeOpts: SimNodeOptions = {
      limits: simLimits(this.rng),
      snapshotEveryEntries: this.rng.range(8, 40),
      snapshotKeepEntries: this.rng.range(0, 10),
      snapshotPadBytes: this.rng.range(0, 300),
      crashMidWrite: () => this.faultsOn && this.faults.chance(MID_WRITE_CRASH_RATE),
      deferStateOnlyWrites: true,
      // not drawn from the rng, so a seed's other draws are the same in both modes
      asyncLeaderWrites: opts.asyncWrites ?? opts.seed % 2 === 1,
    };
    const voterIds = Array.from({ length: voters }, (_, k) => k + 1);
    for (let id = 1; id <= n; id++) {
      const disk = id <= voters ? MemoryStorage.bootstrap(voterIds) : new MemoryStorage();
      this.nodes.push(new SimNode(id, disk, this.rng.fork(), nodeOpts, this));
    }
    this.report = {
      seed: opts.seed,
      nodes: n,
      steps: opts.steps ?? 300,
      membership,
      asyncWrites: nodeOpts.asyncLeaderWrites === true,
      ticks: 0,
      acked: 0,
      readsOk: 0,
      failedResults: 0,
      messages: 0,
      elections: 0,
      rests: 0,
    };
    this.log(`seed=${opts.seed} nodes=${n} voters=${voters} membership=${membership} net=${JSON.stringify(netFaults)}`);
  }

  run(): SimReport {
    try {
      for (const node of this.nodes) node.start();
      for (let t = 0; t < this.report.steps; t++) {
        this.injectFaults();
        this.workload();
        this.tick();
      }
      this.recover();
    } catch (e) {
      this.report.violation = e instanceof Violation ? e.message : `exception: ${(e as Error).stack ?? String(e)}`;
      this.log(`VIOLATION at t=${this.now}: ${this.report.violation}`);
    }
    this.report.ticks = this.now;
    this.report.acked = this.checker.ackedCount;
    this.report.readsOk = this.checker.readsOk;
    this.report.failedResults = this.checker.failedResults;
    this.report.messages = this.net.delivered;
    return this.report;
  }

  private log(line: string): void {
    this.trace?.(line);
  }

  // ------------------------------------------------------------------ one tick

  /**
   * What a transport would report about its sessions (etcd's ReportUnreachable, and its reverse): each live
   * node hears, once per change, that a peer it cannot reach (partitioned off or crashed) is down, and that
   * it is up again. The network still drops what it drops; a report changes how leaders replicate, and a
   * follower told its leader is down campaigns within 1 + rank ticks (Raft.suspectLeader).
   */
  private reportReachability(): void {
    for (const n of this.nodes) {
      if (!n.rn) continue;
      for (const p of this.nodes) {
        if (p === n) continue;
        const reachable = p.alive && this.net.canReach(n.id, p.id);
        const key = `${n.id}.${n.lives}>${p.id}`; // a restarted node starts without any report
        if ((this.reachable.get(key) ?? true) === reachable) continue;
        this.reachable.set(key, reachable);
        if (reachable) n.rn.reportReachable(p.id);
        else n.rn.reportUnreachable(p.id);
        this.log(`t=${this.now} node ${n.id} hears ${p.id} is ${reachable ? "up" : "down"}`);
      }
    }
  }

  private tick(): void {
    this.reportReachability();
    this.now++;
    this.net.now = this.now;
    for (const node of this.nodes) {
      if (!node.rn) continue;
      // Clock skew: a node's timer sometimes runs slow or fast.
      const r = this.faults.next();
      const ticks = r < 0.03 ? 0 : r < 0.06 ? 2 : 1;
      for (let k = 0; k < ticks; k++) node.rn.tick();
      // a shell puts an idle group to rest (RawNode.quiesce refuses unless its leader has nothing in flight);
      // trying at random moments lets the faults meet resting groups, their last heartbeats and their waking
      if (this.faults.chance(QUIESCE_TRY_RATE) && !node.rn.quiesced && node.rn.quiesce()) {
        this.report.rests++;
        this.log(`t=${this.now} node ${node.id} puts its group to rest`);
      }
    }
    for (const node of this.nodes) this.flush(node);
    for (let round = 0; round < DELIVERY_ROUNDS_PER_TICK_MAX; round++) {
      this.landWrites();
      const due = this.net.takeDue();
      if (due.length === 0) break;
      const touched = new Set<SimNode>();
      for (const m of due) {
        const node = this.nodes[m.to - 1];
        if (!node?.rn) continue;
        this.log(`t=${this.now} deliver ${describeMessage(m)}`);
        node.rn.step(m);
        touched.add(node);
      }
      for (const node of touched) this.flush(node);
    }
    this.checker.afterStep(this.nodes);
    for (const node of this.nodes) {
      const r = node.rn?.raft;
      if (r && r.role === "leader" && r.term > this.lastLeaderTerm) {
        this.lastLeaderTerm = r.term;
        this.report.elections++;
        this.log(`t=${this.now} node ${node.id} leads term ${r.term}`);
        this.maybeIsolateNewLeader(node);
      }
    }
  }

  /** Writes in flight land at random moments, some of them at a time (asynchronous leader writes). */
  private landWrites(): void {
    for (const node of this.nodes) {
      if (!node.rn || node.writesInFlight === 0 || !this.faults.chance(WRITE_LANDS_RATE)) continue;
      const n = this.faults.range(1, node.writesInFlight);
      this.log(`t=${this.now} node ${node.id}: ${n} of ${node.writesInFlight} writes in flight land`);
      node.landWrites(n);
      this.flush(node);
    }
  }

  private flush(node: SimNode): void {
    for (const m of node.processReady()) this.net.send(m);
    if (!node.alive && !this.crashedUntil.has(node.id)) {
      this.crashedUntil.set(node.id, this.now + this.faults.range(1, 80));
      this.log(`t=${this.now} crash ${node.id} in the middle of a write`);
    }
  }

  // ------------------------------------------------------------------ faults

  private injectFaults(): void {
    const f = this.faults;
    if (this.net.partitioned && this.now >= this.partitionUntil) {
      this.net.heal();
      this.log(`t=${this.now} heal`);
    }
    if (!this.net.partitioned && f.chance(0.015)) {
      const ids = this.nodes.map((n) => n.id);
      const leader = this.currentLeader();
      let groups: NodeId[][];
      const kind = f.next();
      if (leader && kind < 0.3) {
        groups = [[leader.id], ids.filter((id) => id !== leader.id)];
      } else if (leader && kind < 0.45) {
        // the leader keeps its learners, loses its fellow voters: learners must not let it commit
        const learners = leader.rn!.raft.confState.learners;
        const side = [leader.id, ...learners];
        groups = [side, ids.filter((id) => !side.includes(id))];
      } else if (kind < 0.8) {
        // any split, majority or minority, voters or learners
        const side = ids.filter(() => f.chance(0.5));
        groups = [side, ids.filter((id) => !side.includes(id))];
      } else {
        // three ways: often nobody has a majority
        groups = [[], [], []];
        for (const id of ids) groups[f.int(3)]!.push(id);
      }
      this.net.partition(groups.filter((g) => g.length > 0));
      this.partitionUntil = this.now + f.range(5, 100);
      this.log(`t=${this.now} partition ${this.net.describePartition()}`);
    }
    for (const [id, until] of this.crashedUntil) {
      if (this.now >= until) {
        this.crashedUntil.delete(id);
        this.nodes[id - 1]!.start();
        this.log(`t=${this.now} restart ${id}`);
      }
    }
    if (f.chance(0.006)) {
      const alive = this.nodes.filter((n) => n.alive);
      if (alive.length > 0) {
        const victim = f.chance(0.4) ? (this.currentLeader() ?? f.pick(alive)) : f.pick(alive);
        victim.crash();
        this.crashedUntil.set(victim.id, this.now + f.range(1, 80));
        this.log(`t=${this.now} crash ${victim.id}`);
      }
    }
  }

  /**
   * Sometimes cut a freshly elected leader off at once, while it holds entries nobody else has. Repeated, this
   * builds the divergent logs of the paper's Figure 8, where counting replicas of an old-term entry would
   * commit something a later leader overwrites.
   */
  private maybeIsolateNewLeader(leader: SimNode): void {
    if (!this.faultsOn || this.net.partitioned || !this.faults.chance(this.leaderIsolationRate)) return;
    const others = this.nodes.map((n) => n.id).filter((id) => id !== leader.id);
    this.net.partition([[leader.id], others]);
    this.partitionUntil = this.now + this.faults.range(2, 25);
    this.log(`t=${this.now} isolate new leader ${leader.id}`);
  }

  private currentLeader(): SimNode | undefined {
    let best: SimNode | undefined;
    for (const n of this.nodes) {
      const r = n.rn?.raft;
      if (r?.role === "leader" && (!best || r.term > best.rn!.raft.term)) best = n;
    }
    return best;
  }

  // ------------------------------------------------------------------ workload

  private workload(): void {
    const w = this.work;
    const alive = this.nodes.filter((n) => n.alive);
    if (alive.length === 0) return;
    if (w.chance(0.6)) {
      const node = w.pick(alive);
      for (let k = w.range(1, 3); k > 0; k--) this.propose(node);
    }
    if (w.chance(0.15)) {
      const node = w.pick(alive);
      const id = node.rn!.readIndex();
      this.checker.readStarted(node, id);
    }
    if (this.report.membership && w.chance(0.04)) {
      const node = w.pick(alive);
      const cc = this.pickConfChange(node);
      const id = node.rn!.proposeConfChange(cc);
      this.log(`t=${this.now} node ${node.id} proposes ${cc.kind}(${cc.node}) as request ${id}`);
    }
    if (w.chance(0.004)) {
      const node = w.pick(alive);
      const target = w.range(1, this.nodes.length);
      if (node.rn!.raft.prs.isVoter(target)) {
        node.rn!.transferLeader(target);
        this.log(`t=${this.now} node ${node.id} asks to transfer leadership to ${target}`);
      }
    }
    if (w.chance(0.002)) {
      const node = w.pick(alive);
      if (node.rn!.raft.promotable()) {
        node.rn!.campaign();
        this.log(`t=${this.now} node ${node.id} campaigns`);
      }
    }
  }

  /**
   * A membership change that makes sense in the proposer's view of the configuration (join a spare as
   * learner, promote a learner, demote or remove a voter while at least three remain, drop a learner), and
   * now and then a random one to exercise the refusals.
   */
  private pickConfChange(node: SimNode): { kind: ConfChangeKind; node: NodeId } {
    const w = this.work;
    const cs = node.rn!.raft.confState;
    const spares = this.nodes.map((n) => n.id).filter((id) => !cs.voters.includes(id) && !cs.learners.includes(id));
    const options: { kind: ConfChangeKind; node: NodeId }[] = [];
    for (const id of spares) options.push({ kind: "addLearner", node: id }, { kind: "addLearner", node: id });
    for (const id of cs.learners) options.push({ kind: "addVoter", node: id }, { kind: "removeNode", node: id });
    if (cs.voters.length > 3) for (const id of cs.voters) options.push({ kind: "addLearner", node: id }, { kind: "removeNode", node: id });
    if (options.length === 0 || w.chance(0.1)) {
      return { kind: w.pick<ConfChangeKind>(["addVoter", "addLearner", "removeNode"]), node: w.range(1, this.nodes.length) };
    }
    return w.pick(options);
  }

  private propose(node: SimNode): RequestId {
    const value = new TextEncoder().encode(`v${++this.valueSeq}`);
    const id = node.rn!.propose(value);
    this.checker.proposed(node, id, value);
    return id;
  }

  // ------------------------------------------------------------------ recovery (liveness)

  private recover(): void {
    this.log(`t=${this.now} recovery: heal, restart all, faults off`);
    const healedAt = this.now;
    this.faultsOn = false;
    this.net.heal();
    this.net.faults = { dropRate: 0, dupRate: 0, delayMinTicks: 1, delayMaxTicks: 2, reorderRate: 0, spikeTicks: 0 };
    for (const id of this.crashedUntil.keys()) this.nodes[id - 1]!.start();
    this.crashedUntil.clear();
    let progressAt = this.now;
    let appliedSum = -1;
    for (let t = 0; t < RECOVERY_TICKS_MAX && this.now - progressAt < RECOVERY_STALL_TICKS_MAX; t++) {
      this.tick();
      // Progress is replication as well as application: behind a large backlog, commit waits for the new
      // leader's own entry (§5.4.2) while followers catch up entry by entry.
      const sum = this.nodes.reduce((acc, n) => acc + n.app.applied + n.disk.lastIndex(), 0);
      if (sum !== appliedSum) {
        appliedSum = sum;
        progressAt = this.now;
      }
      const leader = this.currentLeader();
      if (!leader) continue;
      if (!this.finalRequest && !this.finalDone) {
        const id = this.propose(leader);
        this.finalRequest = { node: leader.id, life: leader.lives, id };
      }
      if (!this.finalDone) continue;
      const members = this.members(leader);
      if (members.every((n) => n.app.applied >= this.checker.maxAckedIndex)) {
        this.checker.finalCheck(members);
        return;
      }
    }
    const leader = this.currentLeader();
    const state = this.nodes
      .map((n) => `${n.id}:${n.rn?.raft.role ?? "down"}/t${n.rn?.raft.term ?? "-"}/applied ${n.app.applied}`)
      .join(", ");
    throw new Violation(
      `liveness: recovery stalled (nothing stored or applied for ${this.now - progressAt} ticks, ${this.now - healedAt} since healing; leader ${leader?.id ?? "none"}, ` +
        `acked through ${this.checker.maxAckedIndex}, final proposal ${this.finalDone ? "committed" : "pending"}; ${state})`,
    );
  }

  private members(leader: SimNode): SimNode[] {
    const cs = leader.rn!.raft.confState;
    return this.nodes.filter((n) => cs.voters.includes(n.id) || cs.learners.includes(n.id));
  }

  // ------------------------------------------------------------------ NodeObserver

  persisted(node: SimNode, rd: Ready): void {
    if (this.trace) for (const line of describeReady(rd)) this.log(`t=${this.now} n${node.id} ${line}`);
    this.checker.persisted(node, rd.entries);
  }

  sent(node: SimNode, m: Message): void {
    this.checker.sent(node, m.type, m.to, m.term, m.index, m.reject, m.commit);
  }

  applied(node: SimNode, e: Entry): void {
    this.checker.appliedEntry(node, e);
  }

  snapshotInstalled(node: SimNode, s: Snapshot): void {
    this.checker.snapshotInstalled(node, s);
  }

  result(node: SimNode, r: RequestResult): void {
    this.checker.result(node, r);
    const f = this.finalRequest;
    if (f && f.node === node.id && f.life === node.lives && f.id === r.id) {
      this.finalRequest = undefined;
      this.finalDone = r.ok;
      this.log(`t=${this.now} final proposal ${r.ok ? "committed" : `failed: ${r.ok ? "" : r.code}`}`);
    }
  }
}
