/**
 * Which minions are connected (for "[Not connected]" and manage.present/not_present), two ways:
 *
 * - `connections` (Salt's way, the default without `cluster_id`): the remote addresses of ESTABLISHED TCP
 *   connections to the local publish port, read from /proc/net/tcp{,6} (what Salt reads through `ss -ant`),
 *   matched against each minion's cached ipv4/ipv6 grains. Loopback peers stand for every address of this
 *   host, as in Salt.
 * - `heard` (the default with `cluster_id`): behind a load balancer every publish connection comes from the
 *   balancer's address, which says nothing about which minion is there (a balancer on another host matches no
 *   minion: everyone would be "[Not connected]"; one on this host is loopback: everyone would be connected).
 *   A minion is then present when it was heard from within `brine_presence_heard_s` (default
 *   PRESENCE_HEARD_DEFAULT_S): a return to any job (the job cache holds the whole cluster's returns, mirrored)
 *   or a data cache / mine write (synced from every master). A live minion that missed a job still answers the
 *   CLI's `saltutil.find_job`, so it is "[No response]"; a stopped one is "[Not connected]" once its last
 *   word is older than the window.
 *
 * Clustered, each master also shares its own set with its peers (src/workers/state-sync/) and a master answers
 * with the union of its own and its peers' recent reports: a minion attached to another master is present.
 * `brine_presence: connections | heard` chooses (a cluster whose minions reach the masters directly, not
 * through a balancer, wants `connections`).
 */
import { readFileSync } from "node:fs";
import { isIPv4 } from "node:net";
import os from "node:os";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { optionDefault } from "../../shared/config/options.js";
import { formatJid } from "../../shared/protocol/jid.js";
import type { Store } from "../../lib/store/lmdb-env.js";
import { peersPresent } from "../../lib/store/presence-board.js";
import { isClustered } from "../../shared/shared-fs.js";
import { clusterNodeIdOf } from "../../shared/node-ids.js";
import { snapshotVerdict, type PublishPeersBoard } from "../../shared/publish-peers.js";
import { LogBudget } from "../../shared/log-budget.js";
import { getLogger } from "../../shared/log.js";

const log = getLogger("brine.presence");

const TCP_ESTABLISHED = "01";

function hexToIpv4(h: string): string {
  const n = parseInt(h, 16);
  return [n & 255, (n >>> 8) & 255, (n >>> 16) & 255, (n >>> 24) & 255].join(".");
}

function hexToIpv6(h: string): string {
  // /proc prints the address as four little-endian 32-bit words
  const words: string[] = [];
  for (let i = 0; i < 4; i++) {
    const w = h.slice(i * 8, i * 8 + 8);
    const le = w.match(/../g)!.reverse().join("");
    words.push(le.slice(0, 4), le.slice(4, 8));
  }
  const full = words.map((w) => w.replace(/^0+(?=.)/, "").toLowerCase());
  const v4mapped = full.slice(0, 5).every((w) => w === "0") && full[5] === "ffff";
  if (v4mapped) {
    const a = parseInt(words[6]!, 16);
    const b = parseInt(words[7]!, 16);
    return `${a >> 8}.${a & 255}.${b >> 8}.${b & 255}`;
  }
  // RFC 5952, as grains print an address: the longest run of two or more zero groups (the first of equals) as "::"
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    let j = i;
    while (j < 8 && full[j] === "0") j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j > i ? j : i + 1;
  }
  if (best < 0) return full.join(":");
  return `${full.slice(0, best).join(":")}::${full.slice(best + bestLen).join(":")}`;
}

export type ProcTable = "tcp" | "tcp6";

/**
 * The /proc/net tables that can hold connections to a port this master listens on: tcp6 only when it may listen
 * on IPv6 (`ipv6`, or an interface that is not an IPv4 address). Each read of a table costs the kernel a walk of
 * its whole connection hash, milliseconds on a host with much memory even when the table is empty.
 */
export function procTables(cfg: Pick<MasterConfig, "ipv6" | "interface">): ProcTable[] {
  return !cfg.ipv6 && isIPv4(String(cfg.interface)) ? ["tcp"] : ["tcp", "tcp6"];
}

