/**
 * Node identities. The cluster state machines, the ring and the runners name a master by its stable string
 * node id (brine uses the master's `id`, never `interface`: salt-cluster.md §1, issue #69882). The Raft core
 * names nodes by an integer. The integer is derived from the string by a hash, so every master computes the
 * same number for the same id with no coordination; that is what lets the founders of a group build identical
 * genesis snapshots independently.
 */
import { createHash } from "node:crypto";
import { BrineError } from "./errors.js";
import { validateNodeId } from "./cluster-names.js";
import type { NodeId } from "../workers/raft/core/types.js";

const TWO_TO_32 = 0x1_0000_0000;
/** high bits of a 53-bit id: 21 */
const HIGH_MASK = 0x1f_ffff;

/**
 * valid node ids whose Raft id is remembered, count: a cluster has a handful of masters, and every Raft
 * payload a peer sends is checked against its sender's id (a hash and a validation per payload otherwise)
 */
const raftIdCacheEntriesMax = 1024;
const raftIds = new Map<string, NodeId>();

/** The Raft node id of string node id `nodeId`: the first 53 bits of its SHA-256, never 0. */
export function raftIdOf(nodeId: string): NodeId {
  const known = raftIds.get(nodeId);
  if (known !== undefined) return known;
  validateNodeId(nodeId);
  const h = createHash("sha256").update(nodeId, "utf8").digest();
  const raw = (h.readUIntBE(0, 3) & HIGH_MASK) * TWO_TO_32 + h.readUInt32BE(3);
  const id = raw === 0 ? 1 : raw;
  if (raftIds.size >= raftIdCacheEntriesMax) raftIds.clear(); // only ids that validated get here
  raftIds.set(nodeId, id);
  return id;
}

/**
 * Raft id -> string id for a set of known members. Refuses two ids that hash to the same number (2^-53 per
 * pair, but a collision would silently merge two masters, so it is checked wherever members are added).
 */
export class NodeDirectory {
  private readonly byRaftId = new Map<NodeId, string>();

  constructor(ids: Iterable<string> = []) {
    for (const id of ids) this.add(id);
  }

  add(nodeId: string): NodeId {
    const rid = raftIdOf(nodeId);
    const known = this.byRaftId.get(rid);
    if (known !== undefined && known !== nodeId) {
      throw new BrineError("CLUSTER_BAD_NODE_ID", `${nodeId} and ${known} map to the same raft id ${rid}`);
    }
    this.byRaftId.set(rid, nodeId);
    return rid;
  }

  name(rid: NodeId): string | undefined {
    return this.byRaftId.get(rid);
  }
}

/**
 * The node id a clustered master runs with: its `id`, never `interface` (a bind address, often the wildcard
 * 0.0.0.0, which Salt used as the node id, giving every master the same identity). A wildcard (or otherwise
 * invalid) id is refused here, at startup, with the fix in the message.
 */
export function clusterNodeIdOf(cfg: { id: string }): string {
  try {
    return validateNodeId(cfg.id, "cluster node id (the master's `id`)");
  } catch (e) {
    if (e instanceof BrineError) {
      const why = e.message.replace(/^[^:]*: /, "");
      throw new BrineError(e.code, `${why}; a clustered master is named by its \`id\`, a stable name, not a bind address: set \`id\` in the master config`);
    }
    throw e;
  }
}
