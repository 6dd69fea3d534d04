/**
 * The cluster log's entry kinds and their values, in Salt's shapes (salt-cluster.md §2, LogEntryType), and
 * their encoding: a CBOR array `[kind, value]` where kind is Salt's LogEntryType number.
 *
 *   CONFIG         1  {voters: [id], learners: [id]}                       cluster group and every ring group
 *   RING_CONFIG    3  {members?: "self" | "voters", replicas?: int >= 1}   ring groups; partial updates
 *   RING_REGISTRY  4  {ring_id, founding_voters?: [id], status?: "active" | "destroyed"}   cluster group
 *   ROUTE          5  {data_type, ring_id: string | null}                  cluster group; null = broadcast
 *   PEER_KEY      64  {id, pub: PEM | null, host?, port?}                   cluster group (brine's own kind): a member's
 *                     peer-channel key (isolated filesystem: the join records it), null = forgotten (remove_member)
 *
 * Both directions validate: encodeEntry refuses what a proposer must not propose, decodeEntry refuses what a
 * peer must not make us apply. Node-id lists come back sorted and de-duplicated-or-refused, so every master
 * stores the canonical form. Unknown keys are ignored (Salt does the same), so a newer proposer's extra
 * field does not make an older master diverge.
 */
import { cbor as codec } from "../../../shared/cbor.js";
import { BrineError } from "../../../shared/errors.js";
import { clusterLimits } from "../../../shared/cluster-limits.js";
import { validateDataType, validateNamedRingId, validateNodeId, validateNodeList, validateRingRef } from "../../../shared/cluster-names.js";

/** Salt's LogEntryType numbers for the kinds brine's cluster state machines apply. */
export const ENTRY_KIND = Object.freeze({ CONFIG: 1, RING_CONFIG: 3, RING_REGISTRY: 4, ROUTE: 5, PEER_KEY: 64 });
export type EntryKind = keyof typeof ENTRY_KIND;

export type RingMembers = "self" | "voters";
export type RingStatus = "active" | "destroyed";

export interface ConfigValue {
  readonly voters: readonly string[];
  readonly learners: readonly string[];
}
export interface RingConfigValue {
  readonly members?: RingMembers;
  readonly replicas?: number;
}
export interface RingRegistryValue {
  readonly ring_id: string;
  /** omitted: keep the registered founders (how Salt's destroy entries look) */
  readonly founding_voters?: readonly string[];
  /** omitted means "active", as in Salt */
  readonly status?: RingStatus;
}
export interface RouteValue {
  readonly data_type: string;
  /** null routes the data type to None: broadcast */
  readonly ring_id: string | null;
}

export interface PeerKeyValue {
  readonly id: string;
  /** the member's public key (PEM, SPKI), or null: forgotten */
  readonly pub: string | null;
  /** where its peer channel listens, when known */
  readonly host?: string;
  readonly port?: number;
  /**
   * with pub null only: the member was removed and then re-admitted (cluster.readmit_member), so a join with the
   * secret admits it again; a tombstone without it refuses its joins
   */
  readonly readmit?: true;
}

export type ClusterEntry =
  | { readonly kind: "PEER_KEY"; readonly value: PeerKeyValue }
  | { readonly kind: "CONFIG"; readonly value: ConfigValue }
  | { readonly kind: "RING_CONFIG"; readonly value: RingConfigValue }
  | { readonly kind: "RING_REGISTRY"; readonly value: RingRegistryValue }
  | { readonly kind: "ROUTE"; readonly value: RouteValue };

// Plain maps as plain objects, no record extension (its structure sharing would make an entry's bytes depend
// on what was encoded before it), and byte strings without tags.

/** A decoded CBOR map, checked to be a plain object; only own properties are read from it. */
function plainObject(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new BrineError("CLUSTER_BAD_ENTRY", `${what} is not a map`);
  const proto = Object.getPrototypeOf(v);
  if (proto !== Object.prototype && proto !== null) throw new BrineError("CLUSTER_BAD_ENTRY", `${what} is not a plain map`);
  return v as Record<string, unknown>;
}