/** Per port: a line of an ESTABLISHED connection to it (`  sl: LOCAL:PORT REMOTE:RPORT 01 …`), the remote address captured. */
const lineRes = new Map<number, RegExp>();
function lineRe(port: number): RegExp {
  let re = lineRes.get(port);
  if (!re) {
    const hex = port.toString(16).toUpperCase().padStart(4, "0");
    re = new RegExp(`^ *\\d+: [0-9A-F]+:${hex} ([0-9A-F]+):[0-9A-F]{4} ${TCP_ESTABLISHED} `, "gm");
    if (lineRes.size < 64) lineRes.set(port, re);
  }
  re.lastIndex = 0;
  return re;
}

/** Remote IPs with an established connection to `port` on this host, from the given /proc/net tables. */
export function peerAddresses(port: number, procDir = "/proc/net", tables: readonly ProcTable[] = ["tcp", "tcp6"]): Set<string> {
  const out = new Set<string>();
  for (const file of tables) {
    let text: string;
    try {
      text = readFileSync(`${procDir}/${file}`, "utf8");
    } catch {
      continue;
    }
    const re = lineRe(port);
    for (let m = re.exec(text); m; m = re.exec(text)) out.add(file === "tcp6" ? hexToIpv6(m[1]!) : hexToIpv4(m[1]!));
  }
  return out;
}

/** this host's addresses are listed again after this long (a listing is a getifaddrs walk: ~0.3 ms), ms */
export const localAddressesMsMax = 10_000;
let localListing: { at: number; addrs: string[] } | undefined;

/** This host's addresses (what a loopback peer stands for), listed at most once per localAddressesMsMax per thread. */
function localAddresses(nowMs = Date.now()): string[] {
  if (localListing && nowMs - localListing.at >= 0 && nowMs - localListing.at < localAddressesMsMax) return localListing.addrs;
  const addrs: string[] = [];
  for (const list of Object.values(os.networkInterfaces())) for (const a of list ?? []) addrs.push(a.address);
  localListing = { at: nowMs, addrs };
  return addrs;
}

/**
 * Ids whose cached ipv4/ipv6 grains include a connected peer address.
 * `grainsOf` returns the cached grains of an accepted id (or undefined).
 */
export function connectedIds(
  acceptedIds: readonly string[],
  grainsOf: (id: string) => Record<string, unknown> | undefined,
  peers: ReadonlySet<string>,
): Set<string> {
  const addrs = new Set(peers);
  if (peers.has("127.0.0.1") || peers.has("::1")) for (const a of localAddresses()) addrs.add(a);
  const out = new Set<string>();
  for (const id of acceptedIds) {
    const g = grainsOf(id);
    if (!g) continue;
    const ips = [...(Array.isArray(g.ipv4) ? g.ipv4 : []), ...(Array.isArray(g.ipv6) ? g.ipv6 : [])];
    if (ips.some((ip) => typeof ip === "string" && addrs.has(ip))) out.add(id);
  }
  return out;
}

export type PresenceMode = "connections" | "heard";

/** how long a minion counts as present after it was last heard from (`heard` mode), seconds */
export const PRESENCE_HEARD_DEFAULT_S = optionDefault("brine_presence_heard_s") as number;
/** how often a clustered master tells its peers which minions it sees, ms */
export const presenceShareMs = 5_000;
/** a peer's report older than this no longer counts (three missed shares: the peer is gone or cut off), ms */
export const presenceReportAgeMsMax = 3 * presenceShareMs;
/** job-cache return keys one `heard` computation reads at most (newest jobs first), count */
export const heardScanKeysMax = 1_000_000;

export function presenceMode(cfg: MasterConfig): PresenceMode {
  const m = cfg.brine_presence;
  if (m === "connections" || m === "heard") return m;
  return isClustered(cfg) ? "heard" : "connections";
}

function heardWindowMs(cfg: MasterConfig): number {
  const s = Number(cfg.brine_presence_heard_s);
  return (Number.isFinite(s) && s > 0 ? s : PRESENCE_HEARD_DEFAULT_S) * 1000;
}

