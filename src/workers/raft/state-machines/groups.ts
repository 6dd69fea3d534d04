/**
 * The state of the two kinds of Raft group, each applying committed entries in log order:
 *
 * - ClusterGroupState (group "cluster", the control plane): CONFIG -> membership, RING_REGISTRY -> registry,
 *   ROUTE -> routing; its ring table follows the voters (ring "cluster").
 * - RingGroupState (one per named ring this master founded): CONFIG -> the ring's membership, RING_CONFIG ->
 *   its policy; its ring table follows the ring's voters (or its founders until its first CONFIG).
 *
 * apply() takes either encoded bytes from the log or an already decoded entry, never throws for content
 * (apply.ts), and treats an index at or below the last applied one as stale. snapshot()/restore() carry every
 * machine of the group in one CBOR envelope; restore validates everything before changing anything.
 */
import { cbor as codec } from "../../../shared/cbor.js";
import { BrineError, isBrineError } from "../../../shared/errors.js";
import { CLUSTER_RING } from "../../../shared/sab-ring/layout.js";
import { namedRingVoters } from "../ring-sync.js";
import { STALE, checkIndex, refused, type ApplyResult } from "./apply.js";
import { decodeEntry, validateEntry, type ClusterEntry } from "./entries.js";
import { clusterLimits } from "../../../shared/cluster-limits.js";
import { MembershipStateMachine } from "./membership.js";
import { validateNamedRingId, validateNodeList } from "../../../shared/cluster-names.js";
import { RingConfigStateMachine } from "./ring-config.js";
import { RingRegistryStateMachine } from "./ring-registry.js";
import { RingTableState } from "./ring-table.js";
import { RoutingStateMachine } from "./routing.js";
import { PeerKeysStateMachine } from "./peer-keys.js";
import { snapshotField, snapshotObject, snapshotVersion } from "./snapshot-check.js";

const CLUSTER_ENVELOPE = "brine.cluster-group.v1";
const RING_ENVELOPE = "brine.ring-group.v1";

/** Decodes (bytes) or re-validates (object) an entry; a malformed one becomes a refusal, not a throw. */
function toEntry(entry: ClusterEntry | Uint8Array): ClusterEntry | BrineError {
  try {
    return entry instanceof Uint8Array ? decodeEntry(entry) : validateEntry(entry);
  } catch (e) {
    if (isBrineError(e)) return e;
    throw e;
  }
}

function encodeSnapshot(envelope: string, applied: number, machines: Record<string, unknown>): Uint8Array {
  return Uint8Array.from(codec.encode({ __envelope__: envelope, applied, machines }));
}

function decodeSnapshot(bytes: Uint8Array, envelope: string): { applied: number; machines: Record<string, unknown> } {
  if (!(bytes instanceof Uint8Array) || bytes.length > clusterLimits.snapshotBytesMax) {
    throw new BrineError("CLUSTER_BAD_SNAPSHOT", "missing or too large");
  }
  let raw: unknown;
  try {
    raw = codec.decode(bytes);
  } catch (e) {
    throw new BrineError("CLUSTER_BAD_SNAPSHOT", `not CBOR: ${(e as Error).message}`);
  }
  const o = snapshotObject(raw, "snapshot");
  if (snapshotField(o, "__envelope__") !== envelope) throw new BrineError("CLUSTER_BAD_SNAPSHOT", `not a ${envelope}`);
  return {
    applied: snapshotVersion(snapshotField(o, "applied"), "group"),
    machines: snapshotObject(snapshotField(o, "machines"), "machines"),
  };
}

/** What both kinds of group share: the applied index, and the stale/decode/refuse front of apply(). */
abstract class GroupState {
  protected applied = -1;
  /** snapshots restored in this process (a restore may change anything the group publishes) */
  protected restores = 0;

  /** Index of the last entry handed to apply() (applied, refused or malformed), -1 if none. */
  get appliedIndex(): number {
    return this.applied;
  }

  apply(entry: ClusterEntry | Uint8Array, index: number): ApplyResult {
    checkIndex(index);
    if (index <= this.applied) return STALE;
    this.applied = index;
    const e = toEntry(entry);
    if (e instanceof BrineError) return refused(e);
    return this.applyEntry(e, index);
  }

  /** Applies a valid entry; the index is already known to be fresh. */
  protected abstract applyEntry(e: ClusterEntry, index: number): ApplyResult;

  /**
   * Changes whenever what this master publishes from the group may have changed (rings, registry, routes): equal
   * marks mean the shared buffer already shows it, so the pump need not build and compare it all again.
   */
  abstract publishMark(): string;
}

export class ClusterGroupState extends GroupState {
  readonly membership = new MembershipStateMachine();
  readonly registry = new RingRegistryStateMachine();
  readonly routing = new RoutingStateMachine();
  readonly peerKeys = new PeerKeysStateMachine();
  /** ring "cluster": always the voters, replicas 1 */
  readonly ringTable = new RingTableState("voters");

