/**
 * The cluster options a master needs before it can open the peer channel, validated once at start-up with
 * Salt's names (salt-protocol.md §10 item 3, salt-cluster.md §1):
 *
 * | option              | meaning                                                          |
 * |---------------------|------------------------------------------------------------------|
 * | `cluster_id`        | name of the cluster; peers of another cluster are refused         |
 * | `cluster_peers`     | the other masters: `host` or `host:port` (`[v6]:port`), port defaults to `cluster_pool_port` |
 * | `cluster_pki_dir`   | holds `peers/<id>.pub`; falls back to `pki_dir` as in 3007        |
 * | `cluster_pool_port` | the peer channel port, default 4520; `cluster_port` is a deprecated alias |
 * | `id`                | this master's node id (never `interface`)                         |
 * | `interface`         | the address the peer channel listens on (a wildcard is fine here)  |
 *
 * A `cluster_peers` entry may also be a mapping `{id, host, port}` (a brine extension): the node id is then
 * checked against the one the peer proves in the handshake. With Salt's plain strings the id is learned from
 * the handshake.
 *
 * Refused at start-up with a BrineError naming the fix: a wildcard or otherwise invalid `id`, a wildcard peer
 * address, a peer listed twice, this master listed as its own peer, a missing `cluster_id`, bad ports, and
 * missing, unreadable or unparsable keys (see loadClusterKeys).
 */
import path from "node:path";
import { optionDefault } from "./config/options.js";
import { BrineError } from "./errors.js";
import { getLogger, type Logger } from "./log.js";
import { clusterNodeIdOf } from "./node-ids.js";
import { FileKeyring, checkSelfEntry, isKeyFileId, loadSelfIdentity, publishSelfKey, type PeerIdentity } from "./cluster-keys.js";
import type { PeerLimits } from "../workers/raft/peer/limits.js";
import type { PeerTransportOptions } from "../workers/raft/peer/peer-transport.js";
import { isWildcardAddress, validateNodeId } from "./cluster-names.js";
import { normalizeFingerprint } from "./cluster-fingerprint.js";

/** Salt's default `cluster_pool_port` (declared in src/shared/config/schema.ts). */
export const DEFAULT_CLUSTER_POOL_PORT = optionDefault("cluster_pool_port") as number;
/** UTF-8 bytes of `cluster_id` (it travels in every handshake) */
const clusterIdBytesMax = 128;
/** peers one master may list, count (every pair of masters holds two connections) */
export const clusterPeersMax = 64;

/** The options read here, as the config loader leaves them (untrusted shapes: YAML can hold anything). */
export interface ClusterConfigInput {
  id: unknown;
  interface: unknown;
  pki_dir: unknown;
  cluster_id: unknown;
  cluster_peers: unknown;
  cluster_pki_dir: unknown;
  cluster_pool_port?: unknown;
  cluster_port?: unknown;
  cluster_isolated_filesystem?: unknown;
  cluster_secret?: unknown;
  cluster_pub_fingerprint?: unknown;
  cluster_join_timeout?: unknown;
  cluster_min_voters?: unknown;
  brine_cluster_allow_empty_secret?: unknown;
  brine_cluster_found?: unknown;
  hash_type?: unknown;
}

/**
 * Isolated-filesystem mode (`cluster_isolated_filesystem`): each master has its own `cluster_pki_dir`, and a new
 * master joins with the secret (src/workers/raft/peer/join.ts) instead of finding keys in a shared directory.
 */
export interface IsolatedSettings {
  /** `cluster_secret` ("" only with brine_cluster_allow_empty_secret) */
  secret: string;
  /** `cluster_pub_fingerprint`, as given (checked to be a fingerprint), or null */
  fingerprint: string | null;
  /** the hash the fingerprint is made with (`hash_type`, as `salt-key -F` prints it) */
  hashType: string;
  /** `cluster_join_timeout`, ms */
  joinTimeoutMs: number;
  /** `brine_cluster_found`: found now when no peer answers with a cluster, whatever the ids */
  found: boolean;
}

export interface PeerAddress {
  host: string;
  port: number;
  /** the peer's node id when the entry names it; otherwise learned (and proven) in the handshake */
  id?: string;
}

