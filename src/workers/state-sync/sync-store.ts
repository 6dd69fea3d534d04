/**
 * The storing side of cache sync, run in the mirror thread (src/workers/state-sync/worker.ts): applies peers' records to
 * this master's minion data cache, mine, session key files, protocol v3 marks and eauth tokens, and reads this master's copy back
 * in bounded chunks for a peer's bulk sync. Every decision about a record is in records.ts / session-merge.ts;
 * the job cache's banks (a pull that asks for them with `jobsSince`) are read and stored by job-records.ts.
 */
import path from "node:path";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { getLogger } from "../../shared/log.js";
import { applyPeerSessionKey, listSessionKeys, sessionIds } from "../../lib/store/sessions.js";
import type { Store } from "../../lib/store/lmdb-env.js";
import { MinionCache } from "../../lib/store/minion-cache.js";
import { JobRecords } from "./job-records.js";
import { NonceAppender, readNonceChunk } from "../../shared/nonce-journal.js";
import type { NonceSet } from "../../shared/nonce-set.js";
import { lmdbDir } from "../../lib/store/lmdb-env.js";
import { TokenStore } from "../../lib/auth/tokens.js";
import { V3Marks } from "../../lib/store/v3-marks.js";
import { decodeRecords, encodeRecords, syncCbor, type SyncRecord, type TokenRecord } from "../../shared/sync-records.js";
import { LogBudget } from "../../shared/log-budget.js";

const log = getLogger("brine.cluster.sync");
/** one line per 10 s for this flood, then a count of what was held back */
const refusedLog = new LogBudget(1, 10_000, (line) => log.warning(line), "cache-sync records");

/**
 * Where a bulk sync is: the bank it reads and the last key it sent from it (a minion id; a jid in `job`, a
 * `<jid>/<id>` in `ret`, a key of `auth/tokens` in `tok`, `<generation>:<offset>` in a nonce journal file).
 * Banks go data → mine → sess, then v3 when the pull asks for protocol v3 marks, then tok when it asks for eauth tokens, then job → ret when it asks for
 * the job cache, then nonce when it asks for the replay nonces.
 */
export interface SyncCursor {
  bank: "data" | "mine" | "sess" | "v3" | "tok" | "job" | "ret" | "nonce";
  after?: string;
}

export interface DumpRequest {
  cursor: SyncCursor;
  /** only records stamped (keys created) at or after this, ms since the epoch */
  since: number;
  /** the job cache too: jobs (and their returns) whose jid is at or after this time, ms since the epoch */
  jobsSince?: number;
  /** the request nonces this master remembers too */
  nonces?: boolean;
  /** eauth tokens too (a master that knows them asks; an older one, which would refuse the bank, does not) */
  tokens?: boolean;
  /** protocol v3 marks too (asked as tokens are) */
  v3?: boolean;
}

export interface DumpChunk {
  /** encodeRecords() of the chunk */
  b: Uint8Array;
  /** records in the chunk */
  n: number;
  /** the cursor of the next chunk; null: done */
  next: SyncCursor | null;
}

/** minions one bulk-sync chunk covers at most */
export const syncChunkIdsMax = 256;
/** encoded bytes one chunk aims to stay under (the peer channel's frame is 8 MiB) */
export const syncChunkBytesMax = 2 * 1024 * 1024;
/** how long the sorted listing of the sessions directory is reused across the chunks of a bulk sync, ms */
const sessionListingTtlMs = 10_000;

const BANKS: SyncCursor["bank"][] = ["data", "mine", "sess", "v3", "tok", "job", "ret", "nonce"];

/** the banks a pull reads, in order */
function banksFor(req: DumpRequest): SyncCursor["bank"][] {
  return BANKS.filter((b) => ((b === "job" || b === "ret") ? req.jobsSince !== undefined : b === "nonce" ? req.nonces === true : b === "tok" ? req.tokens === true : b === "v3" ? req.v3 === true : true));
}

/** packed nonces one bulk-sync chunk carries at most, bytes */
export const syncNonceChunkBytes = 1024 * 1024;

/** what keeps one minion's records (its session keys) in one chunk; a job or token record is its own */
function recordKey(r: SyncRecord): string {
  return r.k === "job" ? r.jid : r.k === "ret" ? `${r.jid}/${r.id}` : r.k === "nonce" ? "" : r.k === "tok" ? tokenKey(r) : r.id;
}

export class SyncStore {
  readonly cache: MinionCache;
  readonly jobRecords: JobRecords;
  /** this master's replay nonces (their journal directory, the set, an appender), to serve and to add to */
  private readonly nonces: { dir: string; set: NonceSet; appender: NonceAppender } | undefined;
  readonly tokens: TokenStore;
  readonly v3Marks: V3Marks;
  private readonly sessionsDir: string;
  private readonly lifetimeMs: number;
  private listing: { at: number; ids: string[] } | undefined;

