/**
 * Snapshot transfer, both ends. The leader sends `storage.snapshot()` to a follower whose next entry is
 * compacted away, in `snapshotChunkBytes` chunks, one at a time (Progress state "snapshot"), resending the
 * current chunk after `snapshotResendTicks` without an answer. The follower reassembles the chunks in order
 * (at most `snapshotBytesMax`) and answers each with the next offset it needs (MsgSnapResp), so duplicates,
 * loss and reordering converge; once complete it restores from the snapshot and acknowledges like an append
 * (MsgAppResp), which moves the leader back to replicating.
 */
import { BrineError } from "../../../shared/errors.js";
import type { RaftLimits } from "./limits.js";
import type { RaftLog } from "./log.js";
import type { Progress, ProgressTracker } from "./progress.js";
import type { Message, NodeId, Snapshot, SnapshotMetadata } from "./types.js";
import { newMessage } from "./types.js";

/** What snapshot transfer needs of the state machine (Raft). */
export interface SnapshotHost {
  readonly id: NodeId;
  readonly term: number;
  readonly limits: RaftLimits;
  readonly log: RaftLog;
  readonly prs: ProgressTracker;
  send(m: Message): void;
  /** installs a received snapshot; false when it brings nothing new */
  restore(s: Snapshot): boolean;
}

/** A snapshot being reassembled from chunks (follower side). */
interface InboundSnapshot {
  metadata: SnapshotMetadata;
  totalBytes: number;
  chunks: Uint8Array[];
  received: number;
}

export class SnapshotTransfer {
  private inbound: InboundSnapshot | undefined;

  constructor(private readonly r: SnapshotHost) {}

  // ------------------------------------------------------------------ leader side

  /** Resends the current chunk of any snapshot transfer that has gone unacknowledged too long. */
  tick(): void {
    const r = this.r;
    for (const [id, pr] of r.prs.progress) {
      if (id === r.id || pr.state !== "snapshot" || !pr.transfer) continue;
      pr.transfer.idleTicks++;
      if (pr.transfer.idleTicks >= r.limits.snapshotResendTicks) this.sendChunk(id, pr);
    }
  }

  /** Starts sending the storage's snapshot to `to` (its next entry is compacted); false if it cannot now. */
  maybeSend(to: NodeId, pr: Progress): boolean {
    // Only to a follower we have heard from lately: a snapshot is large, and a dead node would just time out.
    if (!pr.recentActive) return false;
    let snap: Snapshot;
    try {
      snap = this.r.log.storage.snapshot();
    } catch (e) {
      if (e instanceof BrineError && e.code === "RAFT_UNAVAILABLE") return false;
      throw e;
    }
    if (snap.metadata.index === 0) return false;
    pr.becomeSnapshot(snap);
    this.sendChunk(to, pr);
    return true;
  }

  private sendChunk(to: NodeId, pr: Progress): void {
    const r = this.r;
    const t = pr.transfer!;
    const total = t.snapshot.data.length;
    const end = Math.min(total, t.offset + r.limits.snapshotChunkBytes);
    r.send({
      ...newMessage("MsgSnap", r.id, to, r.term),
      snapshot: { metadata: t.snapshot.metadata, offset: t.offset, totalBytes: total, data: t.snapshot.data.subarray(t.offset, end) },
    });
    t.idleTicks = 0;
  }

  /** The follower's MsgSnapResp: the offset it needs next. */
  onResp(m: Message, pr: Progress): void {
    const t = pr.transfer;
    if (pr.state !== "snapshot" || !t || m.index !== pr.pendingSnapshot) return;
    const want = m.snapOffset ?? 0;
    // The follower says which byte it needs next; follow it (it may have restarted its copy, or a reordered
    // acknowledgement may have moved us ahead of it). An answer naming the chunk already in flight is a
    // duplicate: ignoring it keeps duplicated acknowledgements from multiplying chunks. The resend timer
    // covers real loss.
    if (want !== t.offset && want <= t.snapshot.data.length) {
      t.offset = want;
      this.sendChunk(m.from, pr);
    }
  }

  // ------------------------------------------------------------------ follower side

  /** A MsgSnap chunk from the leader. */
  onChunk(m: Message): void {
    const r = this.r;
    const c = m.snapshot;
    if (!c) return;
    const md = c.metadata;
    const ackApp = () => r.send({ ...newMessage("MsgAppResp", r.id, m.from, r.term), index: r.log.lastIndex() });
    if (md.index <= r.log.committed) {
      // Already have it (a resent last chunk whose acknowledgement was lost): say where we are.
      this.inbound = undefined;
      r.send({ ...newMessage("MsgAppResp", r.id, m.from, r.term), index: r.log.committed });
      return;
    }
    const askFor = (offset: number) =>
      r.send({ ...newMessage("MsgSnapResp", r.id, m.from, r.term), index: md.index, snapOffset: offset });
    if (c.totalBytes > r.limits.snapshotBytesMax) return; // refuse to buffer it; the operator must raise the limit
    const cur = this.inbound;
    if (!cur || cur.metadata.index !== md.index || cur.metadata.term !== md.term) {
      if (c.offset !== 0) return askFor(0);
      this.inbound = { metadata: md, totalBytes: c.totalBytes, chunks: [], received: 0 };
    }
    const ib = this.inbound!;
    if (c.offset !== ib.received) return askFor(ib.received); // duplicate or reordered chunk
    ib.chunks.push(c.data);
    ib.received += c.data.length;
    if (ib.received < ib.totalBytes) return askFor(ib.received);
    this.inbound = undefined;
    const data = new Uint8Array(ib.totalBytes);
    let off = 0;
    for (const part of ib.chunks) {
      data.set(part, off);
      off += part.length;
    }
    if (r.restore({ metadata: md, data })) ackApp();
    else r.send({ ...newMessage("MsgAppResp", r.id, m.from, r.term), index: r.log.committed });
  }
}