export interface ClusterSettings {
  clusterId: string;
  /** this master's node id: its `id` */
  nodeId: string;
  listen: { host: string; port: number };
  peers: PeerAddress[];
  pkiDir: string;
  clusterPkiDir: string;
  /** `cluster_pki_dir/peers`: one `<id>.pub` per master */
  peerKeyDir: string;
  /** set in isolated-filesystem mode */
  isolated?: IsolatedSettings;
  /** `cluster_min_voters` (remove_member's floor; a warning at a promotion that leaves fewer) */
  minVoters: number;
}

function configError(detail: string): BrineError {
  return new BrineError("CLUSTER_CONFIG", detail);
}

function parsePort(v: unknown, what: string): number {
  const n = typeof v === "string" && /^\d+$/.test(v.trim()) ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 65535) throw configError(`${what} must be a port number (1-65535), got ${JSON.stringify(v)}`);
  return n;
}

/** `cluster_pool_port`, or the deprecated `cluster_port` when only it was set (3008.0-3008.2 read 55596 from it). */
export function clusterPoolPort(cfg: Pick<ClusterConfigInput, "cluster_pool_port" | "cluster_port">, log: Logger = getLogger("brine.cluster")): number {
  const hasPool = cfg.cluster_pool_port !== undefined && cfg.cluster_pool_port !== null;
  const hasAlias = cfg.cluster_port !== undefined && cfg.cluster_port !== null;
  if (!hasAlias) return hasPool ? parsePort(cfg.cluster_pool_port, "cluster_pool_port") : DEFAULT_CLUSTER_POOL_PORT;
  const alias = parsePort(cfg.cluster_port, "cluster_port");
  const pool = hasPool ? parsePort(cfg.cluster_pool_port, "cluster_pool_port") : DEFAULT_CLUSTER_POOL_PORT;
  if (pool === DEFAULT_CLUSTER_POOL_PORT || pool === alias) {
    log.warning(`cluster_port is deprecated; use cluster_pool_port (using ${alias})`);
    return alias;
  }
  log.warning(`cluster_port (${alias}) is deprecated and ignored: cluster_pool_port (${pool}) is set`);
  return pool;
}

function checkHost(host: string, what: string): string {
  if (host.length === 0 || /[\s/\\@]/.test(host)) throw configError(`${what}: ${JSON.stringify(host)} is not a host name or address`);
  if (isWildcardAddress(host)) {
    throw new BrineError("CLUSTER_BAD_NODE_ID", `${what}: ${JSON.stringify(host)} is a wildcard address; list each peer's reachable address`);
  }
  return host;
}

/**
 * One `cluster_peers` entry: `host`, `host:port`, `[v6]`, `[v6]:port`, a bare IPv6 address (no port), or
 * `{id?, host, port?}`.
 */
export function parsePeerEntry(entry: unknown, defaultPort: number, what = "cluster_peers entry"): PeerAddress {
  if (entry !== null && typeof entry === "object" && !Array.isArray(entry)) {
    const m = entry as Record<string, unknown>;
    const host = typeof m.host === "string" ? m.host.trim() : "";
    const out: PeerAddress = { host: checkHost(host, what), port: m.port === undefined ? defaultPort : parsePort(m.port, `${what} port`) };
    if (m.id !== undefined) out.id = validateNodeId(m.id, `${what} id`);
    return out;
  }
  if (typeof entry !== "string") throw configError(`${what} must be "host", "host:port" or {id, host, port}, got ${JSON.stringify(entry)}`);
  const s = entry.trim();
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(s);
  if (bracketed) return { host: checkHost(bracketed[1]!, what), port: bracketed[2] ? parsePort(bracketed[2], `${what} port`) : defaultPort };
  const colons = s.split(":").length - 1;
  if (colons === 1) {
    const [host, port] = s.split(":") as [string, string];
    return { host: checkHost(host, what), port: parsePort(port, `${what} ${JSON.stringify(s)} port`) };
  }
  // no colon: a host; two or more: an IPv6 address without a port (use brackets to give one)
  return { host: checkHost(s, what), port: defaultPort };
}

function peerKey(p: PeerAddress): string {
  return `${p.host.toLowerCase()}|${p.port}`;
}

