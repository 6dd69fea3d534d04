/**
 * The bounded label values of the master's metrics (board.ts counts under them, families.ts names them).
 * Every label has a fixed set of values known when the board is made, so the board is a fixed table of
 * slots and a scrape can never grow without bound, whatever minions or clients send:
 *
 * - `cmd`: the clear and AES commands a request may name (Salt's ClearFuncs and AESFuncs methods and the
 *   fileserver's); a command outside the list is `other`, a request whose command could not be read (not
 *   decodable, not decryptable, not a map) is `none`.
 * - `result` of `_auth`: Salt's `act` words of the `salt/auth` event (`accept`, `pend`, `reject`, `denied`,
 *   `full`) and `invalid` for refusals that fire no event (bad id, key, algorithm).
 * - `tag_prefix`: the first two words of Salt's own tags (`salt/job`, `salt/auth`, ...), the bare jid event
 *   (`jid`), Salt's untagged-namespace ones (`minion_start`, `key`, `minion/refresh`), else `other`.
 * - `fun`: a table of FUN_SLOTS_DYNAMIC names that publishes fill in order of first use (board.ts), plus
 *   `other` (the table is full, or a return names a function no publish named) and `compound` (a job of
 *   several functions); a return can only count under a name a publish (an authorized user) put there.
 */

/** Every command a request may name (Salt 3007's exposed ClearFuncs and AESFuncs methods, brine's fileserver). */
export const CMD_LABELS = [
  "none",
  "other",
  // clear
  "_auth",
  "publish",
  "runner",
  "wheel",
  "mk_token",
  "get_token",
  "rm_token",
  // AES
  "_return",
  "_pillar",
  "_minion_event",
  "_master_opts",
  "_master_tops",
  "_mine",
  "_mine_get",
  "_mine_delete",
  "_mine_flush",
  "_file_recv",
  "_syndic_return",
  "minion_runner",
  "pub_ret",
  "minion_pub",
  "minion_publish",
  "revoke_auth",
  "_file_envs",
  "_file_find",
  "_file_hash",
  "_file_hash_and_stat",
  "_serve_file",
  "_file_list",
  "_dir_list",
  "_file_list_emptydirs",
  "_symlink_list",
  "_ext_nodes",
] as const;
export const CMD_NONE = 0;
export const CMD_OTHER = 1;

const cmdSlots = new Map<string, number>(CMD_LABELS.map((c, i) => [c, i]));

/** The board slot of a request's command (`none` for a value that is not a string). */
export function cmdSlotOf(cmd: unknown): number {
  if (typeof cmd !== "string") return CMD_NONE;
  return cmdSlots.get(cmd) ?? CMD_OTHER;
}

export const AUTH_RESULTS = ["accept", "pend", "reject", "denied", "full", "invalid"] as const;
export type AuthResult = (typeof AUTH_RESULTS)[number];
const authSlots = new Map<string, number>(AUTH_RESULTS.map((c, i) => [c, i]));
export function authSlotOf(act: string): number {
  return authSlots.get(act) ?? AUTH_RESULTS.indexOf("invalid");
}

/** `salt/<word>` prefixes counted by name; longer tags count under their first two words. */
const SALT_WORDS = ["job", "auth", "key", "minion", "presence", "run", "wheel", "beacon", "cloud", "stats", "engines", "cluster"] as const;
export const TAG_PREFIXES = ["other", "jid", "minion_start", "key", "minion/refresh", ...SALT_WORDS.map((w) => `salt/${w}`)] as const;
const TAG_OTHER = 0;
const TAG_JID = 1;
const TAG_SALT_BASE = 5;

/** True when `tag` is `prefix` or starts with `prefix/`. */
function under(tag: string, prefix: string, at = 0): boolean {
  return tag.startsWith(prefix, at) && (tag.length === at + prefix.length || tag.charCodeAt(at + prefix.length) === 47);
}

/** The tag_prefix slot of an event tag: string comparisons only (no allocation on the request path). */
export function tagSlotOf(tag: string): number {
  if (tag.startsWith("salt/")) {
    for (let i = 0; i < SALT_WORDS.length; i++) if (under(tag, SALT_WORDS[i]!, 5)) return TAG_SALT_BASE + i;
    return TAG_OTHER;
  }
  if (tag.length === 20) {
    let digits = true;
    for (let i = 0; i < 20 && digits; i++) {
      const c = tag.charCodeAt(i);
      digits = c >= 48 && c <= 57;
    }
    if (digits) return TAG_JID;
  }
  if (tag === "minion_start") return 2;
  if (tag === "key") return 3;
  if (under(tag, "minion/refresh")) return 4;
  return TAG_OTHER;
}

export const LANES = ["clear", "req"] as const;
export const LANE_REFUSALS = ["queue_full", "stale", "gone", "decode_budget"] as const;
export const SEND_QUEUES = ["router", "publish"] as const;
/** the minion-facing ports (native transport): request (ret_port), publish (publish_port) */
export const MINION_PORTS = ["request", "publish"] as const;
/** what the publisher thread did with a publish (src/workers/publisher/messages.ts PublisherCounts) */
export const PUBLISHER_COUNTS = ["sealed", "signed", "passed", "refused", "dropped"] as const;
/**
 * The nonce owner check's counters in a cluster (src/main-thread/cluster/nonce-owner.ts NonceOwnerCounters, in
 * this order): asks, askedRemote, seenRemote, undecided, standIn, decided, decidedSeen, refused
 */
export const NONCE_OWNER_COUNTS = ["asks", "asked_remote", "seen_remote", "undecided", "stand_in", "decided", "decided_seen", "refused"] as const;
/** why an event-bus reader was disconnected (src/main-thread/bus-backlog.ts) */
export const BUS_DROP_REASONS = ["queue_full", "drain_timeout", "backlog_bytes"] as const;

/** A return's success for `salt_jobs_completed_total`: its `success` when it has one, else retcode 0 (or none). */
export function returnSucceeded(load: Record<string, unknown>): boolean {
  if (typeof load.success === "boolean") return load.success;
  const rc = load.retcode;
  return rc === undefined || rc === 0;
}

/** Function names a publish may add to the fun table, count (then `other`). */
export const FUN_SLOTS_DYNAMIC = 64;
/** Longest function name the table keeps, bytes (ASCII: module.function). */
export const funNameBytesMax = 64;
export const FUN_OTHER = 0;
export const FUN_COMPOUND = 1;
export const FUN_FIXED = ["other", "compound"] as const;
/** What a function name must look like to get its own slot (Salt's module.function). */
export const FUN_NAME_RE = /^[A-Za-z0-9_.]{1,64}$/;

/**
 * Request duration buckets, µs (the request's own work in its worker: decode to reply, durable writes
 * included; waiting in its lane is the lane depth's business). Exposed in seconds.
 */
export const REQUEST_BUCKETS_US = [100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000] as const;
