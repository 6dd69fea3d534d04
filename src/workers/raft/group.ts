/**
 * One Raft group as the worker runs it: a RawNode over a GroupStorage, the group's state machines
 * (ClusterGroupState or RingGroupState), and the callers waiting for outcomes. The manager drives it through
 * the Ready contract; this class holds the per-group decisions the shell has to make:
 *
 * - which entries a caller may propose to which group, and their encoding (entries.ts);
 * - applying committed entries: normal entries go to the state machines as they are; a membership change
 *   ("conf" entry, ConfChange with the node's stable id in its context) becomes the CONFIG it amounts to, so
 *   the state machines' voter lists (strings, what the ring and runners show) follow the Raft core's
 *   configuration (numbers) entry for entry;
 * - answering waiters once the Ready that settles them is durable and applied;
 * - when to snapshot, and whether the group is idle enough to quiesce.
 */
import { cbor as codec } from "../../shared/cbor.js";
import { BrineError, isBrineError, type ErrCode } from "../../shared/errors.js";
import { STALE, refused, type ApplyResult } from "./state-machines/apply.js";
import { encodeEntry, type ClusterEntry, type ConfigValue } from "./state-machines/entries.js";
import { ClusterGroupState, RingGroupState } from "./state-machines/groups.js";
import { clusterLimits } from "../../shared/cluster-limits.js";
import { validateNodeId } from "../../shared/cluster-names.js";
import { namedRingVoters } from "./ring-sync.js";
import { decodeConfChange } from "./core/confchange.js";
import { RawNode } from "./core/raw-node.js";
import type { Entry, HardState, Message, Ready, RequestId, RequestResult } from "./core/types.js";
import type { AppliedAs, GroupStatus, MembershipChange, ProposeResult, ReadQuery, ReadResult } from "./api.js";
import type { GroupMeta, GroupWrite } from "./backend.js";
import type { GroupStorage } from "./group-storage.js";
import { LatencyWindow } from "../../shared/metrics/latency-window.js";
import type { WorkerLimits } from "./limits.js";
import { NodeDirectory, raftIdOf } from "../../shared/node-ids.js";


/** The ConfChange context brine writes: CBOR {node_id}. A map, so the peer layer can add e.g. an address. */
export function encodeConfContext(nodeId: string): Uint8Array {
  return Uint8Array.from(codec.encode({ node_id: validateNodeId(nodeId) }));
}

export function decodeConfContext(ctx: Uint8Array | undefined): string {
  if (!ctx || ctx.length === 0) throw new BrineError("CLUSTER_BAD_ENTRY", "membership change without a node id");
  let raw: unknown;
  try {
    raw = codec.decode(ctx);
  } catch (e) {
    throw new BrineError("CLUSTER_BAD_ENTRY", `membership change context is not CBOR: ${(e as Error).message}`);
  }
  const id = typeof raw === "object" && raw !== null ? (raw as Record<string, unknown>).node_id : undefined;
  return validateNodeId(id);
}

/** Which kinds each group takes through propose(). CONFIG is never proposed directly: see changeMembership. */
const PROPOSABLE: Record<GroupMeta["kind"], ReadonlySet<ClusterEntry["kind"]>> = {
  cluster: new Set(["RING_REGISTRY", "ROUTE", "PEER_KEY"]),
  ring: new Set(["RING_CONFIG"]),
};
const READABLE: Record<GroupMeta["kind"], ReadonlySet<ReadQuery>> = {
  cluster: new Set(["membership", "registry", "routing"]),
  ring: new Set(["membership", "ring_config"]),
};

type Waiter =
  | { kind: "propose"; value: ClusterEntry | MembershipChange; at: number; resolve(r: ProposeResult): void; reject(e: BrineError): void }
  | { kind: "read"; query: ReadQuery; resolve(r: ReadResult): void; reject(e: BrineError): void };

export interface GroupOptions {
  self: string;
  limits: WorkerLimits;
  rand: () => number;
  /** a monotonic clock, ms (proposal latencies) */
  now: () => number;
}

export class Group {
  readonly id: string;
  readonly node: RawNode;
  readonly state: ClusterGroupState | RingGroupState;
  /** the durable commit index when the group was opened: replay of the disk is over once applied reaches it */
  readonly commitAtOpen: number;
  private readonly selfRaftId: number;
  private readonly waiters = new Map<RequestId, Waiter>();
  /** index -> what applying it did, for results that arrive after their entry applied; insertion-ordered, bounded */
  private readonly outcomes = new Map<number, ApplyResult>();
  /** proposal → result on this node (committed, applied, answered): the worker's own view of a commit */
  private readonly commitLatency = new LatencyWindow();
  private directory: NodeDirectory;
  /** ticks since the last request, entry or message other than a heartbeat (the quiet period before a rest) */
  private idleTicks = 0;