  protected applyEntry(e: ClusterEntry, index: number): ApplyResult {
    switch (e.kind) {
      case "CONFIG": {
        const r = this.membership.apply(e.value, index);
        if (r.outcome === "applied") this.ringTable.update(this.membership.voters(), "voters", 1);
        return r;
      }
      case "RING_REGISTRY":
        return this.registry.apply(e.value, index);
      case "ROUTE":
        return this.routing.apply(e.value, index);
      case "PEER_KEY":
        return this.peerKeys.apply(e.value, index);
      case "RING_CONFIG":
        return refused(new BrineError("CLUSTER_WRONG_GROUP", "RING_CONFIG belongs to a ring's own group"));
    }
  }

  snapshot(): Uint8Array {
    return encodeSnapshot(CLUSTER_ENVELOPE, this.applied, {
      membership_sm: this.membership.snapshot(),
      ring_registry_sm: this.registry.snapshot(),
      routing_sm: this.routing.snapshot(),
      ring_table: this.ringTable.snapshot(),
      peer_keys_sm: this.peerKeys.snapshot(),
    });
  }

  restore(bytes: Uint8Array): void {
    const { applied, machines } = decodeSnapshot(bytes, CLUSTER_ENVELOPE);
    // Restore into scratch machines first: a bad snapshot must leave this group untouched.
    const parts = ["membership_sm", "ring_registry_sm", "routing_sm", "ring_table"].map((k) => snapshotField(machines, k));
    new MembershipStateMachine().restore(parts[0]);
    new RingRegistryStateMachine().restore(parts[1]);
    new RoutingStateMachine().restore(parts[2]);
    new RingTableState("voters").restore(parts[3]);
    const peerKeys = snapshotField(machines, "peer_keys_sm");
    new PeerKeysStateMachine().restore(peerKeys);
    this.membership.restore(parts[0]);
    this.registry.restore(parts[1]);
    this.routing.restore(parts[2]);
    this.ringTable.restore(parts[3]);
    this.peerKeys.restore(peerKeys);
    this.applied = applied;
    this.restores++;
  }

  publishMark(): string {
    return `${this.restores}.${this.ringTable.epoch}.${this.registry.version}.${this.routing.changes}`;
  }
}

export class RingGroupState extends GroupState {
  readonly membership = new MembershipStateMachine();
  readonly ringConfig = new RingConfigStateMachine();
  readonly ringTable = new RingTableState("self");
  readonly foundingVoters: readonly string[];

  /** `foundingVoters` come from the cluster registry; they are the ring's voters until its first CONFIG. */
  constructor(
    readonly ringId: string,
    foundingVoters: readonly string[],
  ) {
    super();
    validateNamedRingId(ringId);
    this.foundingVoters = validateNodeList([...foundingVoters], "founding_voters", clusterLimits.votersMax);
    this.resync();
  }

  protected applyEntry(e: ClusterEntry, index: number): ApplyResult {
    let r: ApplyResult;
    switch (e.kind) {
      case "CONFIG":
        r = this.membership.apply(e.value, index);
        break;
      case "RING_CONFIG":
        r = this.ringConfig.apply(e.value, index);
        break;
      case "RING_REGISTRY":
      case "ROUTE":
      case "PEER_KEY":
        return refused(new BrineError("CLUSTER_WRONG_GROUP", `${e.kind} belongs to the "${CLUSTER_RING}" group`));
    }
    if (r.outcome === "applied") this.resync();
    return r;
  }

  snapshot(): Uint8Array {
    return encodeSnapshot(RING_ENVELOPE, this.applied, {
      ring_id: this.ringId,
      membership_sm: this.membership.snapshot(),
      ring_sm: this.ringConfig.snapshot(),
      ring_table: this.ringTable.snapshot(),
    });
  }

  restore(bytes: Uint8Array): void {
    const { applied, machines } = decodeSnapshot(bytes, RING_ENVELOPE);
    if (snapshotField(machines, "ring_id") !== this.ringId) throw new BrineError("CLUSTER_BAD_SNAPSHOT", `not ring ${this.ringId}`);
    const parts = ["membership_sm", "ring_sm", "ring_table"].map((k) => snapshotField(machines, k));
    new MembershipStateMachine().restore(parts[0]);
    new RingConfigStateMachine().restore(parts[1]);
    new RingTableState("self").restore(parts[2]);
    this.membership.restore(parts[0]);
    this.ringConfig.restore(parts[1]);
    this.ringTable.restore(parts[2]);
    this.applied = applied;
    this.restores++;
  }

  publishMark(): string {
    return `${this.restores}.${this.ringTable.epoch}`;
  }

  /** Feeds the ring table what the ring should contain now. */
  private resync(): void {
    this.ringTable.update(namedRingVoters(this.membership, this.foundingVoters), this.ringConfig.members, this.ringConfig.replicas);
  }
}