function own(o: Record<string, unknown>, key: string): unknown {
  return Object.prototype.hasOwnProperty.call(o, key) ? o[key] : undefined;
}

function validateConfig(raw: unknown): ConfigValue {
  const o = plainObject(raw, "CONFIG");
  const voters = validateNodeList(own(o, "voters"), "voters", clusterLimits.votersMax);
  const learners = validateNodeList(own(o, "learners") ?? [], "learners", clusterLimits.learnersMax);
  // An empty voter set would leave the group unable to elect or commit ever again.
  if (voters.length === 0) throw new BrineError("CLUSTER_BAD_ENTRY", "CONFIG has no voters");
  const both = voters.find((id) => learners.includes(id));
  if (both !== undefined) throw new BrineError("CLUSTER_BAD_NODE_ID", `${both} is both voter and learner`);
  return { voters, learners };
}

function validateRingConfig(raw: unknown): RingConfigValue {
  const o = plainObject(raw, "RING_CONFIG");
  const members = own(o, "members");
  const replicas = own(o, "replicas");
  if (members !== undefined && members !== "self" && members !== "voters") {
    throw new BrineError("CLUSTER_BAD_ENTRY", `members must be "self" or "voters", not ${JSON.stringify(members)}`);
  }
  if (replicas !== undefined && (!Number.isSafeInteger(replicas) || (replicas as number) < 1 || (replicas as number) > clusterLimits.replicasMax)) {
    throw new BrineError("CLUSTER_BAD_ENTRY", `replicas must be an integer in 1..${clusterLimits.replicasMax}`);
  }
  return {
    ...(members !== undefined ? { members: members as RingMembers } : {}),
    ...(replicas !== undefined ? { replicas: replicas as number } : {}),
  };
}

function validateRegistry(raw: unknown): RingRegistryValue {
  const o = plainObject(raw, "RING_REGISTRY");
  const ring_id = validateNamedRingId(own(o, "ring_id"));
  const status = own(o, "status") ?? "active";
  if (status !== "active" && status !== "destroyed") {
    throw new BrineError("CLUSTER_BAD_ENTRY", `status must be "active" or "destroyed", not ${JSON.stringify(status)}`);
  }
  const rawFounders = own(o, "founding_voters");
  const founders = rawFounders === undefined || rawFounders === null ? undefined : validateNodeList(rawFounders, "founding_voters", clusterLimits.votersMax);
  // A ring must start with someone to host it; a destroy may omit them (kept for audit) or correct them.
  if (status === "active" && (founders === undefined || founders.length === 0)) {
    throw new BrineError("CLUSTER_BAD_ENTRY", "an active ring needs founding_voters");
  }
  return { ring_id, status, ...(founders !== undefined ? { founding_voters: founders } : {}) };
}

function validateRoute(raw: unknown): RouteValue {
  const o = plainObject(raw, "ROUTE");
  const data_type = validateDataType(own(o, "data_type"));
  const ring = own(o, "ring_id");
  return { data_type, ring_id: ring === undefined || ring === null ? null : validateRingRef(ring) };
}

/** a PEM public key in a PEER_KEY entry, bytes */
const peerPemBytesMax = 8192;

