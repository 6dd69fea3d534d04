/**
 * Per-minion session keys (protocol v3): `cachedir/sessions/<id>` holds a Crypticle key string (0600,
 * written to a temp file and renamed), replaced when older than `publish_session`. Each sign-in checks the
 * file (a stat, read again when it changed); a v3 request decode trusts a thread's cached key + mtime for a
 * second at most (the file is the truth shared by all threads and, with a shared cachedir, all masters).
 *
 * Clustered without a shared cachedir, keys travel between masters instead (src/workers/state-sync/): a key
 * this master creates is reported through `track()` (the request worker hands it to the main thread, which
 * sends it to the peers), and a peer's key is merged into the file by `applyPeerSessionKey` (the mirror
 * thread). The file may then hold other live keys after the first line (session-merge.ts); a request
 * encrypted with any of them is accepted and answered with the key it came with (SessionCrypticle).
 */
import { linkSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Crypticle, cipherContextHoldersMax, generateKeyString, type LoadsOptions } from "../../shared/protocol/crypticle.js";
import type { SessionTable } from "../../shared/session-table.js";
import { validId } from "../../shared/protocol/ids.js";
import { isMap, type WireValue } from "../../shared/protocol/msgpack.js";
import { BrineError, isBrineError } from "../../shared/errors.js";
import { getLogger } from "../../shared/log.js";
import { formatSessionFile, liveAlts, mergeSessionKeys, parseSessionFile, type HeldKey, type SessionKeySet } from "./session-merge.js";

const log = getLogger("brine.sessions");
const cacheTtlMs = 1000;
const cacheEntriesMax = 200_000;
/**
 * Minions whose session entry (key, Crypticle) one thread keeps when the master's session table holds the rest
 * (count): the bound of the Crypticles holding cipher contexts, so an entry past it would have none anyway.
 */
export const sessionEntriesWithTableMax = cipherContextHoldersMax;

/**
 * A temp file beside `file`, named independently of it: `<id>.<pid>.<rand>.tmp` was longer than NAME_MAX (255)
 * for ids of 232 bytes and more, so a minion with such an id had its key accepted and could never sign in.
 * The leading dot and the `.tmp` end keep it out of id listings (sessionIds, the keyless purge).
 */
function tmpName(file: string): string {
  return path.join(path.dirname(file), `.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`);
}

/** A session key as written by generateKeyString: 56 bytes in base64. */
const KEY_TEXT = /^[A-Za-z0-9+/]{75}=$/;

/**
 * Write a fresh key: complete in a temp file first, then either link it into place only if no key
 * exists yet (`create`: two threads answering the same minion's re-sent `_auth` agree on the one key
 * that won), or rename it over an expired one (`replace`). True when this call's key is the one in place.
 *
 * The file's mtime is the key's creation time (session-merge.ts: the newest key wins across masters), so it
 * is set to `createdMs` explicitly: the kernel stamps a write from its coarse clock, which can lag by a tick
 * or more, and two masters' keys made a few ms apart could then tie and be ordered by their text instead.
 */
export function writeSessionKeyFile(file: string, mode: "create" | "replace", createdMs = Date.now()): boolean {
  const tmp = tmpName(file);
  writeFileSync(tmp, generateKeyString(), { mode: 0o600 });
  // the middle of the millisecond: utimes takes float seconds, whose rounding must not move the stamp into
  // the previous millisecond (readers floor mtimeMs)
  const stamp = (Math.floor(createdMs) + 0.5) / 1000;
  utimesSync(tmp, stamp, stamp);
  if (mode === "replace") {
    renameSync(tmp, file);
    return true;
  }
  try {
    linkSync(tmp, file);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    return false;
  } finally {
    unlinkSync(tmp);
  }
}

/** how often a thread re-reads a minion's key file after a request its cached keys could not open, ms */
export const sessionRefreshMsMin = 100;
/** requests per minion answered with another key than the current one, remembered until answered, count */
const otherKeyRepliesMax = 64;

