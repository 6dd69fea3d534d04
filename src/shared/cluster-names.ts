/**
 * Validation of the names that enter replicated state: node ids, ring ids, data types. Checked when an entry
 * is encoded (the proposer refuses) and again when it is decoded (a bad entry from a peer never reaches a
 * state machine).
 *
 * A node id is a stable identity, not a bind address (salt-cluster.md §1, issue #69882: with Salt's default
 * `interface: 0.0.0.0` every master had the same id). Wildcard addresses are therefore refused outright, in
 * any spelling, with or without brackets or a port.
 */
import { BrineError } from "./errors.js";
import { CLUSTER_RING } from "./sab-ring/layout.js";
import { clusterLimits } from "./cluster-limits.js";

const utf8 = new TextEncoder();
/** Printable, no whitespace: C0 controls, space, DEL, C1 controls, and Unicode line/paragraph separators. */
const FORBIDDEN_CHARS = /[\u0000-\u0020\u007f-\u009f\u2028\u2029]/;
/** Ring ids and data types: a conservative charset that is safe in file names, event tags and logs. */
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** True for 0.0.0.0, ::, their long forms, "*" and "0", optionally bracketed and/or with a port. */
export function isWildcardAddress(id: string): boolean {
  let host = id.trim();
  const bracketed = /^\[([^\]]*)\](?::\d+)?$/.exec(host);
  if (bracketed) host = bracketed[1]!;
  else if (/^[^:]*:\d+$/.test(host)) host = host.slice(0, host.lastIndexOf(":"));
  if (host === "*" || host === "0") return true;
  if (/^0+(\.0+){3}$/.test(host)) return true;
  if (/^[0:]+$/.test(host) && host.includes(":")) return true; // ::, ::0, 0:0:0:0:0:0:0:0
  return /^::ffff:0+(\.0+){3}$/i.test(host); // IPv4-mapped 0.0.0.0
}

export function validateNodeId(id: unknown, what = "node id"): string {
  if (typeof id !== "string" || id.length === 0) throw new BrineError("CLUSTER_BAD_NODE_ID", `${what} is empty`);
  if (utf8.encode(id).length > clusterLimits.nodeIdBytesMax) {
    throw new BrineError("CLUSTER_BAD_NODE_ID", `${what} longer than ${clusterLimits.nodeIdBytesMax} bytes`);
  }
  if (FORBIDDEN_CHARS.test(id)) throw new BrineError("CLUSTER_BAD_NODE_ID", `${what} has whitespace or controls`);
  if (isWildcardAddress(id)) throw new BrineError("CLUSTER_BAD_NODE_ID", `${what} ${JSON.stringify(id)} is a wildcard address`);
  return id;
}

/** A list of node ids: each valid, no duplicates, at most `max`. Returned sorted (Salt's canonical form). */
export function validateNodeList(list: unknown, what: string, max: number): string[] {
  if (!Array.isArray(list)) throw new BrineError("CLUSTER_BAD_ENTRY", `${what} is not a list`);
  if (list.length > max) throw new BrineError("CLUSTER_TOO_MANY", `${what}: ${list.length} > ${max}`);
  const ids = list.map((id, i) => validateNodeId(id, `${what}[${i}]`));
  const sorted = [...ids].sort();
  for (let i = 1; i < sorted.length; i++) {
    if (sorted[i] === sorted[i - 1]) throw new BrineError("CLUSTER_BAD_NODE_ID", `${what} lists ${sorted[i]} twice`);
  }
  return sorted;
}

function validateName(name: unknown, what: string, bytesMax: number, code: "CLUSTER_BAD_RING_ID" | "CLUSTER_BAD_ENTRY"): string {
  if (typeof name !== "string" || !NAME_RE.test(name)) {
    throw new BrineError(code, `${what} ${JSON.stringify(name)} must match ${NAME_RE.source}`);
  }
  if (utf8.encode(name).length > bytesMax) throw new BrineError(code, `${what} longer than ${bytesMax} bytes`);
  return name;
}

/** A ring id that may name a route target ("cluster" included). */
export function validateRingRef(id: unknown): string {
  return validateName(id, "ring_id", clusterLimits.ringIdBytesMax, "CLUSTER_BAD_RING_ID");
}

/** A ring id that may be registered: "cluster" is reserved for the voters ring. */
export function validateNamedRingId(id: unknown): string {
  const ring = validateRingRef(id);
  if (ring === CLUSTER_RING) throw new BrineError("CLUSTER_BAD_RING_ID", `"${CLUSTER_RING}" is reserved`);
  return ring;
}

export function validateDataType(dt: unknown): string {
  return validateName(dt, "data_type", clusterLimits.dataTypeBytesMax, "CLUSTER_BAD_ENTRY");
}
