/**
 * Whether a master with no cluster key founds a cluster (makes cluster.pem) in isolated-filesystem mode, or keeps
 * trying to join: a pure decision over what its `cluster_peers` answered to its join attempts (join-host.ts). A
 * split brain is never the default:
 *
 * - a peer that answered with a cluster (it refused us: a wrong secret or fingerprint, a known id) means a cluster
 *   exists: never found, whatever else holds;
 * - `brine_cluster_found` (the operator's explicit request): found;
 * - a master that holds other members' keys was in a cluster and lost its Raft state: it never founds by itself;
 * - no peers configured: found (a one-master cluster others join later);
 * - otherwise found only after `foundWaitMs` since start, when every peer's node id is known (configured as
 *   {id, host, port}, or said in its "no cluster here" answer) and this master's is the lowest (string order),
 *   as with etcd's static initial cluster. A peer that never answered and has no configured id could be the
 *   lowest: wait, and say so.
 */

export interface PeerAnswer {
  /** `host:port` as configured */
  address: string;
  /** the id the `cluster_peers` entry names, if any */
  configuredId?: string;
  /** the last answer: none yet, unreachable, no cluster (with its id), refused (it has a cluster) */
  answer: "none" | "unreachable" | "no-cluster" | "refused";
  /** the id a no-cluster answer carried */
  answeredId?: string;
  /** why it refused */
  refusal?: string;
}

export interface FoundingInput {
  selfId: string;
  explicit: boolean;
  /** other members' keys this master holds in `peers/` (it was in a cluster and lost its Raft state), count */
  formerMemberKeys?: number;
  peers: readonly PeerAnswer[];
  sinceStartMs: number;
  foundWaitMs: number;
}

export type FoundingDecision = { act: "found"; why: string } | { act: "wait"; why: string };

/** how long a first start waits for peers to answer before the lowest id founds, ms */
export const foundWaitMs = 3_000;

export function decideFounding(i: FoundingInput): FoundingDecision {
  const refused = i.peers.filter((p) => p.answer === "refused");
  if (refused.length) {
    return { act: "wait", why: `a cluster exists but refused this master: ${refused.map((p) => `${p.address} (${p.refusal ?? "refused"})`).join("; ")}` };
  }
  if (i.explicit) return { act: "found", why: "brine_cluster_found is set" };
  if (i.formerMemberKeys) {
    return { act: "wait", why: `this master was a member (it holds ${i.formerMemberKeys} member key(s)) and lost its Raft state: it rejoins through a member and never founds by itself (brine_cluster_found overrides)` };
  }
  if (i.peers.length === 0) return { act: "found", why: "no cluster_peers: a one-master cluster" };
  if (i.sinceStartMs < i.foundWaitMs) return { act: "wait", why: `waiting ${Math.ceil((i.foundWaitMs - i.sinceStartMs) / 1000)} s for the peers to answer` };
  const unknown = i.peers.filter((p) => (p.answeredId ?? p.configuredId) === undefined);
  if (unknown.length) {
    return {
      act: "wait",
      why: `no cluster found, and ${unknown.map((p) => p.address).join(", ")} did not answer with its node id, so this master cannot tell whether it has the lowest id and should found (start that master, list it as {id, host, port} in cluster_peers, or set brine_cluster_found: True on exactly one master)`,
    };
  }
  const ids = i.peers.map((p) => (p.answeredId ?? p.configuredId)!);
  const lowest = [i.selfId, ...ids].sort()[0]!;
  if (lowest !== i.selfId) return { act: "wait", why: `no cluster found yet; ${lowest} has the lowest node id and founds it, this master joins then` };
  return { act: "found", why: `no peer has a cluster and ${i.selfId} has the lowest node id of ${[i.selfId, ...ids].sort().join(", ")}` };
}

/** What a joiner's state-sync before promotion reported (the state-sync thread's PeerReport, as far as this rule reads it). */
export interface PromotionSyncReport {
  /** channels whose transfer stopped before its end (the peer went away, a timeout) */
  failed?: string[];
  /** items refused here (a bad path, a saltenv this master does not serve, a non-key at the source) */
  errors: string[];
}

/**
 * Whether a joiner's state-sync holds its promotion: only a channel that did not finish does (it is retried). Items
 * refused here are the source's or the configuration's to fix and a retry would refuse them again, so they are
 * logged and the promotion goes on; holding on them would keep the master a learner for ever.
 */
export function syncHoldsPromotion(r: PromotionSyncReport): string | undefined {
  return r.failed?.length ? `channels ${r.failed.join(", ")} did not finish` : undefined;
}