/** Validates the cluster options; throws a BrineError (CLUSTER_CONFIG, CLUSTER_BAD_NODE_ID) naming the fix. */
export function parseClusterConfig(cfg: ClusterConfigInput, log: Logger = getLogger("brine.cluster")): ClusterSettings {
  if (typeof cfg.cluster_id !== "string" || cfg.cluster_id.trim() === "") throw configError("cluster_id must be set to the cluster's name");
  const clusterId = cfg.cluster_id;
  if (new TextEncoder().encode(clusterId).length > clusterIdBytesMax || /[\u0000-\u001f\u007f]/.test(clusterId)) {
    throw configError(`cluster_id must be printable and at most ${clusterIdBytesMax} bytes`);
  }
  const nodeId = clusterNodeIdOf({ id: String(cfg.id ?? "") });
  if (!isKeyFileId(nodeId)) {
    throw new BrineError("CLUSTER_BAD_NODE_ID", `node id ${JSON.stringify(nodeId)} names the key file peers/<id>.pub, so it may not hold a path separator or start with a dot`);
  }
  const port = clusterPoolPort(cfg, log);
  const iface = typeof cfg.interface === "string" ? cfg.interface.trim() : "";
  if (iface === "") throw configError("interface must be set (the peer channel listens on interface:cluster_pool_port)");
  if (typeof cfg.pki_dir !== "string" || cfg.pki_dir === "") throw configError("pki_dir must be set");
  const clusterPkiDir = typeof cfg.cluster_pki_dir === "string" && cfg.cluster_pki_dir !== "" ? cfg.cluster_pki_dir : cfg.pki_dir;

  const raw = cfg.cluster_peers ?? [];
  if (!Array.isArray(raw)) throw configError(`cluster_peers must be a list of "host" or "host:port" entries, got ${JSON.stringify(raw)}`);
  if (raw.length > clusterPeersMax) throw configError(`cluster_peers lists ${raw.length} masters; at most ${clusterPeersMax}`);
  const listed = raw.map((e, i) => parsePeerEntry(e, port, `cluster_peers[${i}]`));
  const seenAddr = new Map<string, number>();
  const seenId = new Map<string, number>();
  const selfAddr = isWildcardAddress(iface) ? undefined : peerKey({ host: iface, port });
  const peers: PeerAddress[] = [];
  listed.forEach((p, i) => {
    const k = peerKey(p);
    const prev = seenAddr.get(k);
    if (prev !== undefined) throw new BrineError("CLUSTER_BAD_NODE_ID", `cluster_peers[${i}] (${p.host}:${p.port}) repeats cluster_peers[${prev}]: each master once`);
    seenAddr.set(k, i);
    if (k === selfAddr) {
      // the same list on every master names this one too: ignored (Salt's masters skip themselves as well)
      if (p.id !== undefined && p.id !== nodeId) throw new BrineError("CLUSTER_BAD_NODE_ID", `cluster_peers[${i}] names id ${JSON.stringify(p.id)} at this master's own interface:cluster_pool_port (${p.host}:${p.port}), whose id is ${JSON.stringify(nodeId)}`);
      log.info(`cluster_peers[${i}] (${p.host}:${p.port}) is this master; ignored`);
      return;
    }
    peers.push(p);
    if (p.id === undefined) return;
    if (p.id === nodeId) throw new BrineError("CLUSTER_BAD_NODE_ID", `cluster_peers[${i}] has this master's own id ${JSON.stringify(nodeId)}: node ids must be unique`);
    const prevId = seenId.get(p.id);
    if (prevId !== undefined) throw new BrineError("CLUSTER_BAD_NODE_ID", `cluster_peers[${i}] and cluster_peers[${prevId}] both have id ${JSON.stringify(p.id)}`);
    seenId.set(p.id, i);
  });
  const isolated = parseIsolated(cfg, log);
  return {
    clusterId,
    nodeId,
    listen: { host: iface, port },
    peers,
    pkiDir: cfg.pki_dir,
    clusterPkiDir,
    peerKeyDir: path.join(clusterPkiDir, "peers"),
    ...(isolated ? { isolated } : {}),
    minVoters: typeof cfg.cluster_min_voters === "number" ? cfg.cluster_min_voters : (optionDefault("cluster_min_voters") as number),
  };
}

/**
 * The isolated-filesystem options, or undefined in shared-filesystem mode. An empty `cluster_secret` is refused
 * unless `brine_cluster_allow_empty_secret` says otherwise (then logged as a warning at every start); a
 * `cluster_pub_fingerprint` that is not a fingerprint is refused.
 */