/** Ids heard from since `sinceMs`: returns to jobs published since then, data cache and mine writes since then. */
export function heardIds(store: Store, sinceMs: number): Set<string> {
  const out = new Set<string>();
  let n = 0;
  // `<jid>/<id>` keys sort by jid, and jids by time: the newest jobs are the end of the range
  for (const k of store.returns.getKeys({ start: "\uffff", end: formatJid(sinceMs, 0), reverse: true })) {
    if (++n > heardScanKeysMax) break;
    const slash = k.indexOf("/");
    if (slash > 0) out.add(k.slice(slash + 1));
  }
  for (const { key, value } of store.stamps.getRange({})) {
    if (Array.isArray(value) && typeof value[0] === "number" && value[0] >= sinceMs) out.add(key.slice(2));
  }
  return out;
}

/** This master's own view: the accepted ids it sees connected, by `presenceMode`. */
export function localPresent(cfg: MasterConfig, store: Store, acceptedIds: readonly string[], grainsOf: (id: string) => Record<string, unknown> | undefined, nowMs = Date.now(), peers?: ReadonlySet<string>): string[] {
  const ids = presenceMode(cfg) === "heard" ? heardIds(store, nowMs - heardWindowMs(cfg)) : connectedIds(acceptedIds, grainsOf, peers ?? peerAddresses(cfg.publish_port, undefined, procTables(cfg)));
  return acceptedIds.filter((id) => ids.has(id));
}

/** What "[Not connected]" and manage.present use: this master's view, united with its peers' recent reports. */
/** `peers`: the connected addresses when the caller has read them already (`connections` mode). */
export function clusterPresent(cfg: MasterConfig, store: Store, acceptedIds: readonly string[], grainsOf: (id: string) => Record<string, unknown> | undefined, nowMs = Date.now(), peers?: ReadonlySet<string>): string[] {
  const own = localPresent(cfg, store, acceptedIds, grainsOf, nowMs, peers);
  if (!isClustered(cfg)) return own;
  const all = peersPresent(store, clusterNodeIdOf(cfg), nowMs, presenceReportAgeMsMax);
  for (const id of own) all.add(id);
  return acceptedIds.filter((id) => all.has(id));
}

const boardLog = new LogBudget(1, 600_000, (l) => log.warning(l), "publish peers board");

/**
 * The addresses connected to the publish port, from this master's shared board (src/shared/publish-peers.ts)
 * when `snapshotVerdict` lets it answer, else from one read of the kernel's tables (`read`), stored on the board
 * for the other threads when this thread wins its writer lock. `allConnected(addrs)`: whether those addresses
 * see every minion the caller asks about connected (a publish's matched minions); without it only a fresh
 * snapshot is used.
 */
export function boardPeers(board: PublishPeersBoard, read: () => Set<string>, nowMs: number, allConnected?: (addrs: ReadonlySet<string>) => boolean, sockets: () => number = () => NaN): ReadonlySet<string> {
  const v = board.view();
  const socketsChanged = v.addrs !== undefined && !v.live && !(sockets() === v.sockets);
  const verdict = snapshotVerdict({ live: v.live, hasSnapshot: v.addrs !== undefined, ageMs: nowMs - v.atMs, socketsChanged });
  if (v.addrs && (verdict === "use" || (verdict === "use_if_all_connected" && allConnected?.(v.addrs)))) return v.addrs;
  if (!board.tryLock(nowMs)) return read();
  try {
    // counted before the tables are read: a connection that comes or goes during the read changes it for the next
    const count = sockets();
    const fresh = read();
    if (board.writeSnapshot(fresh, nowMs, count) === "too_many") boardLog.line(`${fresh.size} addresses connected to the publish port do not fit the shared board: each publish reads /proc/net/tcp itself`);
    return fresh;
  } finally {
    board.unlock();
  }
}

/** The kernel's tables read for the publish port's peers, as this master listens (procTables). */
export function readPublishPeers(cfg: MasterConfig): () => Set<string> {
  return () => peerAddresses(cfg.publish_port, undefined, procTables(cfg));
}

/**
 * The kernel's count of TCP sockets in use, from /proc/net/sockstat (and sockstat6 when tcp6 is read): counters,
 * not a walk of the connection hash. NaN when it cannot be read (every snapshot is then read again).
 */
