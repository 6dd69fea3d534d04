/**
 * A clustered master's job cache, as its peers fill it (run in the mirror thread, src/workers/state-sync/worker.ts):
 *
 * - **Live**: the job records a peer forwards with its events. Only the frames the origin marked verified (its
 *   own `_return` and publish paths, forwarding.ts) reach storeEvents; an event a minion fired never does,
 *   whatever its tag says.
 *     salt/job/<jid>/new        -> the job's load and expected minions, unless this master has the load already
 *     salt/job/<jid>/ret/<id>   -> the return (refused, as locally, when one for (jid, id) exists: no duplicates)
 * - **Bulk** (cache-sync pulls, sync-store.ts): what a master missed while it was away (stopped, paused, cut off)
 *   is read from a peer's job cache by jid time (`job` and `ret` records, records.ts) and stored the same way.
 */
import { EventStreamReader } from "../../shared/event-frame.js";
import { getLogger } from "../../shared/log.js";
import { validId, validJid } from "../../shared/protocol/ids.js";
import { formatJid, jidToMs } from "../../shared/protocol/jid.js";
import { JobCache, type ReturnRecord } from "../../lib/store/job-cache.js";
import type { Store } from "../../lib/store/lmdb-env.js";
import { syncCbor, type JobRecord, type RetRecord } from "../../shared/sync-records.js";
import { LogBudget } from "../../shared/log-budget.js";
import type { DecodeLimits } from "../../shared/protocol/msgpack.js";
import { frameBytesMax, msgpackDepthMax, msgpackElementsMax } from "../../shared/protocol/limits.js";

/** the fields an origin adds to a minion's load in its return event (tag, stamp, jid, id, ...), elements */
const forwardedEventExtraElements = 1024;
/** ...and bytes */
const forwardedEventExtraBytes = 64 * 1024;

const log = getLogger("brine.cluster.mirror");
/** one line per 10 s for this flood, then a count of what was held back */
const oversizeLog = new LogBudget(1, 10_000, (line) => log.warning(line), "bulk sync");
/** one line per 10 s for forwarded events refused (over forwardedEventLimits, or damaged), then a count */
const forwardedLog = new LogBudget(1, 10_000, (line) => log.warning(line), "forwarded events refused");
/**
 * What one forwarded job event frame may hold. The origin took the minion's request under the wire's limits
 * (src/shared/protocol/limits.ts: msgpackElementsMax elements) and wraps it in a few fields of its own, so no honest
 * event holds more; decoded, an element costs up to ~64 bytes of this thread's heap (an empty map), so one frame is at
 * most ~256 MiB of it: under the thread's bound (stateSyncHeapLimits), where the bus's limits (50,000,000 elements)
 * let one 8 MiB frame of empty maps end the thread.
 */
export const forwardedEventLimits: DecodeLimits = { bytesMax: frameBytesMax + forwardedEventExtraBytes, depthMax: msgpackDepthMax + 4, elementsMax: msgpackElementsMax + forwardedEventExtraElements };
const RET = /^salt\/job\/([^/]+)\/ret\/(.+)$/;
const NEW = /^salt\/job\/([^/]+)\/new$/;

/** one job-cache record a bulk sync sends at most (a larger return is left out, logged; the peer channel's frame is 8 MiB), bytes */
export const syncJobRecordBytesMax = 6 * 1024 * 1024;

export interface JobRecordsConfig {
  job_cache: boolean;
  job_cache_store_endtime: boolean;
}

export class JobRecords {
  readonly jobs: JobCache;
  /**
   * True while `jobs` is routed to a ring: then peers' job records are not stored here at all (neither
   * forwarded nor pulled): the hand-off places each job on its owners (src/workers/raft/job-placement.ts).
   */
  placed: () => boolean = () => false;

  constructor(
    private readonly s: Store,
    private readonly cfg: JobRecordsConfig,
  ) {
    this.jobs = new JobCache(s);
  }

  /**
   * Stores forwarded job event frames the origin verified (never call it with any other frame). Each frame is decoded
   * (under forwardedEventLimits), stored and let go of before the next: lmdb-js encodes a value when it is put, so
   * nothing decoded is held while the writes commit, and the calls in flight in this thread hold bytes, not objects
   * (with the decoded events kept across the commit, four returns of 4,000,000 empty maps, each one a minion may send,
   * took this thread past its heap bound and V8 aborted the whole master: test/hardening/forwarded-returns-heap-bound).
   */
  async storeEvents(frames: readonly Uint8Array[]): Promise<void> {
    if (this.placed()) return;
    const writes: Promise<unknown>[] = [];
    for (const f of frames) this.storeFrame(f, writes);
    await Promise.all(writes);
  }