/**
 * A minion's session key as a thread holds it. A request the current key cannot open is tried with the
 * minion's other live keys, read from the file again (at most every sessionRefreshMsMin, so a key a peer
 * sent a moment ago is found before the 1 s cache would show it); the reply to that request is sealed with the
 * key that opened it, found by the request's nonce (unique per request), so concurrent requests never mix keys.
 */
export class SessionCrypticle extends Crypticle {
  /** made when a request first needs another key (most minions never do: one Map less per minion and thread) */
  private byNonce: Map<string, Crypticle> | undefined;

  constructor(
    key: string,
    private readonly others: () => Crypticle[],
  ) {
    super(key);
  }

  override loads(data: Buffer, opts: LoadsOptions = {}): WireValue {
    try {
      return super.loads(data, opts);
    } catch (e) {
      if (!isBrineError(e, "CRYPTICLE_AUTH")) throw e;
      for (const c of this.others()) {
        let v: WireValue;
        try {
          v = c.loads(data, opts);
        } catch {
          continue;
        }
        const nonce = isMap(v) && typeof v.nonce === "string" ? v.nonce : undefined;
        if (nonce !== undefined) {
          this.byNonce ??= new Map();
          if (this.byNonce.size >= otherKeyRepliesMax) this.byNonce.delete(this.byNonce.keys().next().value!);
          this.byNonce.set(nonce, c);
        }
        return v;
      }
      throw e;
    }
  }

  override dumps(obj: unknown, nonce?: string, framed = false): Buffer {
    if (nonce !== undefined && this.byNonce !== undefined && this.byNonce.size > 0) {
      const c = this.byNonce.get(nonce);
      if (c) {
        this.byNonce.delete(nonce);
        return c.dumps(obj, nonce, framed);
      }
    }
    return super.dumps(obj, nonce, framed);
  }
}

interface Entry {
  key: string;
  crypticle: SessionCrypticle;
  mtimeMs: number;
  ino: number;
  checkedAt: number;
  /** the minion's other live keys as last read, when, and the file's identity then */
  others: { at: number; mtimeMs: number; ino: number; keys: (HeldKey & { crypticle: Crypticle })[] };
}

/** A key this master created (what the cluster sends its peers). */
export type SessionKeyChange = { id: string; key: string; t: number };

export class SessionKeys {
  private readonly cache = new Map<string, Entry>();
  readonly dir: string;
  private onCreated: ((c: SessionKeyChange) => void) | undefined;
  private readonly entriesMax: number;
  private fullWarned = false;

  /**
   * `table`: the master's session table (src/shared/session-table.ts), shared by its request threads: this thread
   * then keeps at most sessionEntriesWithTableMax entries, and one minion's file is checked once a second by one
   * thread for all of them, not by each.
   */
  constructor(
    cachedir: string,
    private readonly publishSessionS: number,
    private readonly now: () => number = Date.now,
    private readonly table?: SessionTable,
  ) {
    this.dir = path.join(cachedir, "sessions");
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    this.entriesMax = table ? sessionEntriesWithTableMax : cacheEntriesMax;
  }

  /** Minions whose entry this thread keeps (tests). */
  get entries(): number {
    return this.cache.size;
  }

  /** Report every key this thread creates or renews (clustered: the peers get it). */
  track(onCreated: (c: SessionKeyChange) => void): void {
    this.onCreated = onCreated;
  }

  /**
   * The session key for `id`, creating or renewing the file as Salt's session_key does. `key` is the current
   * key (what an auth reply hands out); `crypticle` opens a request encrypted with any live key of the minion.
   */
  get(id: string): { key: string; crypticle: Crypticle } {
    return this.load(id, true)!;
  }

  /**
   * The live session key of `id` for opening a request, or undefined when this master holds none (no file, or
   * its key is older than `publish_session`): never created or renewed here. Salt's master creates one when it
   * decodes a request, but a key made then cannot open the request being decoded; clustered it would also
   * supersede, as the newest key, the one the peer that signed the minion in is sending (session-merge.ts).
   * Only a sign-in (get) makes keys.
   */
  find(id: string): { key: string; crypticle: Crypticle } | undefined {
    return this.load(id, false);
  }

