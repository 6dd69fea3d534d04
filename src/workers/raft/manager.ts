/**
 * Every Raft group of this node, driven as one: group "cluster" (the control plane: CONFIG, RING_REGISTRY,
 * ROUTE) and one group per hosted ring (RING_CONFIG). No timers, threads or sockets here: the worker shell
 * calls tick() from its one shared timer, hands inbound peer messages to receive(), and provides the backend
 * (disk), the transport (peers) and the ring sink (the shared ring buffer). Tests drive the same class with a
 * MemoryBackend and an in-process transport.
 *
 * The pump, one iteration per group commit (the Ready contract of types.ts, for all groups at once):
 *   0. step queued peer messages and ticks into their groups;
 *   1. take a Ready from every group that has one and stage its durable part (GroupStorage.stage); a
 *      leader's appends, heartbeats and snapshot chunks go to the transport now (sendableBeforePersist),
 *      while its own write runs (thesis §10.2.1: replication does not wait for the leader's fsync);
 *   2. commit every staged write that must be durable (entries, term, vote, snapshots, genesis), plus the
 *      deferred ones, in ONE backend commit: one fsync however many groups and proposals it covers (group
 *      commit). When all of it is a leader's own appends, the commit runs in the background (the groups run
 *      the core with asyncStorageWrites: the leader counts its own copy when the commit reports back, at a
 *      later step 0) and the pump goes on reading the followers' answers; otherwise it is waited for, after
 *      the background commits before it. Proposals that arrive during the fsync go into the next
 *      iteration's Ready, so batches grow with load. A Ready that only moves the commit index or the
 *      membership is not waited for: its write is deferred and joins the next commit (or, after a whole tick
 *      without any, a commit of its own, after the results; or close's). A state whose only change is the
 *      commit index is held back even from the commits of entries: it rides the first commit after each
 *      tick (DurableWrites.tick), one put of the group's state per tick instead of one per commit;
 *   3. only then hand each Ready's other messages to the transport (a vote or an append acknowledgement is a
 *      promise about what is on disk);
 *   4. apply snapshots and committed entries to the state machines, then start/stop ring groups as the
 *      registry says and publish the rings and routes to the shared buffer (a new epoch when they changed);
 *   5. answer the callers the Readies settle (after 4, so a caller who sees its ROUTE committed also finds
 *      it in the shared buffer);
 *   6. advance every group, and stage snapshots for groups that applied enough since their last one.
 * Peer messages and ticks that arrive while an iteration waits for its commit are queued and stepped at the
 * next step 0, so no group is stepped between its ready() and advance(). A leader's own copy counts toward a
 * quorum only once durable: the core moves its own Progress only when the disk reports it (README,
 * "Persistence order", has the safety rules).
 *
 * What is durable at any step 0: every group's term and vote as its storage view holds them (those writes
 * are always waited for), its entries except a leader's own in flight (the core keeps them unstable until
 * reported); commit indexes and memberships may lag (deferred writes). On restart a
 * node therefore replays from a possibly older commit index and learns the rest from the leader (or, as a
 * sole voter, commits it again by re-electing itself), as etcd does with its lazily synced HardState.
 */