  /** One forwarded frame: its events decoded, their writes issued into `writes`; nothing decoded outlives the call. */
  private storeFrame(f: Uint8Array, writes: Promise<unknown>[]): void {
    const reader = new EventStreamReader(forwardedEventLimits);
    let events;
    try {
      events = reader.push(Buffer.from(f.buffer, f.byteOffset, f.byteLength));
    } catch (e) {
      forwardedLog.line(`a forwarded event frame of ${f.byteLength} bytes was not stored: ${(e as Error).message}`);
      return;
    }
    if (reader.skipped > 0) forwardedLog.line(`a forwarded event frame of ${f.byteLength} bytes was not stored: its event's data does not decode (damaged, or over ${forwardedEventLimits.elementsMax} elements or depth ${forwardedEventLimits.depthMax})`);
    for (const { tag, data } of events) {
      if (data === null || typeof data !== "object" || Array.isArray(data)) continue;
      const r = RET.exec(tag);
      if (r) {
        const [, jid, id] = r as unknown as [string, string, string];
        if (validJid(jid) && validId(id) && "return" in data) writes.push(this.storeReturn(jid, id, data as ReturnRecord));
        continue;
      }
      const n = NEW.exec(tag);
      if (n) {
        const jid = n[1]!;
        if (!validJid(jid) || this.jobs.getLoad(jid)) continue;
        // not_connected: the origin's presence when it published (publish.ts), not part of the job's load
        const { minions, missing: _m, not_connected: _nc, _stamp, ...load } = data as Record<string, unknown>;
        const ids = Array.isArray(minions) ? minions.filter((x): x is string => typeof x === "string") : undefined;
        writes.push(this.jobs.saveLoad(jid, { ...load, jid, ret: (load as { ret?: unknown }).ret ?? "" }, ids));
      }
    }
  }

  private storeReturn(jid: string, id: string, rec: ReturnRecord): Promise<boolean> {
    if (!this.cfg.job_cache || this.jobs.isNocache(jid)) return Promise.resolve(false);
    return this.jobs.saveReturn(jid, id, rec, Boolean(this.cfg.job_cache_store_endtime));
  }

  /** Stores a bulk-sync record; true when it was new here. */
  async apply(r: JobRecord | RetRecord): Promise<boolean> {
    if (this.placed()) return false;
    if (r.k === "ret") return this.storeReturn(r.jid, r.id, r.v as unknown as ReturnRecord);
    if (this.s.loads.get(r.jid) !== undefined) return false;
    await this.jobs.saveLoad(r.jid, r.v, r.m);
    return true;
  }

  /**
   * One chunk of `bank` for a peer's bulk sync: records after the key `after` (jid, or `<jid>/<id>`), else from
   * the first jid of `sinceMs` on, at most `max`; `next` is the key to resume after (undefined: the bank is done).
   */
  dump(bank: "job" | "ret", after: string | undefined, max: number, sinceMs: number): { records: (JobRecord | RetRecord)[]; next: string | undefined } {
    const start = after ?? formatJid(Math.max(0, sinceMs), 0);
    const records: (JobRecord | RetRecord)[] = [];
    let last: string | undefined;
    let seen = 0;
    const db = bank === "job" ? this.s.loads : this.s.returns;
    for (const { key, value } of db.getRange({ start, limit: max + 1 })) {
      if (key === after) continue;
      if (seen === max) break;
      seen++;
      last = key;
      if (bank === "job") {
        if (!validJid(key) || value === null || typeof value !== "object") continue;
        const m = this.s.minions.get(key);
        records.push({ k: "job", jid: key, v: value, ...(Array.isArray(m) ? { m } : {}) });
        continue;
      }
      const slash = key.indexOf("/");
      const rec: RetRecord = { k: "ret", jid: key.slice(0, slash), id: key.slice(slash + 1), v: value };
      if (!validJid(rec.jid) || !validId(rec.id) || value === null || typeof value !== "object") continue;
      const bytes = (syncCbor.encode(rec) as Uint8Array).byteLength;
      if (bytes > syncJobRecordBytesMax) {
        oversizeLog.line(`a peer's bulk sync leaves out ${rec.id}'s return to ${rec.jid}: ${bytes} bytes`);
        continue;
      }
      records.push(rec);
    }
    return { records, next: seen === max ? last : undefined };
  }

  /** When the newest job in this master's cache was created (its jid's time), undefined when there is none. */
  newestMs(): number | undefined {
    for (const jid of this.s.loads.getKeys({ reverse: true, limit: 16 })) {
      const t = jidToMs(jid);
      if (!Number.isNaN(t)) return t;
    }
    return undefined;
  }
}
