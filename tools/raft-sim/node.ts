/**
 * One simulated Raft node: a RawNode, the MemoryStorage that plays its disk, and a tiny state machine. It runs
 * the shell's Ready loop exactly as the persistence contract says (a leader's appends out first, persist,
 * send the rest, apply, deliver, advance), so the simulator tests the contract as well as the core. A crash
 * drops everything but the disk; a restart rebuilds the node from the disk alone. A crash can also strike in
 * the middle of a write: the appends that went out before it are on the network, nothing of the write is on
 * the disk. With `deferStateOnlyWrites`, a Ready that only moves the commit index or the membership is not
 * written at once (the worker defers it to its next write); a crash loses it. With `asyncLeaderWrites`, a
 * leader's own appends are written in the background as the worker writes them; a crash loses those in flight.
 */
import type { RaftLimits } from "../../src/workers/raft/core/limits.js";
import { RawNode } from "../../src/workers/raft/core/raw-node.js";
import { MemoryStorage } from "../../src/workers/raft/core/storage.js";
import type { ConfState, Entry, HardState, Message, NodeId, Ready, RequestResult, Snapshot } from "../../src/workers/raft/core/types.js";
import { sendableBeforePersist } from "../../src/workers/raft/core/types.js";
import type { Rng } from "./rng.js";
import { fnv1a, mixInt } from "./rng.js";

/** Hooks the checker uses to watch every durable write, message, application and result. */
export interface NodeObserver {
  persisted(node: SimNode, rd: Ready): void;
  sent(node: SimNode, m: Message): void;
  applied(node: SimNode, e: Entry): void;
  snapshotInstalled(node: SimNode, s: Snapshot): void;
  result(node: SimNode, r: RequestResult): void;
}

/**
 * The replicated state machine: a running digest of every applied entry. Two nodes that applied the same
 * entries in the same order have the same digest; a snapshot carries the digest, so an installed snapshot can
 * be checked against what other nodes applied.
 */
export class SimApp {
  applied: number;
  a: number;
  b: number;

  constructor(applied = 0, a = 0x811c9dc5, b = 0x01234567) {
    this.applied = applied;
    this.a = a;
    this.b = b;
  }

  static fromSnapshot(s: Snapshot): SimApp {
    if (s.data.length === 0) return new SimApp(s.metadata.index); // genesis: nothing applied yet
    const o = JSON.parse(new TextDecoder().decode(s.data)) as { i: number; a: number; b: number };
    if (o.i !== s.metadata.index) throw new Error(`snapshot body index ${o.i} != metadata ${s.metadata.index}`);
    return new SimApp(o.i, o.a, o.b);
  }

  apply(e: Entry): void {
    if (e.index !== this.applied + 1) throw new Error(`applied ${e.index} after ${this.applied}: gap or repeat`);
    this.a = mixInt(mixInt(fnv1a(e.data, this.a), e.term), e.index);
    this.b = mixInt(fnv1a(e.data, mixInt(this.b, e.index)), e.term ^ 0x5bd1e995);
    this.applied = e.index;
  }

  digest(): string {
    return `${this.a.toString(16)}.${this.b.toString(16)}`;
  }

  /** Snapshot body, padded so it spans several chunks in the simulator. */
  snapshotData(padBytes: number): Uint8Array {
    return new TextEncoder().encode(JSON.stringify({ i: this.applied, a: this.a, b: this.b, pad: "p".repeat(padBytes) }));
  }
}

export interface SimNodeOptions {
  limits: Partial<RaftLimits>;
  /** take a snapshot after this many applied entries since the last one */
  snapshotEveryEntries: number;
  /** entries kept behind the snapshot when compacting (0 forces snapshot installs on laggards) */
  snapshotKeepEntries: number;
  snapshotPadBytes: number;
  /** asked once per Ready that writes entries, term or vote: crash now, in the middle of the write? */
  crashMidWrite?: () => boolean;
  /** defer writes that only move the commit index or the membership, as the worker does (default: write all) */
  deferStateOnlyWrites?: boolean;
  /**
   * Asynchronous leader writes, as the worker does them (RaftConfig.asyncStorageWrites): a leader's Ready
   * whose only durable content is its own new entries (no term or vote change, no snapshot, no message that
   * waits for the write) is advanced with its write still in flight; the write lands later (landWrites) and
   * is then acknowledged to the core (appendDurable). A crash loses the writes still in flight.
   */
  asyncLeaderWrites?: boolean;
}

