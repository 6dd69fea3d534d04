/**
 * The members' peer-channel keys as the cluster log records them (brine's own machine, entry PEER_KEY): node id
 * -> {pub, host?, port?}, or a tombstone (pub null) once `cluster.remove_member` forgot it (a removed master, whose
 * joins are refused), or a tombstone marked `readmit` once `cluster.readmit_member` let it join again. In
 * isolated-filesystem mode this is how every master, including one that was down, learns that a master was
 * admitted or removed; the Raft worker mirrors it into `cluster_pki_dir/peers/` and its keyring
 * (join-host.ts). Tombstones are kept, so a master that still holds a forgotten key deletes it when it catches
 * up; a later PEER_KEY for the same id (admitted again) replaces the tombstone.
 */
import { BrineError } from "../../../shared/errors.js";
import { clusterLimits } from "../../../shared/cluster-limits.js";
import { APPLIED, STALE, checkIndex, refused, type ApplyResult } from "./apply.js";
import { validatePeerKey, type PeerKeyValue } from "./entries.js";
import { asSnapshotCheck, snapshotField, snapshotObject, snapshotVersion } from "./snapshot-check.js";

/** ids with a key or a tombstone, count (voters and learners together, and those removed) */
const peerKeysMax = clusterLimits.votersMax + clusterLimits.learnersMax + 256;

export interface PeerKeysSnapshot {
  keys: Record<string, { pub: string | null; host?: string; port?: number; readmit?: true }>;
  version: number;
}

export class PeerKeysStateMachine {
  private readonly keys = new Map<string, PeerKeyValue>();
  private appliedVersion = -1;

  apply(value: PeerKeyValue, index: number): ApplyResult {
    checkIndex(index);
    if (index <= this.appliedVersion) return STALE;
    if (!this.keys.has(value.id) && this.keys.size >= peerKeysMax) return refused(new BrineError("CLUSTER_TOO_MANY", `${peerKeysMax} peer keys`));
    this.keys.set(value.id, value);
    this.appliedVersion = index;
    return APPLIED;
  }

  get version(): number {
    return this.appliedVersion;
  }

  /** Every id's entry, sorted by id (copies). */
  all(): PeerKeyValue[] {
    return [...this.keys.keys()].sort().map((id) => ({ ...this.keys.get(id)! }));
  }

  snapshot(): PeerKeysSnapshot {
    const keys: PeerKeysSnapshot["keys"] = {};
    for (const v of this.all()) keys[v.id] = { pub: v.pub, ...(v.host !== undefined ? { host: v.host } : {}), ...(v.port !== undefined ? { port: v.port } : {}), ...(v.readmit ? { readmit: true as const } : {}) };
    return { keys, version: this.appliedVersion };
  }

  /** Absent (a snapshot made before this machine existed): empty. */
  restore(snapshot: unknown): void {
    if (snapshot === undefined) {
      this.keys.clear();
      this.appliedVersion = -1;
      return;
    }
    const o = snapshotObject(snapshot, "peer_keys");
    const raw = snapshotObject(snapshotField(o, "keys"), "peer_keys.keys");
    const next = new Map<string, PeerKeyValue>();
    for (const [id, v] of Object.entries(raw)) {
      const val = asSnapshotCheck("peer_keys", () => validatePeerKey({ ...snapshotObject(v, `peer_keys.${id}`), id }));
      next.set(val.id, val);
    }
    if (next.size > peerKeysMax) throw new BrineError("CLUSTER_BAD_SNAPSHOT", `more than ${peerKeysMax} peer keys`);
    const version = snapshotVersion(snapshotField(o, "version"), "peer_keys");
    this.keys.clear();
    for (const [k, v] of next) this.keys.set(k, v);
    this.appliedVersion = version;
  }
}