function parseIsolated(cfg: ClusterConfigInput, log: Logger): IsolatedSettings | undefined {
  const secretSet = typeof cfg.cluster_secret === "string" && cfg.cluster_secret !== "";
  if (cfg.cluster_isolated_filesystem !== true) {
    if (secretSet || cfg.cluster_pub_fingerprint) log.warning("cluster_secret and cluster_pub_fingerprint are read only with cluster_isolated_filesystem: True; this master shares cluster_pki_dir and ignores them");
    return undefined;
  }
  const secret = typeof cfg.cluster_secret === "string" ? cfg.cluster_secret : "";
  if (secret === "") {
    if (cfg.brine_cluster_allow_empty_secret !== true) {
      throw configError("cluster_isolated_filesystem needs a cluster_secret (the same on every master; a joining master proves it knows it); set brine_cluster_allow_empty_secret: True to run without one");
    }
    log.warning("cluster_secret is empty (brine_cluster_allow_empty_secret): any master that reaches the peer port and trusts the cluster key may join this cluster");
  }
  let fingerprint: string | null = null;
  if (typeof cfg.cluster_pub_fingerprint === "string" && cfg.cluster_pub_fingerprint.trim() !== "") {
    normalizeFingerprint(cfg.cluster_pub_fingerprint);
    fingerprint = cfg.cluster_pub_fingerprint.trim();
  }
  const found = cfg.brine_cluster_found === true;
  if (found) log.warning("brine_cluster_found: this master founds a new cluster (makes cluster.pem) if no configured peer answers with one");
  const timeoutS = typeof cfg.cluster_join_timeout === "number" ? cfg.cluster_join_timeout : (optionDefault("cluster_join_timeout") as number);
  return {
    secret,
    fingerprint,
    hashType: typeof cfg.hash_type === "string" ? cfg.hash_type : "sha256",
    joinTimeoutMs: timeoutS * 1000,
    found,
  };
}

export interface ClusterKeys {
  self: PeerIdentity;
  keyring: FileKeyring;
}

export interface LoadKeysOptions {
  /**
   * Refuse to start when `cluster_peers` is not empty but no peer key is on disk (default true: until the
   * join flow hands keys out, the channel could authenticate nobody). The join flow will turn this off.
   */
  requirePeerKeys?: boolean;
  /** Write this master's public key to `peers/<id>.pub` if it is missing, as Salt does (default false). */
  publishSelf?: boolean;
}

/**
 * Loads this master's private key and every peer key. Throws CLUSTER_KEY for a missing, unreadable or
 * unparsable key (naming the file), CLUSTER_BAD_NODE_ID when `peers/<id>.pub` holds another master's key.
 */
export function loadClusterKeys(s: ClusterSettings, opts: LoadKeysOptions = {}): ClusterKeys {
  const self = loadSelfIdentity(s.pkiDir, s.nodeId);
  const keyring = new FileKeyring(s.peerKeyDir, s.nodeId).load();
  checkSelfEntry(keyring, self);
  if (opts.publishSelf) publishSelfKey(keyring, self);
  // isolated filesystem: a peer named by id has its key sent by the join exchange or the cluster log (PEER_KEY), not
  // copied here beforehand, so a static first start of peers named {id, host} may not wait for one
  for (const p of s.isolated ? [] : s.peers) {
    if (p.id !== undefined && !keyring.loaded(p.id)) {
      throw new BrineError("CLUSTER_KEY", `no key for peer ${JSON.stringify(p.id)}: copy its master.pub to ${path.join(s.peerKeyDir, `${p.id}.pub`)}`);
    }
  }
  if ((opts.requirePeerKeys ?? true) && s.peers.length > 0 && keyring.peerIds().length === 0) {
    throw new BrineError("CLUSTER_KEY", `cluster_peers lists ${s.peers.length} master(s) but ${s.peerKeyDir} holds no peer key: copy each master's master.pub there as <id>.pub`);
  }
  return { self, keyring };
}

/**
 * The PeerTransport options for a validated configuration and its keys: the one call the master's cluster
 * start-up makes between loadClusterKeys and `new PeerTransport(...)`.
 */
export function peerTransportOptions(s: ClusterSettings, keys: ClusterKeys, limits?: Partial<PeerLimits>, log?: Logger): PeerTransportOptions {
  return {
    clusterId: s.clusterId,
    selfId: s.nodeId,
    listen: s.listen,
    peers: s.peers.map((p) => ({ ...p })),
    keys,
    ...(limits ? { limits } : {}),
    ...(log ? { log } : {}),
  };
}