  constructor(
    readonly meta: GroupMeta,
    readonly storage: GroupStorage,
    private readonly opts: GroupOptions,
  ) {
    this.id = meta.id;
    this.state = meta.kind === "cluster" ? new ClusterGroupState() : new RingGroupState(meta.id, meta.founders);
    const snap = storage.snapshot();
    if (snap.data.length > 0) this.state.restore(snap.data);
    this.selfRaftId = raftIdOf(opts.self);
    this.node = new RawNode({ id: this.selfRaftId, storage, limits: opts.limits.raft, rand: opts.rand, applied: snap.metadata.index, asyncStorageWrites: true });
    this.commitAtOpen = storage.initialState().hardState.commit;
    this.directory = this.buildDirectory();
    // A group whose only voter is this node need not wait an election timeout to lead (it cannot lose).
    if (this.soleVoter()) this.node.campaign();
  }

  /**
   * Whether this Ready's durable part may be written in the background (the manager decides per iteration):
   * a leader's own new entries, with other voters to replicate them (a sole voter gains nothing: its commit
   * waits for its own write anyway), and no snapshot, term or vote change (`durable`: the state before it).
   */
  mayWriteInBackground(rd: Ready, durable: HardState): boolean {
    if (this.node.role !== "leader" || rd.entries.length === 0 || rd.snapshot || this.node.confState.voters.length < 2) return false;
    return !rd.hardState || (rd.hardState.term === durable.term && rd.hardState.vote === durable.vote);
  }

  get kind(): GroupMeta["kind"] {
    return this.meta.kind;
  }

  /** True once committed entries found on disk at open have all been applied again. */
  get caughtUp(): boolean {
    return this.node.raft.log.applied >= this.commitAtOpen;
  }

  private soleVoter(): boolean {
    const cs = this.node.raft.confState;
    return cs.voters.length === 1 && cs.voters[0] === this.selfRaftId;
  }

  private buildDirectory(): NodeDirectory {
    const m = this.state.membership;
    const founders = this.state instanceof RingGroupState ? this.state.foundingVoters : [];
    return new NodeDirectory([this.opts.self, ...m.voters(), ...m.learners(), ...founders, ...this.meta.founders]);
  }

  /** Voters as the state machines see them: the applied CONFIG, or a ring's founders before its first CONFIG. */
  private voterIds(): string[] {
    const m = this.state.membership;
    return this.state instanceof RingGroupState ? namedRingVoters(m, this.state.foundingVoters) : m.voters();
  }

  // ------------------------------------------------------------------ requests

  propose(entry: ClusterEntry): Promise<ProposeResult> {
    if (typeof entry !== "object" || entry === null) throw new BrineError("CLUSTER_BAD_ENTRY", "an entry is {kind, value}");
    if (!PROPOSABLE[this.kind].has(entry.kind)) {
      const why = entry.kind === "CONFIG" ? "membership changes go through changeMembership" : `a ${this.kind} group does not take ${entry.kind}`;
      throw new BrineError("CLUSTER_WRONG_GROUP", why);
    }
    const id = this.node.propose(encodeEntry(entry)); // validates
    const at = this.opts.now();
    return this.wait(id, (resolve, reject) => ({ kind: "propose", value: entry, at, resolve, reject }));
  }

  changeMembership(change: MembershipChange): Promise<ProposeResult> {
    const nodeId = validateNodeId(change.node_id);
    const node = this.directory.add(nodeId); // refuses a raft-id collision with a known member
    // Refuse here what the CONFIG it becomes would be refused for, so the core's configuration and the state
    // machines' lists cannot part ways at apply time.
    const next = nextConfig(this.voterIds(), this.state.membership.learners(), { kind: change.kind, node_id: nodeId });
    if (next.voters.length > clusterLimits.votersMax || next.learners.length > clusterLimits.learnersMax) {
      throw new BrineError("CLUSTER_TOO_MANY", `${this.id}: ${next.voters.length} voters, ${next.learners.length} learners`);
    }
    const id = this.node.proposeConfChange({ kind: change.kind, node, context: encodeConfContext(nodeId) });
    const value: MembershipChange = { kind: change.kind, node_id: nodeId };
    const at = this.opts.now();
    return this.wait(id, (resolve, reject) => ({ kind: "propose", value, at, resolve, reject }));
  }

