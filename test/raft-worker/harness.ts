/**
 * In-process clusters of GroupManagers: each node has a MemoryBackend (its disk, which survives a restart) and
 * they talk through a test transport that delivers each message on a later macrotask. Every message a node
 * sends is checked, at the moment the transport receives it, against that node's *durable* state: that is the
 * persistence-order contract (a vote or an acknowledgement is a promise about the disk), observed from outside.
 */
import { MemoryBackend } from "../../src/workers/raft/backend.js";
import { DEFAULT_WORKER_LIMITS, type WorkerLimits } from "../../src/workers/raft/limits.js";
import { GroupManager, type Transport } from "../../src/workers/raft/manager.js";
import type { LeaderWrite } from "../../src/workers/raft/api.js";
import { raftIdOf } from "../../src/shared/node-ids.js";
import type { HardState, Message } from "../../src/workers/raft/core/types.js";
import { Rng } from "../../tools/raft-sim/rng.js";

/** What a node has durably stored for one group, as far as its messages can promise anything. */
export interface Durable {
  hardState: HardState;
  lastIndex: number;
}

/** Fast ticks for tests: elections in tens of ms, generous request deadlines for a loaded machine. */
export const TEST_LIMITS: WorkerLimits = {
  ...DEFAULT_WORKER_LIMITS,
  tickMs: 5,
  raft: { electionTicksMin: 10, heartbeatTicks: 1, requestDeadlineTicks: 2000 },
  quiesceAfterTicks: 5,
};

/**
 * Why sending `m` now would break the persistence contract, given what the sender has durably stored for the
 * group (undefined: fine). Pre-vote traffic carries a term nobody persisted (term + 1), by design. A leader's
 * MsgApp may carry entries it has not yet made durable itself (thesis §10.2.1), but never a commit index
 * beyond its durable log unless a quorum holds that index durably (`quorumDurable`; the leader's own write
 * may land after two followers' acknowledgements): a receiver could apply an entry the cluster then loses.
 */
export function persistenceViolation(durable: Durable | undefined, m: Message, quorumDurable?: (index: number) => boolean): string | undefined {
  if (m.term === 0 || m.type === "MsgPreVote" || m.type === "MsgPreVoteResp") return undefined;
  if (!durable) return `${m.type} sent before anything was durable`;
  const hs = durable.hardState;
  const last = durable.lastIndex;
  if (hs.term < m.term) return `${m.type} at term ${m.term} sent while the durable term is ${hs.term}`;
  if (m.type === "MsgVoteResp" && !m.reject && (hs.vote !== m.to || hs.term !== m.term)) {
    return `vote for ${m.to} at term ${m.term} sent while the durable vote is ${hs.vote} at term ${hs.term}`;
  }
  if (m.type === "MsgAppResp" && !m.reject && last < m.index) return `append acknowledged through ${m.index} while durable only through ${last}`;
  if ((m.type === "MsgApp" || m.type === "MsgHeartbeat") && m.commit > last && !quorumDurable?.(m.commit)) {
    return `${m.type} announces commit ${m.commit} while durable only through ${last}, and not on a quorum`;
  }
  return undefined;
}

/** Whether `m` replicates entries its sender has not yet made durable (the leader's write runs in parallel). */
export function aheadOfOwnWrite(durable: Durable | undefined, m: Message): boolean {
  const ents = m.type === "MsgApp" ? m.entries : undefined;
  return ents !== undefined && ents.length > 0 && (durable?.lastIndex ?? 0) < ents[ents.length - 1]!.index;
}

export interface TestNode {
  name: string;
  backend: MemoryBackend;
  manager: GroupManager;
  up: boolean;
}