import { BrineError, isBrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import type { ClusterEntry, PeerKeyValue } from "./state-machines/entries.js";
import { ClusterGroupState, RingGroupState } from "./state-machines/groups.js";
import { hostedRings, ringTargets, ringVoterChange, routeTargets } from "./ring-sync.js";
import { validateNodeList } from "../../shared/cluster-names.js";
import { clusterLimits } from "../../shared/cluster-limits.js";
import { CLUSTER_RING } from "../../shared/sab-ring/layout.js";
import type { RingTarget } from "../../shared/sab-ring/writer.js";
import { NONE, sendableBeforePersist, type Message, type Ready } from "./core/types.js";
import type { LeaderWrite, MembershipChange, NodeStatus, ProposeResult, ReadOptions, ReadQuery, ReadResult } from "./api.js";
import type { GroupMeta, RaftBackend } from "./backend.js";
import { DurableWrites } from "./durable-writes.js";
import { Group } from "./group.js";
import { GroupStorage } from "./group-storage.js";
import { DEFAULT_WORKER_LIMITS, type WorkerLimits } from "./limits.js";
import { NodeDirectory, raftIdOf } from "../../shared/node-ids.js";
import { NO_STAGES, type StageSink } from "../../shared/metrics/stage-clock.js";

const log = getLogger("brine.raft");

/**
 * The peer hook: where a group's outbound messages go. The multi-master work plugs the peer transport in here
 * (and calls GroupManager.receive with what arrives). Best effort: Raft retries whatever is lost.
 */
export interface Transport {
  send(group: string, messages: readonly Message[]): void;
  /**
   * Writes what send() queued; the manager calls it after each batch of sends (every group's, so a peer gets
   * one frame per batch, not one per group). Absent: send() writes at once.
   */
  flush?(): void;
}

/** No peers (a single master): messages to other nodes have nowhere to go. */
export const NO_PEERS: Transport = { send: () => undefined };

/** Where the applied rings and routes are published: the RingWriter over the shared ring buffer. */
export interface RingSink {
  sync(targets: ReadonlyMap<string, RingTarget>): unknown;
  publishRoutes(routes: ReadonlyMap<string, string | null>): void;
}

export interface ManagerOptions {
  /** this node's stable id */
  self: string;
  backend: RaftBackend;
  transport?: Transport;
  ring?: RingSink;
  limits?: WorkerLimits;
  /** randomness for election timeouts (injected so tests can seed it) */
  rand?: () => number;
  /** a monotonic clock, ms, for the groups' proposal latencies (injected so tests can drive it) */
  now?: () => number;
  /** where the pump's stages add their time (the worker's StageClock; status shows it) */
  stages?: StageSink;
  /** how a leader writes its own new entries (LeaderWrite); "waited" when absent */
  leaderWrite?: LeaderWrite;
}

export class GroupManager {
  readonly self: string;
  private readonly backend: RaftBackend;
  private readonly transport: Transport;
  private readonly ring: RingSink | undefined;
  readonly limits: WorkerLimits;
  private readonly rand: () => number;
  private readonly now: () => number;
  private readonly leaderWrite: LeaderWrite;
  private readonly stages: StageSink;
  private readonly groups = new Map<string, Group>();
  /** staged writes, their commits (waited for or in the background) and the counters */
  private readonly writes: DurableWrites;
  /**
   * Peer messages, the transport's reachability reports and the disk's reports on background commits, in
   * the order they came: a session's last frames arrive before its loss is reported, and a leader that
   * stepped the loss first would take a stale answer from the dead peer as a sign of life (probe ->
   * replicate) and pipeline to it again
   */
  private inbox: ({ group: string; m: Message } | { peer: string; reachable: boolean } | { group: string; durable: { index: number; term: number } })[] = [];
  private pendingTicks = 0;
  private pumping = false;
  private scheduled = false;
  /** work was added while the pump ran */
  private rerun = false;
  private idleWaiters: (() => void)[] = [];
  private fatal: BrineError | undefined;
  private closed = false;
  private ringError: string | null = null;
  private founding: Promise<boolean> | undefined;
  /** the cluster group applied something since ring groups were last reconciled with its registry */
  private ringGroupsDirty = true;
  /** the groups' publish marks at the last publish that succeeded (publishRing) */
  private publishedMark = "";
  /** called once when the node can no longer make progress safely (storage failure, core invariant) */
  onFatal: ((e: BrineError) => void) | undefined;
  /**
   * Called with the cluster log's peer keys (PEER_KEY entries, tombstones included) whenever they changed, and
   * once by notifyPeerKeys() after start: the Raft worker mirrors them into the keyring (join-host.ts).
   */
  onPeerKeys: ((keys: PeerKeyValue[]) => void) | undefined;
  private peerKeysVersion = -2;

  /** Hands onPeerKeys the cluster group's peer keys if they changed since the last call. */
  notifyPeerKeys(): void {
    const g = this.groups.get(CLUSTER_RING);
    if (!g || !this.onPeerKeys || !(g.state instanceof ClusterGroupState)) return;
    const v = g.state.peerKeys.version;
    if (v === this.peerKeysVersion) return;
    this.peerKeysVersion = v;
    try {
      this.onPeerKeys(g.state.peerKeys.all());
    } catch (e) {
      log.error(`recording the cluster's peer keys failed: ${(e as Error).message}`);
    }
  }

  constructor(opts: ManagerOptions) {
    this.self = opts.self;
    raftIdOf(opts.self); // validates the id
    this.backend = opts.backend;
    this.transport = opts.transport ?? NO_PEERS;
    this.ring = opts.ring;
    this.limits = opts.limits ?? DEFAULT_WORKER_LIMITS;
    this.rand = opts.rand ?? Math.random;
    this.now = opts.now ?? (() => performance.now());
    this.leaderWrite = opts.leaderWrite ?? "waited";
    this.stages = opts.stages ?? NO_STAGES;
    this.writes = new DurableWrites(this.backend, this.stages, this.now);
    const cluster = this.backend.load(CLUSTER_RING);
    if (cluster) this.addGroup(cluster.meta, GroupStorage.fromStored(cluster));
  }

  has(group: string): boolean {
    return this.groups.has(group);
  }

  private addGroup(meta: GroupMeta, storage: GroupStorage): Group {
    const g = new Group(meta, storage, { self: this.self, limits: this.limits, rand: this.rand, now: this.now });
    this.groups.set(meta.id, g);
    this.kick();
    return g;
  }

  // ------------------------------------------------------------------ lifecycle

  /**
   * Founds the cluster group with `founders` (stable node ids, self among them) unless this node already has
   * one. The genesis is a pure function of the sorted founders, so founders bootstrapping independently agree
   * on it: a single master passes [self]; the multi-master founding passes self + its peers' ids. Durable
   * before it returns. Returns false when a cluster group already existed (its disk state wins).
   */
  bootstrap(founders: string[]): Promise<boolean> {
    // one founding at a time: a second caller waits for the first and then finds the group
    const prev = this.founding ?? Promise.resolve(false);
    const next = prev.catch(() => false).then(() => this.found(founders));
    this.founding = next;
    return next;
  }

  private async found(founders: string[]): Promise<boolean> {
    this.checkOpen();
    if (this.groups.has(CLUSTER_RING) || this.backend.load(CLUSTER_RING)) return false;
    const voters = validateNodeList(founders, "founders", clusterLimits.votersMax);
    if (!voters.includes(this.self)) throw new BrineError("CLUSTER_BAD_NODE_ID", `founders ${voters.join(",")} do not include this node (${this.self})`);
    const dir = new NodeDirectory();
    const raftIds = voters.map((id) => dir.add(id));
    // The genesis image: the state machines after CONFIG {voters: founders} at the genesis index (1).
    const image = new ClusterGroupState();
    const r = image.apply({ kind: "CONFIG", value: { voters, learners: [] } }, 1);
    if (r.outcome !== "applied") throw r.outcome === "refused" ? r.error : new BrineError("CLUSTER_BAD_ENTRY", "genesis CONFIG not applied");
    const meta: GroupMeta = { id: CLUSTER_RING, kind: "cluster", founders: voters };
    const { storage, write } = GroupStorage.genesis(meta, raftIds, image.snapshot());
    await this.backend.commit([write]);
    this.addGroup(meta, storage);
    log.info(`founded raft group "${CLUSTER_RING}" with voters ${voters.join(", ")}`);
    return true;
  }

  /**
   * Joins an existing cluster: hosts an empty cluster group (no configuration, so it never campaigns) that
   * learns everything from the leader's snapshot once the leader adds this node (as a learner, then a voter).
   * Durable before it returns. Returns false when a cluster group already existed.
   */
  join(): Promise<boolean> {
    const prev = this.founding ?? Promise.resolve(false);
    const next = prev.catch(() => false).then(async () => {
      this.checkOpen();
      if (this.groups.has(CLUSTER_RING) || this.backend.load(CLUSTER_RING)) return false;
      const meta: GroupMeta = { id: CLUSTER_RING, kind: "cluster", founders: [] };
      const { storage, write } = GroupStorage.empty(meta);
      await this.backend.commit([write]);
      this.addGroup(meta, storage);
      log.info(`joining: raft group "${CLUSTER_RING}" waits for the leader's snapshot`);
      return true;
    });
    this.founding = next;
    return next;
  }

  /** Replays what is on disk (every group, started as the registry says) and publishes the ring once. */
  async start(): Promise<void> {
    await this.idle();
    // Ring groups also start when the replay changed nothing (a snapshot already held the registry).
    if (this.reconcileRingGroups()) await this.idle();
    this.publishRing();
    if (this.fatal) throw this.fatal;
  }

  /**
   * Before a graceful stop: every group this node leads together with other voters is asked to hand its
   * leadership over (RawNode.handOffTarget picks the successor, the core's transfer sends it TimeoutNow once
   * it holds the whole log), so the cluster does not wait an election timeout for a master that is leaving.
   * Returns the groups asked; `leadsAny` says when they are done. The caller bounds the wait.
   */
  handOff(): string[] {
    if (this.closed || this.fatal) return [];
    const asked: string[] = [];
    for (const g of this.groups.values()) {
      const target = g.node.handOffTarget();
      if (target === NONE) continue;
      g.wake();
      g.node.transferLeader(target);
      asked.push(g.id);
      log.info(`${g.id}: stopping; leadership handed to raft ${target} (${g.nodeName(target) ?? "unknown name"})`);
    }
    if (asked.length > 0) this.kick();
    return asked;
  }

  /** Whether this node still leads any of `groups`. */
  leadsAny(groups: readonly string[]): boolean {
    return groups.some((id) => this.groups.get(id)?.node.role === "leader");
  }

  /** Stops: every waiting caller gets RAFT_STOPPED, the last commit finishes, the backend closes. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const g of this.groups.values()) g.failAll("RAFT_STOPPED", "the raft worker is stopping");
    await this.idle();
    // deferred commit indexes: not needed for safety, but a clean stop replays nothing it need not
    if (!this.fatal && this.writes.pending > 0) await this.writes.commitAll().catch((e: unknown) => this.die(e));
    await this.backend.close();
  }

  private checkOpen(): void {
    if (this.fatal) throw this.fatal;
    if (this.closed) throw new BrineError("RAFT_STOPPED", "the raft worker is stopping");
  }

  /** Resolves when the pump has nothing left to do and no background commit is in flight. */
  async idle(): Promise<void> {
    for (;;) {
      if (this.pumping || this.scheduled) await new Promise<void>((r) => this.idleWaiters.push(r));
      else if (this.writes.inFlightCount > 0) await this.writes.drain();
      else return;
    }
  }

  // ------------------------------------------------------------------ inputs

  /** One tick of the shared timer, for every group. */
  tick(): void {
    if (this.closed || this.fatal) return;
    this.pendingTicks++;
    this.kick();
  }

  /** A message from a peer for `group` (the transport's inbound hook). Unknown groups are ignored. */
  receive(group: string, m: Message): void {
    if (this.closed || this.fatal) return;
    this.inbox.push({ group, m });
    this.kick();
  }

  /**
   * The transport's word on a peer's session (etcd's ReportUnreachable, and its reverse): down, every group
   * this node leads probes that peer instead of pipelining to it, so a dead peer does not pile up appends;
   * up, the probe goes at once. Stepped at the next step 0 like any input, in order with the peer messages.
   */
  peerReachable(nodeId: string, reachable: boolean): void {
    if (this.closed || this.fatal || nodeId === this.self) return;
    this.inbox.push({ peer: nodeId, reachable });
    this.kick();
  }

  /**
   * The founders of active ring `ringId` as this master's applied registry lists them (sorted), undefined when
   * the ring is not active here: who hosts the ring's group (ring-forward.ts asks them).
   */
  ringFounders(ringId: string): string[] | undefined {
    const cluster = this.groups.get(CLUSTER_RING);
    const r = cluster ? (cluster.state as ClusterGroupState).registry.get(ringId) : undefined;
    return r?.status === "active" ? [...r.founding_voters] : undefined;
  }

  /** Ring `ringId` as this master has applied it: its registry record, and its policy when hosted here. */
  ringState(ringId: string): { record?: { founding_voters: string[]; status: string }; members?: "self" | "voters"; replicas?: number } {
    const cluster = this.groups.get(CLUSTER_RING);
    const record = cluster ? (cluster.state as ClusterGroupState).registry.get(ringId) : undefined;
    const ring = this.groups.get(ringId)?.state;
    const policy = ring instanceof RingGroupState ? { members: ring.ringConfig.members, replicas: ring.ringConfig.replicas } : {};
    return { ...(record ? { record } : {}), ...policy };
  }

  private groupOf(group: string): Group {
    this.checkOpen();
    const g = this.groups.get(group);
    if (!g) throw new BrineError("RAFT_UNKNOWN_GROUP", JSON.stringify(group));
    return g;
  }

  async propose(group: string, entry: ClusterEntry): Promise<ProposeResult> {
    const p = this.groupOf(group).propose(entry);
    this.kick();
    return p;
  }

  async changeMembership(group: string, change: MembershipChange): Promise<ProposeResult> {
    const p = this.groupOf(group).changeMembership(change);
    this.kick();
    return p;
  }

  async read(group: string, query: ReadQuery, opts: ReadOptions = {}): Promise<ReadResult> {
    const g = this.groupOf(group);
    if (opts.stale) return g.readStale(query);
    const p = g.read(query);
    this.kick();
    return p;
  }

  /**
   * Ring membership follows the cluster's voters (ring-sync.ts, ringVoterChange): for every ring whose group
   * this node leads, proposes the next change (one per ring per call; the worker calls this on its timer).
   * Resolves with the changes made; a change that fails is logged and tried again on a later call.
   */
  async followRingVoters(): Promise<{ ring: string; change: MembershipChange }[]> {
    const cluster = this.groups.get(CLUSTER_RING);
    if (!cluster || this.closed || this.fatal) return [];
    const clusterVoters = cluster.status().voters;
    const made: { ring: string; change: MembershipChange }[] = [];
    for (const [id, g] of this.groups) {
      if (id === CLUSTER_RING || !(g.state instanceof RingGroupState)) continue;
      const st = g.status();
      if (st.role !== "leader" || st.learners.length > 0) continue;
      const record = (cluster.state as ClusterGroupState).registry.get(id);
      if (record?.status !== "active") continue;
      const change = ringVoterChange(record.founding_voters, clusterVoters, st.voters, this.self);
      if (!change) continue;
      log.info(`ring ${id} follows the cluster's voters: ${change.kind} ${change.node_id} (cluster voters ${clusterVoters.join(", ")}; ring voters ${st.voters.join(", ")})`);
      try {
        await this.changeMembership(id, change);
        made.push({ ring: id, change });
      } catch (e) {
        log.warning(`ring ${id}: ${change.kind} ${change.node_id} failed, tried again later: ${(e as Error).message}`);
      }
    }
    return made;
  }

  status(): NodeStatus {
    return {
      nodeId: this.self,
      raftId: raftIdOf(this.self),
      tickMs: this.limits.tickMs,
      groups: [...this.groups.values()].map((g) => g.status()),
      ringError: this.ringError,
      commits: this.writes.commits,
      entriesWritten: this.writes.entriesWritten,
      ...(this.writes.commits > 0 ? { durableCommit: this.writes.commitTimes.summary()! } : {}),
      leaderWrite: this.leaderWrite,
      backgroundCommits: this.writes.backgroundCommits,
    };
  }

  // ------------------------------------------------------------------ the pump

  /**
   * Schedules a pump run for the next macrotask, so everything queued in this one joins one batch. While the
   * pump runs, it only notes that there is more (callers resuming in microtasks can add work after the pump's
   * last look; the pump checks the note before it stops).
   */
  private kick(): void {
    if (this.fatal) return;
    if (this.pumping) {
      this.rerun = true;
      return;
    }
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.pump();
    });
  }

  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (;;) {
        this.rerun = false;
        const worked = await this.iterate(); // one group commit per iteration
        // nothing between this check and `finally` yields, so no kick() can slip past it
        if (this.fatal || (!worked && !this.rerun)) break;
      }
    } catch (e) {
      this.die(e);
    } finally {
      this.pumping = false;
      if (this.rerun && !this.fatal) {
        this.rerun = false;
        this.kick();
      } else if (!this.scheduled) {
        const waiters = this.idleWaiters;
        this.idleWaiters = [];
        for (const w of waiters) w();
      }
    }
  }

  /** One iteration; returns false when there was nothing to do. */
  private async iterate(): Promise<boolean> {
    // Deferred writes are flushed on their own only after a whole tick without any commit: while there is
    // traffic, the first commit after each tick carries the latest states (DurableWrites.tick), and a flush of
    // its own would hold the next proposal's write behind one more fsync.
    const st = this.stages;
    const writes = this.writes;
    let t = st.now();
    const ticked = this.absorb();
    st.add("pump.step", t);
    const flushIdle = ticked && writes.tick();
    const staged: { g: Group; rd: Ready; later: Message[] }[] = [];
    // this iteration's commit may run in the background (LeaderWrite): every durable part is a leader's own appends
    let background = this.leaderWrite === "background";
    for (const g of this.groups.values()) {
      if (!g.node.hasReady()) continue;
      t = st.now();
      // the term in the view is durable here (a term or vote change is always waited for); entries may be
      // in flight, but the core commits only what a quorum holds durably (asyncStorageWrites)
      const hs = g.storage.initialState().hardState;
      const durable = { term: hs.term, lastIndex: g.node.raft.log.durableLastIndex(), quorumCommits: true };
      const rd = g.node.ready();
      const w = g.storage.stage(rd);
      if (w) writes.stage(w, rd.mustSync);
      // 1. a leader's appends leave now; its own write below runs while they travel
      const early: Message[] = [];
      const later: Message[] = [];
      for (const m of rd.messages) (sendableBeforePersist(m, durable) ? early : later).push(m);
      if (later.length > 0 || (rd.mustSync && !g.mayWriteInBackground(rd, hs))) background = false;
      st.add("pump.ready", t);
      t = st.now();
      if (early.length > 0) this.transport.send(g.id, early);
      st.add("pump.sendEarly", t);
      staged.push({ g, rd, later });
    }
    // every group's early messages leave together, before the commit below blocks this thread
    t = st.now();
    this.transport.flush?.();
    st.add("pump.flush", t);
    if (staged.length === 0 && !writes.mustCommit && !(flushIdle && writes.pending > 0)) return false;
    // 2. durable, all groups at once, when anything of this iteration needs it: waited for, or (a leader's
    // own appends only) in the background, each group told when its entries are durable (step 0)
    background &&= writes.mustCommit && writes.backgroundable();
    if (background) {
      const acks = staged.flatMap(({ g, rd }) => (rd.entries.length > 0 ? [{ group: g.id, durable: lastOf(rd) }] : []));
      writes.commitInBackground(
        () => {
          for (const a of acks) this.inbox.push(a);
          this.kick();
        },
        (e) => this.die(e),
      );
    } else if (writes.mustCommit) await writes.commit();
    // 3. messages that promise what step 2 made durable
    t = st.now();
    for (const { g, later } of staged) if (later.length > 0) this.transport.send(g.id, later);
    this.transport.flush?.();
    st.add("pump.sendLater", t);
    // 4. apply (only what is durable here: the core hands out nothing else), and publish what it now says
    t = st.now();
    let changed = false;
    for (const { g, rd } of staged) {
      if (g.apply(rd)) {
        changed = true;
        if (g.kind === "cluster") this.ringGroupsDirty = true;
      }
    }
    st.add("pump.apply", t);
    t = st.now();
    if (changed) this.publishRing();
    if (changed) this.notifyPeerKeys();
    st.add("pump.publish", t);
    // 5. results, 6. advance
    t = st.now();
    for (const { g, rd } of staged) {
      g.deliver(rd.results);
      g.node.advance(background && rd.entries.length > 0 ? IN_FLIGHT : undefined);
      g.afterAdvance(rd);
      const snap = g.maybeSnapshot();
      if (snap) writes.stage(snap, true);
    }
    // the ring groups the registry asks for (after advance: `caughtUp` counts applied entries)
    if (this.ringGroupsDirty && this.reconcileRingGroups()) this.publishRing();
    st.add("pump.deliver", t);
    // after the results, so that applying never waits for a deferred write
    if (flushIdle && writes.pending > 0) await writes.commit();
    return true;
  }

  /** Step 0: queued peer messages and reachability reports in order, then queued ticks. Returns whether any tick was absorbed. */
  private absorb(): boolean {
    const inbox = this.inbox;
    this.inbox = [];
    for (const input of inbox) {
      if ("peer" in input) {
        for (const g of this.groups.values()) g.peerReachable(input.peer, input.reachable);
        continue;
      }
      if ("durable" in input) {
        // a background commit is durable: the group's leader counts its own copy from now on
        this.groups.get(input.group)?.node.appendDurable(input.durable.index, input.durable.term);
        continue;
      }
      const { group, m } = input;
      const g = this.groups.get(group);
      if (!g) continue;
      try {
        g.step(m);
      } catch (e) {
        // a message the core refuses (misaddressed, local-only kind) is the sender's bug, not ours
        if (isBrineError(e, "RAFT_API_MISUSE")) log.warning(`${group}: dropped message from raft ${m.from}: ${e.message}`);
        else throw e;
      }
    }
    const ticked = this.pendingTicks > 0;
    for (; this.pendingTicks > 0; this.pendingTicks--) for (const g of this.groups.values()) g.tick();
    return ticked;
  }

  /**
   * Starts the ring groups this node hosts (active in the registry, self among the founders) and stops the
   * others. A ring found on disk resumes from it (Salt: re-creating a destroyed ring recovers its state); a new
   * one starts from a genesis built from its founders, identical on every founder, made durable with the next
   * commit (before the group's first Ready can send anything, since it is in the same or an earlier commit).
   * Only once the cluster group has replayed what it had on disk: mid-replay registry states are history.
   */
  private reconcileRingGroups(): boolean {
    const cluster = this.groups.get(CLUSTER_RING);
    if (!cluster || !cluster.caughtUp) return false;
    this.ringGroupsDirty = false;
    let changed = false;
    const want = new Set(hostedRings(cluster.state as ClusterGroupState, this.self));
    for (const [id, g] of this.groups) {
      if (id === CLUSTER_RING || want.has(id)) continue;
      g.failAll("RAFT_STOPPED", "ring destroyed or no longer hosted here");
      this.groups.delete(id);
      changed = true;
      log.info(`stopped raft group "${id}"`);
    }
    for (const id of want) {
      if (this.groups.has(id)) continue;
      changed = true;
      const stored = this.backend.load(id);
      if (stored) {
        this.addGroup(stored.meta, GroupStorage.fromStored(stored));
        log.info(`resumed raft group "${id}" from disk`);
        continue;
      }
      const founders = (cluster.state as ClusterGroupState).registry.get(id)!.founding_voters;
      const meta: GroupMeta = { id, kind: "ring", founders: [...founders] };
      const dir = new NodeDirectory();
      // the ring's image before its first entry: founders as voters, policy "self", replicas 1
      const image = new RingGroupState(id, founders).snapshot();
      const { storage, write } = GroupStorage.genesis(meta, founders.map((f) => dir.add(f)), image);
      this.writes.stage(write, true);
      this.addGroup(meta, storage);
      log.info(`founded raft group "${id}" with voters ${founders.join(", ")}`);
    }
    return changed;
  }

  /**
   * Publishes every hosted ring and the routes to the shared buffer (level-triggered: no-op when unchanged).
   * Returns at once when no group's publish mark moved since the last publish that succeeded: most applied
   * entries (a ROUTE restating a route, a PEER_KEY) change nothing published, and building and comparing the
   * rings and routes again cost 10-40 µs on each of them, on the path to the leader's answer.
   */
  private publishRing(): void {
    const cluster = this.groups.get(CLUSTER_RING);
    if (!this.ring || !cluster) return;
    let mark = "";
    for (const [id, g] of this.groups) mark += `${id}:${g.state.publishMark()};`;
    if (mark === this.publishedMark && this.ringError === null) return;
    const state = cluster.state as ClusterGroupState;
    const rings = new Map<string, RingGroupState>();
    for (const [id, g] of this.groups) if (g.state instanceof RingGroupState) rings.set(id, g.state);
    try {
      this.ring.sync(ringTargets(state, rings, this.self));
      this.ring.publishRoutes(routeTargets(state));
      this.ringError = null;
      this.publishedMark = mark;
    } catch (e) {
      // The replicated state is fine; only this node's published picture is stale. Say so loudly, keep going.
      this.ringError = (e as Error).message;
      log.error(`publishing the shared ring failed: ${this.ringError}`);
    }
  }

  private die(e: unknown): void {
    const err = isBrineError(e) ? e : new BrineError("RAFT_STORAGE", `raft worker failed: ${(e as Error)?.stack ?? String(e)}`);
    if (this.fatal) return;
    this.fatal = err;
    log.critical(`raft stopped: ${err.message}`);
    for (const g of this.groups.values()) g.failAll(err.code, err.message);
    this.onFatal?.(err);
  }
}

const IN_FLIGHT = { writeInFlight: true } as const;

/** The last entry a Ready hands to the disk. */
function lastOf(rd: Ready): { index: number; term: number } {
  const e = rd.entries[rd.entries.length - 1]!;
  return { index: e.index, term: e.term };
}