  read(query: ReadQuery): Promise<ReadResult> {
    this.checkQuery(query);
    const id = this.node.readIndex();
    return this.wait(id, (resolve, reject) => ({ kind: "read", query, resolve, reject }));
  }

  /** This node's applied state, no ReadIndex round (may be stale). */
  readStale(query: ReadQuery): ReadResult {
    this.checkQuery(query);
    return { group: this.id, index: this.node.raft.log.applied, linearizable: false, value: this.query(query) };
  }

  private checkQuery(query: ReadQuery): void {
    if (!READABLE[this.kind].has(query)) throw new BrineError("CLUSTER_WRONG_GROUP", `a ${this.kind} group has no ${JSON.stringify(query)}`);
  }

  private wait<T>(id: RequestId, make: (resolve: (r: T) => void, reject: (e: BrineError) => void) => Waiter): Promise<T> {
    this.wake();
    return new Promise<T>((resolve, reject) => this.waiters.set(id, make(resolve, reject)));
  }

  private query(q: ReadQuery): unknown {
    const s = this.state;
    switch (q) {
      case "membership":
        return s instanceof RingGroupState && s.membership.version < 0
          ? { voters: [...s.foundingVoters], learners: [], version: -1 }
          : s.membership.snapshot();
      case "registry":
        return (s as ClusterGroupState).registry.snapshot();
      case "routing":
        return (s as ClusterGroupState).routing.snapshot();
      case "ring_config":
        return (s as RingGroupState).ringConfig.snapshot();
    }
  }

  /** Fails every waiting caller (group stopped, worker closing or failed). */
  failAll(code: ErrCode, detail: string): void {
    for (const w of this.waiters.values()) w.reject(new BrineError(code, `${this.id}: ${detail}`));
    this.waiters.clear();
  }

  // ------------------------------------------------------------------ Ready steps 3 and 4

  /** Step 3: applies a durable Ready's snapshot and committed entries. Returns whether any state changed. */
  apply(rd: Ready): boolean {
    let changed = false;
    if (rd.snapshot && rd.snapshot.data.length > 0) {
      this.state.restore(rd.snapshot.data);
      changed = true;
    }
    for (const e of rd.committedEntries) {
      if (e.type !== "conf" && e.data.length === 0) continue; // a new leader's empty entry
      const r = e.type === "conf" ? this.applyConf(e) : this.state.apply(e.data, e.index);
      this.remember(e.index, r);
      if (r.outcome === "applied") changed = true;
    }
    if (changed) this.directory = this.buildDirectory();
    return changed;
  }

  /** A committed membership change, as the CONFIG it amounts to (the core has already changed its own config). */
  private applyConf(e: Entry): ApplyResult {
    if (e.index <= this.state.appliedIndex) return STALE;
    try {
      const cc = decodeConfChange(e.data);
      const nodeId = decodeConfContext(cc.context);
      if (raftIdOf(nodeId) !== cc.node) throw new BrineError("CLUSTER_BAD_NODE_ID", `${nodeId} is not raft node ${cc.node}`);
      const value = nextConfig(this.voterIds(), this.state.membership.learners(), { kind: cc.kind, node_id: nodeId });
      return this.state.apply({ kind: "CONFIG", value }, e.index);
    } catch (err) {
      if (!isBrineError(err)) throw err;
      // Deterministic on every replica (and again on every replay), like any refusal.
      return refused(err);
    }
  }

  private remember(index: number, r: ApplyResult): void {
    this.outcomes.set(index, r);
    if (this.outcomes.size > this.opts.limits.applyOutcomesKept) this.outcomes.delete(this.outcomes.keys().next().value!);
  }

  /** Step 4: answers the callers the Ready settles. Reads see the state applied in step 3. */
  deliver(results: readonly RequestResult[]): void {
    for (const r of results) {
      const w = this.waiters.get(r.id);
      if (!w) continue;
      this.waiters.delete(r.id);
      if (!r.ok) {
        w.reject(new BrineError(r.code, `${this.id}: ${r.detail}`));
      } else if (w.kind === "read") {
        w.resolve({ group: this.id, index: r.index, linearizable: true, value: this.query(w.query) });
      } else if (r.kind !== "read") {
        const o = this.outcomes.get(r.index);
        const applied: AppliedAs = o === undefined ? "unknown" : o.outcome;
        const res: ProposeResult = { group: this.id, index: r.index, term: r.term, value: w.value, applied };
        if (o?.outcome === "refused") res.refusal = { code: o.error.code, message: o.error.message };
        this.commitLatency.add(this.opts.now() - w.at);
        w.resolve(res);
      }
    }
  }