/** A write handed to the disk and not yet on it (asyncLeaderWrites). */
interface PendingWrite {
  entries: Entry[];
  hardState?: HardState;
  confState?: ConfState;
}

export class SimNode {
  readonly id: NodeId;
  /** survives crashes */
  readonly disk: MemoryStorage;
  rn: RawNode | undefined;
  app: SimApp;
  private readonly rng: Rng;
  private readonly opts: SimNodeOptions;
  private readonly obs: NodeObserver;
  /** bumped at every start, so request keys stay unique across restarts */
  lives = 0;
  /** a deferred write (commit index, membership): reaches the disk with the next write, or is lost in a crash */
  private deferred: { hardState?: HardState; confState?: ConfState } | undefined;
  /** writes in flight to the disk, in order (asyncLeaderWrites); a crash loses them */
  private inFlight: PendingWrite[] = [];
  /** writes landed while a Ready was out: acknowledged to the core after its advance() */
  private landedUnacked: { index: number; term: number }[] = [];

  constructor(id: NodeId, disk: MemoryStorage, rng: Rng, opts: SimNodeOptions, obs: NodeObserver) {
    this.id = id;
    this.disk = disk;
    this.rng = rng;
    this.opts = opts;
    this.obs = obs;
    this.app = SimApp.fromSnapshot(disk.snapshot());
  }

  get alive(): boolean {
    return this.rn !== undefined;
  }

  /** Boots (or reboots) from the disk: the state machine restarts from the latest snapshot. */
  start(): void {
    const snap = this.disk.snapshot();
    this.app = SimApp.fromSnapshot(snap);
    this.obs.snapshotInstalled(this, snap);
    this.lives++;
    this.rn = new RawNode({
      id: this.id,
      storage: this.disk,
      applied: snap.metadata.index,
      limits: this.opts.limits,
      rand: this.rng.fn(),
      asyncStorageWrites: this.opts.asyncLeaderWrites === true,
    });
  }

  crash(): void {
    this.rn = undefined;
    this.deferred = undefined;
    this.inFlight = [];
    this.landedUnacked = [];
  }

  get asyncLeaderWrites(): boolean {
    return this.opts.asyncLeaderWrites === true;
  }

  /** Writes in flight to this node's disk (asyncLeaderWrites). */
  get writesInFlight(): number {
    return this.inFlight.length;
  }

  /**
   * Lands the first `n` writes in flight on the disk, in order, and acknowledges their entries to the core
   * (at once, or after the Ready that is out, when called from inside the Ready loop).
   */
  landWrites(n = this.inFlight.length, insideReady = false): void {
    for (const w of this.inFlight.splice(0, n)) {
      this.disk.append(w.entries);
      if (w.hardState) this.disk.setHardState(w.hardState);
      if (w.confState) this.disk.setConfState(w.confState);
      this.obs.persisted(this, { entries: w.entries, committedEntries: [], messages: [], results: [], mustSync: true });
      const last = w.entries[w.entries.length - 1]!;
      this.landedUnacked.push({ index: last.index, term: last.term });
    }
    if (!insideReady) this.ackLanded();
  }

  private ackLanded(): void {
    const acks = this.landedUnacked;
    this.landedUnacked = [];
    for (const a of acks) this.rn?.appendDurable(a.index, a.term);
  }

