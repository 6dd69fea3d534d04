import { createHash } from "node:crypto";

/**
 * State-sync manifests, sans I/O (issue 15): what a channel holds, item by item, and what a receiver must do to
 * match a peer. The state-sync thread (engine.ts) does the I/O around these decisions.
 *
 * - An **item** is a relative path inside a channel (`accepted/<id>` in `keys`, `<saltenv>/<path>` in
 *   `file_roots`, a key in `bank:<name>`) with its size, sha256, mode and stamp (ms), or a **tombstone** (`d`):
 *   the item was there and was removed at stamp `t`. Tombstones are how deletes travel (Salt's state-sync only
 *   ever adds).
 * - **Paths** are checked before anything touches a disk (`checkItemPath`): relative, `/`-separated, no empty,
 *   `.` or `..` segment, no NUL, at most itemPathBytesMax bytes and nameBytesMax per segment, and the shape
 *   the channel expects. (Symlinks on the receiving side are the engine's to refuse: that needs the disk.)
 * - **Diff** (`diffPage`): what to fetch, delete and adopt (a tombstone recorded without a delete) given the
 *   local entries and one page of the peer's manifest. Three policies: `newer` (keys: last writer wins by stamp,
 *   ties broken by hash, so every master converges on the same item), `mirror` (roots pushed by sync_roots or
 *   pulled at join: the source's content wins for every path it names), `add` (job-cache banks: only what is
 *   missing here).
 */

/** One item of a manifest, as it travels (CBOR) and as each master keeps it. */
export interface ManifestEntry {
  /** path inside the channel */
  p: string;
  /** size, bytes (0 for a tombstone) */
  s: number;
  /** sha256 of the content, lowercase hex ("" for a tombstone) */
  h: string;
  /** permission bits (0 for a tombstone and bank items) */
  m: number;
  /** when the item (or its removal) was last changed, ms since the epoch, on the master where it changed */
  t: number;
  /** a tombstone: removed at `t` */
  d?: 1;
}

export type DiffPolicy = "newer" | "mirror" | "add";

export interface Diff {
  /** live entries of the peer to fetch and install here */
  fetch: ManifestEntry[];
  /** the peer's tombstones whose item is live here: delete it, then record the tombstone */
  delete: ManifestEntry[];
  /** the peer's tombstones for items absent here: record them (so a third master learns the delete from us) */
  adopt: ManifestEntry[];
}

/** Longest item path, bytes (UTF-8): Linux's PATH_MAX. */
export const itemPathBytesMax = 4096;
/** Longest segment of an item path, bytes (UTF-8): Linux's NAME_MAX. */
export const nameBytesMax = 255;
/** Tombstones older than this are forgotten (a master away longer resyncs without the deletes), ms: 7 days. */
export const tombstoneKeepMs = 7 * 24 * 3600_000;
/** Largest single item a channel carries, bytes: a bigger file is refused by the collector and logged. */
export const itemBytesMax = 1024 * 1024 * 1024;

/** Salt's state-sync channel names (keys and denied keys, the two roots, the job-cache banks). */
export const KEY_CHANNELS = ["keys", "denied_keys"] as const;
export const ROOT_CHANNELS = ["file_roots", "pillar_roots"] as const;
/** The job-cache banks a `bank:<name>` channel may name (Salt's default four and the returns). */
export const BANKS = ["jobs/loads", "jobs/minions", "jobs/endtimes", "jobs/nocache", "jobs/returns"] as const;
export type Bank = (typeof BANKS)[number];
/** Key states each key channel carries, as the first segment of an item path (the pki sub-directory in keyDirs). */
export const KEY_STATES: Record<(typeof KEY_CHANNELS)[number], readonly string[]> = { keys: ["accepted", "pending", "rejected"], denied_keys: ["denied"] };
/** Directories of a root never carried (Salt's collect_root_tree skips the same). */
export const SKIPPED_DIRS = new Set([".git", ".hg", ".svn", "__pycache__", ".tox"]);
/** Prefix of the engine's partial files; an item path segment may not start with it. */
export const PART_PREFIX = ".brine-part-";

export type Channel = (typeof KEY_CHANNELS)[number] | (typeof ROOT_CHANNELS)[number] | `bank:${Bank}`;

/** A channel name as a caller spells it; undefined when it is not one. */
export function parseChannel(name: unknown): Channel | undefined {
  if (typeof name !== "string") return undefined;
  if ((KEY_CHANNELS as readonly string[]).includes(name) || (ROOT_CHANNELS as readonly string[]).includes(name)) return name as Channel;
  if (name.startsWith("bank:") && (BANKS as readonly string[]).includes(name.slice(5))) return name as Channel;
  return undefined;
}

/** How a receiver merges a channel (see the header). */
export function policyOf(ch: Channel): DiffPolicy {
  if (ch === "keys" || ch === "denied_keys") return "newer";
  if (ch === "file_roots" || ch === "pillar_roots") return "mirror";
  return "add";
}

