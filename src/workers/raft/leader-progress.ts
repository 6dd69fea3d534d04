/**
 * The leader's view of every member's replication, for `cluster.health` on a follower (peer channel
 * `raft/progress`): a follower knows only its own lag, the leader knows each member's match index. The
 * follower's Raft worker asks the leader of group `cluster` (one request, answered from the leader's status) and
 * the runner reports every member's lag as the leader sees it. A master that is not the leader answers with an
 * error naming the leader it knows, so a view is never passed off as the leader's when it is not.
 */
import { cbor } from "../../shared/cbor.js";
import { BrineError } from "../../shared/errors.js";
import { CLUSTER_RING } from "../../shared/sab-ring/layout.js";
import type { GroupStatus, NodeStatus } from "./api.js";
import type { PeerMessage } from "./peer/peer-types.js";
import type { RingCallChannel } from "./ring-forward.js";

export const LEADER_PROGRESS_CHANNEL = "raft/progress";


/** The leader's view of group `cluster`: its id, term, commit index and each member's match index. */
export interface LeaderView {
  leaderId: string;
  term: number;
  commit: number;
  lastIndex: number;
  progress: Record<string, { state: string; match: number; next: number }>;
}

/** The view a leader's status gives, or undefined when this status is not a leader's of group `cluster`. */
export function leaderViewOf(st: NodeStatus): LeaderView | undefined {
  const g: GroupStatus | undefined = st.groups.find((x) => x.group === CLUSTER_RING);
  if (!g || g.role !== "leader") return undefined;
  return { leaderId: st.nodeId, term: g.term, commit: g.commit, lastIndex: g.lastIndex, progress: { ...(g.progress ?? {}) } };
}

/** A view read off the wire, checked (a member's answer is trusted no further than its shape). */
export function checkLeaderView(raw: unknown): LeaderView {
  const o = raw as Partial<LeaderView> | null;
  const num = (v: unknown) => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
  if (!o || typeof o !== "object" || typeof o.leaderId !== "string" || !num(o.term) || !num(o.commit) || !num(o.lastIndex) || !o.progress || typeof o.progress !== "object") {
    throw new BrineError("CLUSTER_BAD_ENTRY", "a leader's progress answer is malformed");
  }
  for (const [id, p] of Object.entries(o.progress)) {
    if (!p || typeof p !== "object" || !num(p.match) || !num(p.next) || typeof p.state !== "string") throw new BrineError("CLUSTER_BAD_ENTRY", `a leader's progress of ${id} is malformed`);
  }
  return o as LeaderView;
}

export class LeaderProgressService {
  private readonly off: () => void;

  constructor(
    private readonly channel: RingCallChannel,
    private readonly status: () => NodeStatus,
    private readonly timeoutMs: number,
  ) {
    this.off = channel.on(LEADER_PROGRESS_CHANNEL, (m) => this.serve(m));
  }

  close(): void {
    this.off();
  }

  /** This master's view if it leads group `cluster`, else the leader's, asked over the peer channel. */
  async view(): Promise<LeaderView> {
    const st = this.status();
    const own = leaderViewOf(st);
    if (own) return own;
    const leader = st.groups.find((g) => g.group === CLUSTER_RING)?.leaderId;
    if (!leader) throw new BrineError("RAFT_NO_LEADER", "group cluster has no leader to ask for every member's progress");
    return checkLeaderView(cbor.decode(await this.channel.request(leader, LEADER_PROGRESS_CHANNEL, new Uint8Array(0), this.timeoutMs)));
  }

  private serve(m: PeerMessage): Uint8Array {
    if (!m.request) throw new BrineError("CLUSTER_PEER_CHANNEL", `${LEADER_PROGRESS_CHANNEL} takes requests only`);
    const v = leaderViewOf(this.status());
    if (!v) throw new BrineError("RAFT_NO_LEADER", `${this.status().nodeId} does not lead group cluster (the leader it knows: ${this.status().groups.find((g) => g.group === CLUSTER_RING)?.leaderId ?? "none"})`);
    return Uint8Array.from(cbor.encode(v));
  }
}