  /** After advance(): a snapshot (and compaction) once enough entries applied since the last one. */
  maybeSnapshot(): GroupWrite | undefined {
    const applied = this.node.raft.log.applied;
    const l = this.opts.limits;
    if (applied - this.storage.snapshot().metadata.index < l.snapshotEveryEntries) return undefined;
    return this.storage.stageSnapshot(applied, this.node.raft.confState, this.state.snapshot(), l.snapshotKeepEntries);
  }

  // ------------------------------------------------------------------ ticks and quiescing

  /**
   * One shared tick. After quiesceAfterTicks quiet ticks a leader with nothing waiting on it puts its group
   * to rest (RawNode.quiesce: only when every member holds the whole log, committed and applied; its last
   * heartbeat tells the followers to rest too), before this tick could send a heartbeat. A resting group's
   * tick only advances request deadlines; the core wakes it on a request or a message that needs it, and a
   * follower whose leader's session drops wakes and campaigns (README, "Resting groups").
   */
  tick(): void {
    this.idleTicks++;
    if (this.idleTicks >= this.opts.limits.quiesceAfterTicks && this.waiters.size === 0 && !this.node.quiesced) this.node.quiesce();
    this.node.tick();
  }

  /** Whether the group rests on this node (status). */
  get quiesced(): boolean {
    return this.node.quiesced;
  }

  /** A request or Ready work: the quiet period starts again. */
  wake(): void {
    this.idleTicks = 0;
  }

  step(m: Message): void {
    // heartbeats and their answers are what an idle group exchanges: they do not end its quiet period
    if (m.type !== "MsgHeartbeat" && m.type !== "MsgHeartbeatResp") this.wake();
    this.node.step(m);
  }

  /**
   * The transport's report on a peer's session, for the core to weigh: a leader probes an unreachable
   * follower instead of pipelining to it; a follower that lost its leader's session campaigns early.
   */
  peerReachable(nodeId: string, reachable: boolean): void {
    const r = this.node.raft;
    let id: number;
    try {
      id = raftIdOf(nodeId);
    } catch {
      return; // not a node id: not a member either
    }
    if (!r.prs.isMember(id)) return;
    if (reachable) this.node.reportReachable(id);
    else this.node.reportUnreachable(id);
  }

  /**
   * After a Ready is advanced: stay awake if it did anything, and let a sole voter that restarted lead again
   * once it has replayed (the core refuses to campaign over committed but unapplied membership changes, so
   * the campaign at construction may have been skipped).
   */
  afterAdvance(rd: Ready): void {
    if (rd.entries.length > 0 || rd.committedEntries.length > 0 || rd.results.length > 0) this.wake();
    if (this.node.raft.role === "follower" && this.node.raft.lead === 0 && this.soleVoter() && this.caughtUp) this.node.campaign();
  }

  // ------------------------------------------------------------------ status

  nodeName(raftId: number): string | undefined {
    return this.directory.name(raftId);
  }

  status(): GroupStatus {
    const s = this.node.status();
    const names = (ids: number[]) => ids.map((id) => this.directory.name(id) ?? `raft:${id}`).sort();
    const st: GroupStatus = {
      group: this.id,
      kind: this.kind,
      role: s.role,
      leaderId: s.lead === 0 ? null : (this.directory.name(s.lead) ?? `raft:${s.lead}`),
      term: s.term,
      commit: s.commit,
      applied: s.applied,
      firstIndex: s.firstIndex,
      lastIndex: s.lastIndex,
      snapshotIndex: this.storage.snapshot().metadata.index,
      voters: names(s.confState.voters),
      learners: names(s.confState.learners),
      ringEpoch: this.state.ringTable.epoch,
      quiesced: this.quiesced,
      pendingRequests: s.pendingRequests,
    };
    const latency = this.commitLatency.summary();
    if (latency) st.commitLatency = latency;
    st.commitHistogram = this.commitLatency.histogram();
    st.elections = this.node.raft.elections;
    if (s.progress) {
      st.progress = {};
      for (const [id, p] of s.progress) if (id !== this.selfRaftId) st.progress[this.directory.name(id) ?? `raft:${id}`] = { state: p.state, match: p.match, next: p.next };
    }
    return st;
  }
}

/** The CONFIG a membership change amounts to, from the current lists (pure; validated by the caller's apply). */
export function nextConfig(voters: readonly string[], learners: readonly string[], change: MembershipChange): ConfigValue {
  const v = voters.filter((id) => id !== change.node_id);
  const l = learners.filter((id) => id !== change.node_id);
  if (change.kind === "addVoter") v.push(change.node_id);
  if (change.kind === "addLearner") l.push(change.node_id);
  return { voters: v.sort(), learners: l.sort() };
}