function utf8Bytes(s: string): number {
  let n = 0;
  for (const c of s) {
    const cp = c.codePointAt(0)!;
    n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return n;
}

/**
 * Whether `p` is a path this channel may carry: its segments, or why not. Keys: `<state>/<id>` with a state the
 * channel carries and Salt's valid_id (no `\`, not hidden); roots: `<saltenv>/<path…>` with no skipped directory
 * and no partial-file name; banks: any key without NUL within the bounds (bank keys are not paths).
 */
export function checkItemPath(ch: Channel, p: unknown): { parts: string[] } | { error: string } {
  if (typeof p !== "string" || p.length === 0) return { error: "empty or not a string" };
  if (p.includes("\0")) return { error: "contains NUL" };
  if (utf8Bytes(p) > itemPathBytesMax) return { error: `longer than ${itemPathBytesMax} bytes` };
  if (ch.startsWith("bank:")) return { parts: [p] };
  if (p.startsWith("/")) return { error: "absolute" };
  const parts = p.split("/");
  for (const s of parts) {
    if (s === "") return { error: "empty segment" };
    if (s === "." || s === "..") return { error: `'${s}' segment` };
    if (utf8Bytes(s) > nameBytesMax) return { error: `a segment longer than ${nameBytesMax} bytes` };
  }
  if (ch === "keys" || ch === "denied_keys") {
    if (parts.length !== 2) return { error: "not <state>/<id>" };
    if (!KEY_STATES[ch].includes(parts[0]!)) return { error: `state '${parts[0]}' is not carried by ${ch}` };
    const id = parts[1]!;
    if (id.includes("\\") || id.startsWith(".")) return { error: "not a valid minion id" };
    return { parts };
  }
  if (parts.length < 2) return { error: "not <saltenv>/<path>" };
  for (const s of parts) {
    if (SKIPPED_DIRS.has(s)) return { error: `'${s}' is never carried` };
    if (s.startsWith(PART_PREFIX)) return { error: "a partial-file name" };
  }
  return { parts };
}

/** Whether an entry as received is well formed (types and bounds); the path is checked by checkItemPath. */
export function validEntry(e: unknown): e is ManifestEntry {
  if (e === null || typeof e !== "object") return false;
  const x = e as Record<string, unknown>;
  if (typeof x.p !== "string" || typeof x.t !== "number" || !Number.isFinite(x.t) || x.t < 0) return false;
  if (x.d === 1) return true;
  return (
    typeof x.s === "number" && Number.isInteger(x.s) && x.s >= 0 && x.s <= itemBytesMax &&
    typeof x.h === "string" && /^[0-9a-f]{64}$/.test(x.h) &&
    typeof x.m === "number" && Number.isInteger(x.m) && x.m >= 0 && x.m <= 0o7777
  );
}

/**
 * A manifest entry as a page carries it: the sha256 as its 32 bytes (not 64 hex characters), a tombstone as its
 * path, stamp and mark alone. About 40 bytes less an item: with minion keys of ~450 bytes, the manifest is most
 * of what a join sends beside the keys themselves.
 */
export function entryToWire(e: ManifestEntry): Record<string, unknown> {
  return e.d ? { p: e.p, t: e.t, d: 1 } : { p: e.p, s: e.s, h: Buffer.from(e.h, "hex"), m: e.m, t: e.t };
}

/** A page's entry back in this module's form (a hash as bytes becomes hex; a tombstone gets its zero fields); anything else unchanged, for validEntry to judge. */
export function entryFromWire(raw: unknown): unknown {
  if (raw === null || typeof raw !== "object") return raw;
  const x = raw as Record<string, unknown>;
  if (x.d === 1) return { s: 0, h: "", m: 0, ...x };
  return x.h instanceof Uint8Array && x.h.byteLength === 32 ? { ...x, h: Buffer.from(x.h).toString("hex") } : x;
}

/** A tombstone for `p`, removed at `t`. */
export function tombstone(p: string, t: number): ManifestEntry {
  return { p, s: 0, h: "", m: 0, t, d: 1 };
}

/** Whether `a` beats `b` under last-writer-wins: newer stamp, then (equal stamps) the larger hash; a tombstone's hash is "". */
function wins(a: ManifestEntry, b: ManifestEntry): boolean {
  if (a.t !== b.t) return a.t > b.t;
  if (a.d && !b.d) return true; // removed at the same ms: the removal wins
  if (!a.d && b.d) return false;
  return a.h > b.h;
}

function sameContent(a: ManifestEntry, b: ManifestEntry): boolean {
  return !a.d && !b.d && a.h === b.h && a.s === b.s;
}

/**
 * What to do with one page of the peer's manifest (`remote`, entries as received, already checked), given this
 * master's entry for each path (`local`).
 */
export function diffPage(policy: DiffPolicy, remote: readonly ManifestEntry[], local: (p: string) => ManifestEntry | undefined): Diff {
  const out: Diff = { fetch: [], delete: [], adopt: [] };
  for (const r of remote) {
    const l = local(r.p);
    if (policy === "add") {
      if (!r.d && (!l || l.d)) out.fetch.push(r);
      continue;
    }
    if (policy === "mirror") {
      if (r.d) {
        if (l && !l.d) out.delete.push(r);
        else if (!l) out.adopt.push(r);
      } else if (!l || l.d || !sameContent(l, r) || l.m !== r.m) out.fetch.push(r);
      continue;
    }
    // newer
    if (!l) {
      (r.d ? out.adopt : out.fetch).push(r);
      continue;
    }
    if (!wins(r, l)) continue;
    if (r.d) (l.d ? out.adopt : out.delete).push(r);
    else if (sameContent(l, r) && l.m === r.m) out.adopt.push(r); // same bytes: take the stamp only
    else out.fetch.push(r);
  }
  return out;
}

/**
 * What a rescan makes of one item (the scan and the kept manifest are walked side by side in the manifest's
 * order, so neither is ever held whole): `prev` is the kept entry, `found` the live entry the scan made (the
 * caller reuses `prev` when the file did not change), `keep` says the item's root could not be read (unmounted,
 * wiped: its items stay as they were). An item gone becomes a tombstone stamped `now`; a tombstone older than
 * tombstoneKeepMs is forgotten (undefined).
 */
export function afterScan(prev: ManifestEntry | undefined, found: ManifestEntry | undefined, now: number, keep = false): ManifestEntry | undefined {
  if (found) return found;
  if (!prev) return undefined;
  if (prev.d) return now - prev.t <= tombstoneKeepMs ? prev : undefined;
  return keep ? prev : tombstone(prev.p, Math.max(now, prev.t + 1));
}

/** Item paths up to this many bytes (UTF-8) are their own manifest key; a longer one is keyed by manifestKey, bytes. */
export const shortPathBytesMax = 1940;
/** Hex digits of the path's sha256 in a long path's manifest key (after one separator character). */
export const longKeyHashHex = 32;

/**
 * The key an item is kept under in the manifest database (LMDB keys are at most 1,978 bytes; a path may have 4,096):
 * the path itself up to shortPathBytesMax bytes; a longer path is keyed by Q + "~" + the first 128 bits of its
 * sha256 in hex, Q being its shortest prefix (at a character boundary) of more than shortPathBytesMax bytes. No short
 * path has Q as a prefix, so any short path compares with the key as it compares with the path: the manifest's
 * order (keys in code-point order, `byManifest`) is the paths' order, except between long paths that share their Q
 * (more than 1,940 bytes in common), which are ordered by that hash. The full path is kept in the stored value; two
 * long paths with one key (a 128-bit collision) are told apart there, and the second is refused. (Any character
 * works as the separator; a printable one, because LMDB's key encoding gives the bytes below 0x20 meanings.)
 */
export function manifestKey(p: string): string {
  if (p.length * 3 <= shortPathBytesMax) return p; // at most 3 UTF-8 bytes per UTF-16 unit
  let bytes = 0;
  for (let i = 0; i < p.length; i++) {
    const c = p.charCodeAt(i);
    const astral = c >= 0xd800 && c < 0xdc00 && i + 1 < p.length;
    bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : astral ? 4 : 3;
    const end = astral ? i + 2 : i + 1;
    if (bytes > shortPathBytesMax) return `${p.slice(0, end)}~${createHash("sha256").update(p).digest("hex").slice(0, longKeyHashHex)}`;
    if (astral) i++;
  }
  return p;
}

/** Whether item path `p` is kept under a key other than itself (manifestKey). */
export function isLongPath(p: string): boolean {
  return manifestKey(p) !== p;
}

/** The manifest's order of two item paths: their manifest keys' (byPath). */
export function byManifest(a: string, b: string): number {
  return byPath(manifestKey(a), manifestKey(b));
}

/**
 * The order of manifest keys: code-point order, which is UTF-8 byte order, the order LMDB keeps the stored manifest in
 * (it differs from JavaScript's code-unit order only between a character above U+FFFF and one in U+E000-U+FFFF).
 */
export function byPath(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    // surrogates (an astral character) sort above U+E000-U+FFFF in code-point order
    if (x >= 0xd800 && y >= 0xd800) {
      x += x < 0xe000 ? 0x2000 : -0x800;
      y += y < 0xe000 ? 0x2000 : -0x800;
    }
    return x - y;
  }
  return a.length - b.length;
}

/**
 * A digest of live content (paths, hashes and modes; no stamps, no tombstones) fed in the manifest's order: equal
 * digests, nothing to fetch or delete. The whole channel's digest (the `changed` notes, a first page skipped) and
 * each range of a range summary (range-tree.ts) are this.
 */
export class ContentDigest {
  private readonly h = createHash("sha256");
  add(e: ManifestEntry): void {
    if (!e.d) this.h.update(`${e.p}\0${e.h}\0${e.m}\n`);
  }
  hex(): string {
    return this.h.digest("hex");
  }
}

/** Splits a file of `size` bytes into ranges of at most `chunk` bytes, from `from` (a resumed transfer). */
export function chunkRanges(size: number, chunk: number, from = 0): { off: number; len: number }[] {
  const out: { off: number; len: number }[] = [];
  for (let off = from; off < size; off += chunk) out.push({ off, len: Math.min(chunk, size - off) });
  return out;
}