  /**
   * Whether a live key of `id` this master holds now seals `cipher` (its HMAC checked, nothing decrypted): what a
   * request waiting for its minion's key from a peer is checked with (session-wait.ts).
   */
  opens(id: string, cipher: Buffer): boolean {
    const e = this.load(id, false);
    if (!e) return false;
    return e.crypticle.authentic(cipher) || this.otherKeys(id, e).some((c) => c.authentic(cipher));
  }

  private load(id: string, create: boolean): Entry | undefined {
    if (!validId(id)) throw new BrineError("BAD_ID", JSON.stringify(id));
    const t = this.now();
    const c = this.cache.get(id);
    const maxAgeMs = this.publishSessionS * 1000;
    // a sign-in (create) always checks the file: the key it hands out is the one a peer merged a moment ago, not
    // the one a thread saw under a second before (one stat, against the sign-in's RSA work)
    if (!create && c && t - c.checkedAt < cacheTtlMs && t - c.mtimeMs < maxAgeMs) return c;
    // another thread's check of the file, under a second old: its key, without touching the file
    const rec = create ? undefined : this.table?.read(id);
    if (rec && t - rec.checkedAt >= 0 && t - rec.checkedAt < cacheTtlMs && t - rec.mtimeMs < maxAgeMs) {
      if (c && c.key === rec.key && c.mtimeMs === rec.mtimeMs && c.ino === rec.ino) {
        c.checkedAt = rec.checkedAt;
        return c;
      }
      // the other live keys are read from the file only if a request needs them (otherKeys)
      return this.remember(id, rec.key, rec.mtimeMs, rec.ino, rec.checkedAt, undefined);
    }
    const file = path.join(this.dir, id);
    let st = statSync(file, { throwIfNoEntry: false });
    let created = false;
    if (!create && (st === undefined || t - st.mtimeMs > maxAgeMs)) return undefined;
    if (st === undefined) {
      created = writeSessionKeyFile(file, "create", t);
      st = statSync(file);
    } else if (t - st.mtimeMs > maxAgeMs) {
      created = writeSessionKeyFile(file, "replace", t);
      st = statSync(file);
    }
    if (c && c.mtimeMs === st.mtimeMs && c.ino === st.ino) {
      c.checkedAt = t;
      this.share(id, c);
      return c;
    }
    let set = readSet(file);
    if (!create && !set) return undefined; // damaged: a sign-in replaces it
    if (!set || !KEY_TEXT.test(set.current.key)) {
      // a damaged file (garbage, empty, cut short) counts as absent: a new key replaces it and the minion signs
      // in again with it, instead of being refused for good
      log.warning(`Session key file ${file} is damaged; replacing it with a new key (the minion signs in again)`);
      created = writeSessionKeyFile(file, "replace", t);
      st = statSync(file);
      set = parseSessionFile(readFileSync(file, "latin1"), st.mtimeMs);
      if (!set) throw new BrineError("BAD_ID", `session key file for ${id} could not be written`);
    }
    const entry = this.remember(id, set.current.key, st.mtimeMs, st.ino, t, { at: t, mtimeMs: st.mtimeMs, ino: st.ino, keys: this.othersOf(set, set.current.key, t) });
    this.share(id, entry);
    if (created) this.onCreated?.({ id, key: set.current.key, t: Math.floor(st.mtimeMs) });
    return entry;
  }

  /** A new entry for `id` in this thread's cache (the oldest goes when it is full). `others` undefined: not read yet. */
  private remember(id: string, key: string, mtimeMs: number, ino: number, checkedAt: number, others: Entry["others"] | undefined): Entry {
    const entry: Entry = {
      key,
      crypticle: new SessionCrypticle(key, () => this.otherKeys(id, entry)),
      mtimeMs,
      ino,
      checkedAt,
      others: others ?? { at: -Infinity, mtimeMs: NaN, ino: NaN, keys: [] },
    };
    this.cache.delete(id);
    if (this.cache.size >= this.entriesMax) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(id, entry);
    return entry;
  }