  constructor(
    cfg: MasterConfig,
    store: Store,
    private readonly selfId: string,
    private readonly now: () => number = Date.now,
    nonceSet?: NonceSet,
  ) {
    if (nonceSet) {
      const dir = lmdbDir(cfg);
      this.nonces = { dir, set: nonceSet, appender: new NonceAppender(dir, nonceSet) };
    }
    this.cache = new MinionCache(store, now);
    this.jobRecords = new JobRecords(store, cfg);
    this.tokens = new TokenStore(store, now);
    this.v3Marks = new V3Marks(cfg.cachedir, now);
    this.sessionsDir = path.join(cfg.cachedir, "sessions");
    this.lifetimeMs = cfg.publish_session * 1000;
  }

  /** Applies a peer's record batches (bad records refused and logged). */
  async apply(from: string, batches: readonly Uint8Array[]): Promise<{ stored: number; refused: number }> {
    let stored = 0;
    let refused = 0;
    const writes: Promise<boolean>[] = [];
    for (const b of batches) {
      const d = decodeRecords(b, this.now());
      refused += d.refused;
      if (d.refused) refusedLog.line(`refused ${d.refused} cache-sync record(s) from ${from}: ${d.reason}`);
      for (const r of d.records) writes.push(this.applyOne(r));
    }
    for (const ok of await Promise.all(writes)) if (ok) stored++;
    return { stored, refused };
  }

  private async applyOne(r: SyncRecord): Promise<boolean> {
    if (r.k === "sess") {
      try {
        return applyPeerSessionKey(this.sessionsDir, r.id, { key: r.key, t: r.t }, this.lifetimeMs, this.now());
      } catch (e) {
        log.error(`storing a peer's session key for ${r.id} failed: ${(e as Error).message}`);
        return false;
      }
    }
    if (r.k === "job" || r.k === "ret") return this.jobRecords.apply(r);
    if (r.k === "nonce") {
      if (!this.nonces || this.nonces.set.insertPacked(r.b) === 0) return false;
      this.nonces.appender.append(r.b);
      return true;
    }
    if (r.k === "tok") return this.tokens.applyPeer(r);
    if (r.k === "v3") {
      try {
        return this.v3Marks.applyPeer(r.id);
      } catch (e) {
        log.error(`storing a peer's v3 mark for ${r.id} failed: ${(e as Error).message}`);
        return false;
      }
    }
    // a bank placed on a ring is handed to its owners (src/workers/raft/minion-placement.ts), not mirrored
    if (this.minionsPlaced(r.k)) return false;
    return this.cache.applyPeer(r);
  }

  /** Whether a bank of the minion data cache is placed on a ring now (set by the thread from the shared ring). */
  minionsPlaced: (bank: "data" | "mine") => boolean = () => false;

  /** One chunk of this master's copy, from `req.cursor` on. */
  dump(req: DumpRequest): DumpChunk {
    let cursor: SyncCursor | null = req.cursor;
    const records: SyncRecord[] = [];
    // walk banks until the chunk has something or everything is read (a bank may be empty or all filtered out)
    while (cursor && records.length === 0) {
      const { bank, after }: SyncCursor = cursor;
      let next: string | undefined;
      if (bank === "sess") {
        const r = listSessionKeys(this.sessionsDir, this.sessionListing(after === undefined), after, syncChunkIdsMax, req.since, this.lifetimeMs, this.now());
        records.push(...r.keys.map((k) => ({ k: "sess" as const, ...k })));
        next = r.next;
      } else if (bank === "v3") {
        const r = this.v3Marks.list(after, syncChunkIdsMax, req.since, after === undefined);
        records.push(...r.marks.map((m) => ({ k: "v3" as const, ...m })));
        next = r.next;
      } else if (bank === "tok") {
        const r = this.tokens.dump(after, syncChunkIdsMax, req.since);
        records.push(...r.records);
        next = r.next;
      } else if (bank === "nonce") {
        const r = this.nonces ? readNonceChunk(this.nonces.dir, this.nonces.set.generation(), after, syncNonceChunkBytes) : { b: undefined, next: undefined };
        if (r.b) records.push({ k: "nonce", b: r.b });
        next = r.next;
      } else if (bank === "job" || bank === "ret") {
        const r = this.jobRecords.dump(bank, after, syncChunkIdsMax, req.jobsSince ?? 0);
        records.push(...r.records);
        next = r.next;
      } else {
        const r = this.cache.dump(bank, after, syncChunkIdsMax, req.since, this.selfId);
        records.push(...r.records);
        next = r.next;
      }
      const order = banksFor(req);
      const following: SyncCursor["bank"] | undefined = order[order.indexOf(bank) + 1];
      cursor = next !== undefined ? { bank, after: next } : following ? { bank: following } : null;
    }
    // stay under the byte budget: halve the chunk until it fits (the cursor then resumes after the last record kept)
    let b = encodeRecords(records);
    let kept = records.length;
    while (b.byteLength > syncChunkBytesMax && kept > 1) {
      kept = Math.ceil(kept / 2);
      b = encodeRecords(records.slice(0, kept));
    }
    if (kept < records.length) {
      // never split one minion's records (its session keys are a few bytes): the cursor resumes after it
      const last = records[kept - 1]!;
      while (kept < records.length && records[kept]!.k === last.k && recordKey(records[kept]!) === recordKey(last)) kept++;
      b = encodeRecords(records.slice(0, kept));
      if (kept < records.length) cursor = { bank: last.k, after: recordKey(last) };
    }
    return { b, n: kept, next: cursor };
  }