export function tcpSocketsInUse(tables: readonly ProcTable[], procDir = "/proc/net"): number {
  let n = 0;
  for (const [file, label] of [["sockstat", "TCP"], ["sockstat6", "TCP6"]] as const) {
    if (file === "sockstat6" && !tables.includes("tcp6")) continue;
    let text: string;
    try {
      text = readFileSync(`${procDir}/${file}`, "latin1");
    } catch {
      return NaN;
    }
    const m = new RegExp(`^${label}: inuse (\\d+)`, "m").exec(text);
    if (!m) return NaN;
    n += Number(m[1]);
  }
  return n;
}

/** `tcpSocketsInUse` as this master listens. */
export function publishSockets(cfg: MasterConfig): () => number {
  const tables = procTables(cfg);
  return () => tcpSocketsInUse(tables);
}

/** a minion's ipv4/ipv6 grains, as a request thread read them for a publish, are reused this long, ms */
export const minionAddressesMsMax = 10_000;
/**
 * minions whose addresses a request thread keeps for its publishes, count: as many as one publish looks up
 * (publish.ts notConnectedMinionsMax), so that a job to a whole fleet that size reads each minion's data once per
 * window, not again at every publish (at 20,000 minions a cache of 10,000 kept none of them for the next one); the
 * entries older than the window are dropped as the next ones come, so a thread keeps only the minions its
 * publishes of the last window looked up
 */
export const minionAddressesEntriesMax = 100_000;
const addressCache = new Map<string, { at: number; grains: Record<string, unknown> }>();

/** How many minions' addresses this thread keeps now (for tests). */
export function addressesKept(): number {
  return addressCache.size;
}

/**
 * A minion's `ipv4` and `ipv6` grains for a publish's presence check, from the data cache at most once per
 * minionAddressesMsMax per thread: reading them decodes the minion's whole cached data (grains and pillar), which
 * per matched minion was a third of a publish's handler at 200 minions. An address a minion's new grains changed
 * within that window is seen late: at worst the early `not_connected` word is wrong, which the CLI's own check
 * at the end of its wait corrects, as for a stale board. A minion with no cached data is not kept.
 */
export function addressGrains(id: string, grainsOf: (id: string) => Record<string, unknown> | undefined, nowMs: number): Record<string, unknown> | undefined {
  const e = addressCache.get(id);
  if (e && nowMs - e.at >= 0 && nowMs - e.at < minionAddressesMsMax) return e.grains;
  const g = grainsOf(id);
  addressCache.delete(id);
  if (!g) return undefined;
  const grains = { ipv4: g.ipv4, ipv6: g.ipv6 };
  // oldest first (each entry goes in at the end): those past the window go, then the oldest if still full
  for (const [k, v] of addressCache) {
    if (nowMs - v.at >= 0 && nowMs - v.at < minionAddressesMsMax) break;
    addressCache.delete(k);
  }
  if (addressCache.size >= minionAddressesEntriesMax) addressCache.delete(addressCache.keys().next().value!);
  addressCache.set(id, { at: nowMs, grains });
  return grains;
}

/**
 * A publish's matched minions this master does not see connected (`not_connected`, src/workers/req-handler/publish.ts),
 * with `brine_presence: connections`; undefined when it cannot tell (`heard`, or nobody connected to the publish
 * port at all). The addresses come from the board (`boardPeers`): a snapshot that sees every matched minion
 * connected answers for publishPeersStaleMsMax, any other for publishPeersFreshMsMax.
 */
export function notConnectedAtPublish(cfg: MasterConfig, store: Store, board: PublishPeersBoard, minions: readonly string[], dataGrainsOf: (id: string) => Record<string, unknown> | undefined, nowMs: number, sockets = publishSockets(cfg)): string[] | undefined {
  if (presenceMode(cfg) !== "connections") return undefined;
  const grainsOf = (id: string) => addressGrains(id, dataGrainsOf, nowMs);
  let judged: { addrs: ReadonlySet<string>; present: string[] } | undefined;
  const presentWith = (addrs: ReadonlySet<string>): string[] => {
    if (judged?.addrs !== addrs) judged = { addrs, present: clusterPresent(cfg, store, minions, grainsOf, nowMs, addrs) };
    return judged.present;
  };
  const peers = boardPeers(board, readPublishPeers(cfg), nowMs, (addrs) => addrs.size > 0 && presentWith(addrs).length === minions.length, sockets);
  if (peers.size === 0) return undefined;
  const present = new Set(presentWith(peers));
  return minions.filter((m) => !present.has(m));
}