  /** This thread's check of `id`'s file, for the other threads (the session table). */
  private share(id: string, e: Entry): void {
    if (!this.table) return;
    if (!this.table.write(id, { key: e.key, mtimeMs: e.mtimeMs, ino: e.ino, checkedAt: e.checkedAt }) && this.table.full && !this.fullWarned) {
      this.fullWarned = true;
      log.warning(`The session table is full (${this.table.used} minions, brine_session_table_minions): a request thread reads the key file of a minion past it whenever its own few hundred entries do not hold it`);
    }
  }

  private othersOf(set: SessionKeySet, primary: string, t: number): (HeldKey & { crypticle: Crypticle })[] {
    const keys = [set.current, ...liveAlts(set, t, this.publishSessionS * 1000)].filter((k) => k.key !== primary && t - k.t < this.publishSessionS * 1000);
    return keys.map((k) => ({ ...k, crypticle: new Crypticle(k.key) }));
  }

  /**
   * The minion's live keys other than the entry's current one, re-read from the file at most every
   * sessionRefreshMsMin, and at once when the file was replaced since it was last read (one stat: a sign-in's new
   * key, written a moment before the request sealed with it, must open that request).
   */
  private otherKeys(id: string, e: Entry): Crypticle[] {
    const t = this.now();
    const file = path.join(this.dir, id);
    const st = statSync(file, { throwIfNoEntry: false });
    const replaced = st !== undefined && (st.mtimeMs !== e.others.mtimeMs || st.ino !== e.others.ino);
    if (st && (replaced || t - e.others.at >= sessionRefreshMsMin)) {
      const set = readSet(file);
      if (set) e.others = { at: t, mtimeMs: st.mtimeMs, ino: st.ino, keys: this.othersOf(set, e.key, t) };
    }
    return e.others.keys.filter((k) => t - k.t < this.publishSessionS * 1000).map((k) => k.crypticle);
  }
}

// ------------------------------------------------------------------ peers' keys (the mirror thread)

function readSet(file: string): SessionKeySet | undefined {
  try {
    const st = statSync(file);
    const set = parseSessionFile(readFileSync(file, "latin1"), st.mtimeMs);
    return set && KEY_TEXT.test(set.current.key) ? set : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Merges a peer's key for `id` into `sessionsDir/<id>` (temp file, mtime = the current key's creation, rename).
 * True when the file changed.
 */
export function applyPeerSessionKey(sessionsDir: string, id: string, incoming: HeldKey, lifetimeMs: number, nowMs: number): boolean {
  if (!validId(id)) return false;
  const file = path.join(sessionsDir, id);
  const next = mergeSessionKeys(readSet(file), incoming, nowMs, lifetimeMs);
  if (!next) return false;
  const tmp = tmpName(file);
  writeFileSync(tmp, formatSessionFile(next), { mode: 0o600 });
  const s = next.current.t / 1000;
  utimesSync(tmp, s, s);
  renameSync(tmp, file);
  return true;
}

/**
 * The live keys of minions whose id sorts after `after` (at most `max` minions), created at or after `sinceMs`:
 * a chunk of a bulk sync. `next` is the cursor for the following chunk (undefined at the end).
 */
export function listSessionKeys(sessionsDir: string, ids: readonly string[], after: string | undefined, max: number, sinceMs: number, lifetimeMs: number, nowMs: number): { keys: SessionKeyChange[]; next: string | undefined } {
  const keys: SessionKeyChange[] = [];
  let i = after === undefined ? 0 : lowerBound(ids, after);
  if (after !== undefined && ids[i] === after) i++;
  let n = 0;
  for (; i < ids.length && n < max; i++, n++) {
    const id = ids[i]!;
    const set = readSet(path.join(sessionsDir, id));
    if (!set) continue;
    for (const k of [set.current, ...set.alts]) {
      if (k.t >= sinceMs && nowMs - k.t < lifetimeMs) keys.push({ id, key: k.key, t: k.t });
    }
  }
  return { keys, next: i < ids.length ? ids[i - 1] : undefined };
}

/** Sorted minion ids with a session key file (temp files left out). */
export function sessionIds(sessionsDir: string): string[] {
  try {
    return readdirSync(sessionsDir)
      .filter((n) => validId(n) && !n.endsWith(".tmp"))
      .sort();
  } catch {
    return [];
  }
}

function lowerBound(sorted: readonly string[], x: string): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