export function validatePeerKey(raw: unknown): PeerKeyValue {
  const o = plainObject(raw, "PEER_KEY");
  const id = validateNodeId(own(o, "id"), "PEER_KEY id");
  if (/[/\\]/.test(id) || id.startsWith(".")) throw new BrineError("CLUSTER_BAD_NODE_ID", `PEER_KEY id ${JSON.stringify(id)} cannot name a key file`);
  const pub = own(o, "pub") ?? null;
  if (pub !== null && (typeof pub !== "string" || pub.length > peerPemBytesMax || !/^-----BEGIN (RSA )?PUBLIC KEY-----/.test(pub.trim()))) {
    throw new BrineError("CLUSTER_BAD_ENTRY", "PEER_KEY pub must be a public key PEM or null");
  }
  const host = own(o, "host");
  const port = own(o, "port");
  if (host !== undefined && (typeof host !== "string" || host.length === 0 || host.length > 255 || /[\s/\\@]/.test(host))) throw new BrineError("CLUSTER_BAD_ENTRY", "PEER_KEY host is not a host");
  if (port !== undefined && (!Number.isInteger(port) || (port as number) < 1 || (port as number) > 65535)) throw new BrineError("CLUSTER_BAD_ENTRY", "PEER_KEY port is not a port");
  const readmit = own(o, "readmit");
  if (readmit !== undefined && (readmit !== true || pub !== null)) throw new BrineError("CLUSTER_BAD_ENTRY", "PEER_KEY readmit is true, and only with a null pub");
  return { id, pub: pub as string | null, ...(typeof host === "string" ? { host } : {}), ...(typeof port === "number" ? { port } : {}), ...(readmit === true ? { readmit: true as const } : {}) };
}

/** Checks an entry of known kind and returns its canonical form (sorted id lists, defaults filled). */
export function validateEntry(entry: { kind: EntryKind; value: unknown }): ClusterEntry {
  switch (entry.kind) {
    case "CONFIG":
      return { kind: "CONFIG", value: validateConfig(entry.value) };
    case "RING_CONFIG":
      return { kind: "RING_CONFIG", value: validateRingConfig(entry.value) };
    case "RING_REGISTRY":
      return { kind: "RING_REGISTRY", value: validateRegistry(entry.value) };
    case "ROUTE":
      return { kind: "ROUTE", value: validateRoute(entry.value) };
    case "PEER_KEY":
      return { kind: "PEER_KEY", value: validatePeerKey(entry.value) };
    default:
      throw new BrineError("CLUSTER_BAD_ENTRY", `unknown kind ${JSON.stringify((entry as { kind: unknown }).kind)}`);
  }
}

/** Validates and encodes; the bytes are a fresh copy the caller owns. */
export function encodeEntry(entry: ClusterEntry): Uint8Array {
  const canonical = validateEntry(entry);
  const bytes = Uint8Array.from(codec.encode([ENTRY_KIND[canonical.kind], canonical.value]));
  if (bytes.length > clusterLimits.entryBytesMax) {
    throw new BrineError("CLUSTER_TOO_MANY", `entry is ${bytes.length} bytes > ${clusterLimits.entryBytesMax}`);
  }
  return bytes;
}

const KIND_BY_NUMBER = new Map<number, EntryKind>(Object.entries(ENTRY_KIND).map(([k, n]) => [n, k as EntryKind]));

/** Decodes and validates bytes from the log; anything malformed is CLUSTER_BAD_ENTRY (or a more precise code). */
export function decodeEntry(bytes: Uint8Array): ClusterEntry {
  if (!(bytes instanceof Uint8Array) || bytes.length === 0) throw new BrineError("CLUSTER_BAD_ENTRY", "no bytes");
  if (bytes.length > clusterLimits.entryBytesMax) {
    throw new BrineError("CLUSTER_BAD_ENTRY", `${bytes.length} bytes > ${clusterLimits.entryBytesMax}`);
  }
  let raw: unknown;
  try {
    raw = codec.decode(bytes);
  } catch (e) {
    throw new BrineError("CLUSTER_BAD_ENTRY", `not CBOR: ${(e as Error).message}`);
  }
  if (!Array.isArray(raw) || raw.length !== 2 || typeof raw[0] !== "number") {
    throw new BrineError("CLUSTER_BAD_ENTRY", "not a [kind, value] pair");
  }
  const kind = KIND_BY_NUMBER.get(raw[0]);
  if (kind === undefined) throw new BrineError("CLUSTER_BAD_ENTRY", `kind ${raw[0]} is not a cluster entry`);
  return validateEntry({ kind, value: raw[1] });
}