  /** Runs the Ready loop until quiet; returns the messages to put on the network. */
  processReady(): Message[] {
    const rn = this.rn;
    if (!rn) return [];
    const out: Message[] = [];
    for (let guard = 0; rn.hasReady(); guard++) {
      if (guard > 1000) throw new Error(`node ${this.id}: Ready loop does not settle`);
      const rd = rn.ready();
      const durable = { term: this.disk.initialState().hardState.term, lastIndex: this.disk.lastIndex() };
      // 0. a leader's appends leave while its own write runs
      const later: Message[] = [];
      for (const m of rd.messages) {
        if (!sendableBeforePersist(m, durable)) {
          later.push(m);
          continue;
        }
        this.obs.sent(this, m);
        out.push(m);
      }
      if (rd.mustSync && this.opts.crashMidWrite?.()) {
        this.crash();
        return out;
      }
      // 1. durable writes: snapshot, entries, then HardState and membership; deferred when only those moved.
      // A leader's own entries may go in flight (asyncLeaderWrites) when nothing waits for them.
      if (this.opts.asyncLeaderWrites && this.mayWriteInFlight(rn, rd, later)) {
        const w: PendingWrite = { entries: rd.entries };
        // a deferred state goes with it, so the disk never sees an older state after a newer one
        const hardState = rd.hardState ?? this.deferred?.hardState;
        const confState = rd.confState ?? this.deferred?.confState;
        if (hardState) w.hardState = hardState;
        if (confState) w.confState = confState;
        this.deferred = undefined;
        this.inFlight.push(w);
        this.applyAndDeliver(rd);
        rn.advance({ writeInFlight: true });
        this.maybeSnapshot(rn);
        continue;
      }
      if (rd.mustSync || !this.opts.deferStateOnlyWrites) {
        // writes reach the disk in order: those in flight land before this one
        if (rd.snapshot || rd.entries.length > 0 || rd.hardState || rd.confState || this.deferred) this.landWrites(this.inFlight.length, true);
        this.flushDeferred();
        if (rd.snapshot) this.disk.applySnapshot(rd.snapshot);
        this.disk.append(rd.entries);
        if (rd.hardState) this.disk.setHardState(rd.hardState);
        if (rd.confState) this.disk.setConfState(rd.confState);
      } else if (rd.hardState || rd.confState) {
        this.deferred = { ...this.deferred, ...(rd.hardState ? { hardState: rd.hardState } : {}), ...(rd.confState ? { confState: rd.confState } : {}) };
      }
      this.obs.persisted(this, rd);
      // 2. the other messages, now that what they promise is durable
      for (const m of later) {
        this.obs.sent(this, m);
        out.push(m);
      }
      this.applyAndDeliver(rd);
      rn.advance();
      this.ackLanded();
      this.maybeSnapshot(rn);
    }
    return out;
  }

  /** 3. apply, 4. results. */
  private applyAndDeliver(rd: Ready): void {
    if (rd.snapshot) {
      this.app = SimApp.fromSnapshot(rd.snapshot);
      this.obs.snapshotInstalled(this, rd.snapshot);
    }
    for (const e of rd.committedEntries) {
      this.app.apply(e);
      this.obs.applied(this, e);
    }
    for (const r of rd.results) this.obs.result(this, r);
  }

  /**
   * The worker's rule for a write in flight: a leader's Ready whose durable part is its own new entries (and
   * state that moves only the commit index), with no snapshot, no term or vote change, and no message that
   * waits for the write.
   */
  private mayWriteInFlight(rn: RawNode, rd: Ready, later: readonly Message[]): boolean {
    if (rn.role !== "leader" || rd.entries.length === 0 || rd.snapshot || later.length > 0) return false;
    const hs = this.disk.initialState().hardState;
    return !rd.hardState || (rd.hardState.term === hs.term && rd.hardState.vote === hs.vote);
  }

  /** Writes the deferred state (before any later write: a group's writes reach the disk in order). */
  private flushDeferred(): void {
    const d = this.deferred;
    this.deferred = undefined;
    if (d?.hardState) this.disk.setHardState(d.hardState);
    if (d?.confState) this.disk.setConfState(d.confState);
  }

  private maybeSnapshot(rn: RawNode): void {
    const snapIndex = this.disk.snapshot().metadata.index;
    if (this.app.applied - snapIndex < this.opts.snapshotEveryEntries) return;
    // the snapshot's write carries the commit index: the disk never holds a snapshot beyond its durable commit
    this.landWrites();
    this.flushDeferred();
    this.disk.createSnapshot(this.app.applied, rn.raft.confState, this.app.snapshotData(this.opts.snapshotPadBytes));
    const keep = this.rng.int(this.opts.snapshotKeepEntries + 1);
    this.disk.compact(Math.max(this.disk.firstIndex(), this.app.applied - keep));
  }
}