  /** A peer's pull request (bytes) → the reply bytes: `{b, n, next}`, or `{error}` for a malformed request. */
  serve(request: Uint8Array): Uint8Array {
    const req = decodePull(request);
    if (typeof req === "string") return syncCbor.encode({ error: req }) as Uint8Array;
    return syncCbor.encode(this.dump(req)) as Uint8Array;
  }

  /** Applies a pull reply from `from`; the cursor to ask for next (null: done), or a reason it was refused. */
  async applyChunk(from: string, reply: Uint8Array): Promise<{ next: SyncCursor | null; n: number } | { error: string }> {
    let r: Partial<DumpChunk> & { error?: unknown };
    try {
      r = syncCbor.decode(reply) as typeof r;
    } catch (e) {
      return { error: `undecodable chunk: ${(e as Error).message}` };
    }
    if (r === null || typeof r !== "object") return { error: "chunk is not a map" };
    if (typeof r.error === "string") return { error: `the peer refused: ${r.error}` };
    if (!(r.b instanceof Uint8Array)) return { error: "chunk without records" };
    const next = r.next === null ? null : checkCursor(r.next);
    if (typeof next === "string") return { error: next };
    const { stored } = await this.apply(from, [r.b]);
    return { next, n: stored };
  }

  private sessionListing(fresh: boolean): string[] {
    const t = this.now();
    if (fresh || !this.listing || t - this.listing.at > sessionListingTtlMs) this.listing = { at: t, ids: sessionIds(this.sessionsDir) };
    return this.listing.ids;
  }
}

/** a token record's key in `auth/tokens` (a tombstone's is `x/<token>`) */
function tokenKey(r: TokenRecord): string {
  return r.v === null ? `x/${r.token}` : r.token;
}

function checkCursor(x: unknown): SyncCursor | string {
  if (x === null || typeof x !== "object") return "bad cursor";
  const c = x as { bank?: unknown; after?: unknown };
  if (!BANKS.includes(c.bank as SyncCursor["bank"])) return "bad cursor bank";
  if (c.after !== undefined && (typeof c.after !== "string" || c.after.length > 4096)) return "bad cursor position";
  return { bank: c.bank as SyncCursor["bank"], ...(c.after !== undefined ? { after: c.after as string } : {}) };
}

/** A pull request as the puller's main thread encodes it. */
export function encodePull(req: DumpRequest): Uint8Array {
  return syncCbor.encode(req) as Uint8Array;
}

export function decodePull(bytes: Uint8Array): DumpRequest | string {
  let x: { cursor?: unknown; since?: unknown; jobsSince?: unknown; nonces?: unknown; tokens?: unknown; v3?: unknown };
  try {
    x = syncCbor.decode(bytes) as typeof x;
  } catch {
    return "undecodable request";
  }
  if (x === null || typeof x !== "object") return "request is not a map";
  const cursor = checkCursor(x.cursor);
  if (typeof cursor === "string") return cursor;
  if (typeof x.since !== "number" || !Number.isFinite(x.since) || x.since < 0) return "bad since";
  const js = x.jobsSince;
  if (js !== undefined && (typeof js !== "number" || !Number.isFinite(js) || js < 0)) return "bad jobsSince";
  if (x.nonces !== undefined && typeof x.nonces !== "boolean") return "bad nonces flag";
  if (x.tokens !== undefined && typeof x.tokens !== "boolean") return "bad tokens flag";
  if (x.v3 !== undefined && typeof x.v3 !== "boolean") return "bad v3 flag";
  return { cursor, since: x.since, ...(js !== undefined ? { jobsSince: js } : {}), ...(x.nonces === true ? { nonces: true } : {}), ...(x.tokens === true ? { tokens: true } : {}), ...(x.v3 === true ? { v3: true } : {}) };
}