export class TestCluster {
  readonly nodes = new Map<string, TestNode>();
  private readonly byRaftId = new Map<number, string>();
  readonly violations: string[] = [];
  /** messages checked, by type */
  readonly checked = new Map<string, number>();
  /** MsgApps that left while the entries they carry were not yet durable on their sender */
  aheadOfOwnWrite = 0;
  /** sees every message a live node sends, before delivery */
  onSend: ((from: string, group: string, m: Message) => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** messages sent and not yet delivered, by sender */
  private readonly inFlight = new Map<string, number>();

  constructor(
    names: string[],
    private readonly opts: { commitDelayMs?: number; seed?: number; limits?: WorkerLimits; leaderWrite?: LeaderWrite } = {},
  ) {
    for (const name of names) {
      this.byRaftId.set(raftIdOf(name), name);
      const backend = new MemoryBackend();
      backend.commitDelayMs = opts.commitDelayMs ?? 0;
      this.nodes.set(name, { name, backend, manager: this.makeManager(name, backend), up: true });
    }
  }

  private makeManager(name: string, backend: MemoryBackend): GroupManager {
    const transport: Transport = { send: (group, msgs) => this.send(name, group, msgs) };
    const seed = (this.opts.seed ?? 1) * 131 + [...name].reduce((a, c) => a * 31 + c.charCodeAt(0), 7);
    return new GroupManager({ self: name, backend, transport, limits: this.opts.limits ?? TEST_LIMITS, rand: new Rng(seed).fn(), ...(this.opts.leaderWrite ? { leaderWrite: this.opts.leaderWrite } : {}) });
  }

  private send(from: string, group: string, msgs: readonly Message[]): void {
    const node = this.nodes.get(from)!;
    if (!node.up) return; // a crashed node's last pump: nothing leaves it
    for (const m of msgs) {
      const durable = node.backend.durable(group);
      const v = persistenceViolation(durable, m, (i) => this.durableOn(group, i) * 2 > this.nodes.size);
      if (v) this.violations.push(`${from}/${group}: ${v}`);
      if (aheadOfOwnWrite(durable, m)) this.aheadOfOwnWrite++;
      this.onSend?.(from, group, m);
      this.checked.set(m.type, (this.checked.get(m.type) ?? 0) + 1);
      const to = this.byRaftId.get(m.to);
      const copy = structuredClone(m);
      this.inFlight.set(from, (this.inFlight.get(from) ?? 0) + 1);
      setImmediate(() => {
        this.inFlight.set(from, this.inFlight.get(from)! - 1);
        const target = to === undefined ? undefined : this.nodes.get(to);
        if (target?.up) target.manager.receive(group, copy);
      });
    }
  }

  /**
   * Founds a cluster of `names`, ticks it, waits for a leader and runs `body` with the leader and one
   * follower; always stops every node afterwards.
   */
  static async run(
    names: string[],
    opts: { commitDelayMs?: number; seed?: number; leaderWrite?: LeaderWrite },
    body: (c: TestCluster, leader: TestNode, follower: TestNode) => Promise<void>,
  ): Promise<void> {
    const c = new TestCluster(names, opts);
    await c.bootstrapAll();
    c.startTicking();
    try {
      const leader = await c.waitFor("a leader", () => c.leader());
      await body(c, leader, [...c.nodes.values()].find((n) => n !== leader)!);
    } finally {
      await c.stop();
    }
  }

  /** How many nodes hold `group`'s log durably through `index`. */
  durableOn(group: string, index: number): number {
    let n = 0;
    for (const node of this.nodes.values()) if ((node.backend.durable(group)?.lastIndex ?? 0) >= index) n++;
    return n;
  }

  node(name: string): TestNode {
    return this.nodes.get(name)!;
  }

  /** Founds the cluster group on every node with all of them as voters (identical genesis everywhere). */
  async bootstrapAll(): Promise<void> {
    const names = [...this.nodes.keys()];
    for (const n of this.nodes.values()) await n.manager.bootstrap(names);
    for (const n of this.nodes.values()) await n.manager.start();
  }

  /** Ticks every live node every `tickMs` of real time. */
  startTicking(tickMs = TEST_LIMITS.tickMs): void {
    this.timer = setInterval(() => {
      for (const n of this.nodes.values()) if (n.up) n.manager.tick();
    }, tickMs);
  }

  /** No more ticks from startTicking (a test then ticks by hand, or shows that something needs no tick). */
  stopTicking(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    for (const n of this.nodes.values()) if (n.up) await n.manager.close();
  }

  /** The current leader of `group` among live nodes (highest term), or undefined. */
  leader(group = "cluster"): TestNode | undefined {
    let best: { n: TestNode; term: number } | undefined;
    for (const n of this.nodes.values()) {
      if (!n.up || !n.manager.has(group)) continue;
      const g = n.manager.status().groups.find((x) => x.group === group)!;
      if (g.role === "leader" && (!best || g.term > best.term)) best = { n, term: g.term };
    }
    return best?.n;
  }

  /**
   * Polls `f` until it gives a value. The bound only turns a hang into a message naming what never happened;
   * it is far above any loaded machine's pace (the conditions depend on progress, never on speed).
   */
  async waitFor<T>(what: string, f: () => T | undefined | false, timeoutMs = 120_000): Promise<T> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const v = f();
      if (v !== undefined && v !== false) return v;
      if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** A crash: the node stops answering and sending; only its backend (disk) survives. */
  crash(name: string): void {
    const n = this.node(name);
    n.up = false;
    void n.manager.close();
  }

  /**
   * Resolves once every message `name` sent has reached its receiver's manager (queued there, not yet
   * stepped): what a transport sees of a crashed peer before it notices the session is gone, since TCP
   * delivers a session's last frames before its close. A test reports a crash after this, as a link would.
   */
  async delivered(name: string): Promise<void> {
    while ((this.inFlight.get(name) ?? 0) > 0) await new Promise((r) => setImmediate(r));
  }

  /** A restart from the node's disk alone. */
  async restart(name: string): Promise<void> {
    const n = this.node(name);
    n.manager = this.makeManager(name, n.backend);
    n.up = true;
    await n.manager.start();
  }
}
