/**
 * The job cache (Salt's local_cache semantics over LMDB banks): loads, expected minions, one return
 * per (jid, minion) — a second return for the same pair is refused, as local_cache refuses it when the
 * directory exists — end times, nocache markers, and age-based cleanup by `keep_jobs_seconds`.
 */
import { randomInt } from "node:crypto";
import { formatJid, jidToMs, jidToTime } from "../../shared/protocol/jid.js";
import { durable, type Store } from "./lmdb-env.js";
import { decodeWire, encodeWire, type DecodeLimits } from "../../shared/protocol/msgpack.js";
import { encodeListEntry } from "./job-listing.js";
import { LogBudget } from "../../shared/log-budget.js";
import { getLogger } from "../../shared/log.js";

export interface ReturnRecord {
  return: unknown;
  /**
   * The return already msgpack-encoded (a runner's result, encoded once in its thread for its caller): stored as
   * those bytes instead of `return`, so a 100,000-job `jobs.list_jobs` answer is not encoded a second time (CBOR)
   * for its own job record; `returnsFor` decodes it, so readers see `return` either way.
   */
  return_msgpack?: Uint8Array;
  retcode?: unknown;
  success?: unknown;
  out?: unknown;
  fun?: unknown;
  fun_args?: unknown;
}

/**
 * keep_jobs pruning (`JobCache.prune`) in two steps. First the cutoff is stored (`jobs/pruned`): from its commit on,
 * every reader of this class hides every job older than it, so no job is ever seen half-pruned (between passes or
 * after a crash mid-prune). Then the records are deleted in the background, in one of two ways:
 * - **alongside returns**: each durable return write (`saveReturn`) issues up to `reclaimAlongMax` deletes in the
 *   same turn, so they go into the return's own transaction (lmdb-js makes one transaction of a turn's writes) and
 *   its own fsync: while returns are stored, in any thread, the prune has no commit of its own for them to wait on;
 * - **passes of its own** (`cleanup`), only when no return was stored in its thread and no record deleted by another
 *   thread during a pause (no returns flowing), each one write transaction of at most prunePassRecordsMax records.
 * A crash at any point leaves either the cutoff not stored (nothing deleted, nothing hidden) or stored (the jobs
 * older are hidden, whatever of them is left on disk is deleted by the next prune): never a lost return of a newer
 * job (no delete touches one), never an old job listed with some of its returns missing.
 */

/** A pass of the prune's own removes at most this many records, records. */
export const prunePassRecordsMax = 250;
/**
 * ...and stops choosing records once it has spent this long in its thread (the request worker whose event loop
 * also stores returns), whatever the count, ms.
 */
export const prunePassChoosingMsMax = 2;
/**
 * Between two looks at the prune's progress the prune waits as long as its last pass took from its start to its
 * commit, and at least this, ms.
 */
export const prunePauseMsMin = 50;
/** Deletes a durable return write carries along while a prune is under way, records. */
export const reclaimAlongMax = 32;
/** With nothing to delete, a thread looks again for a newer prune cutoff (another thread's) this often, ms. */
export const reclaimCheckMs = 1000;

/** The clock and the pause a prune runs by (injected: tests drive them). */
export interface PruneClock {
  now(): number;
  pause(ms: number): Promise<void>;
}

/** performance.now and a timer. */
export const realPruneClock: PruneClock = {
  now: () => performance.now(),
  pause: (ms) => new Promise((r) => setTimeout(r, ms)),
};

/** How long to wait after a pass that took `passMs` from its start to its commit (see prunePauseMsMin). */
export function prunePauseMs(passMs: number): number {
  return Math.max(prunePauseMsMin, Number.isFinite(passMs) ? passMs : prunePauseMsMin);
}

/**
 * What the prune does after a pause (pure): `before`/`after` are the oldest records it still has to delete (one key
 * a bank, "" when none is left) read before the pause and after it; `cutoffStored` whether the cutoff is committed;
 * `returnsHere` whether its own thread issued durable return writes during the pause or has some still waiting for
 * the disk (they carry its deletes, and store the cutoff, even when the disk holds them longer than the pause).
 * - "done": nothing older than the cutoff is left, and the cutoff is stored;
 * - "wait": returns are being stored here, or records were deleted during the pause (another thread's returns):
 *   no commit of the prune's own for a return to queue behind;
 * - "pass": nothing moved and no return came (or the cutoff is still not stored): one pass of its own.
 */
export function pruneStep(before: string, after: string, cutoffStored: boolean, returnsHere: boolean): "done" | "wait" | "pass" {
  if (after === "" && cutoffStored) return "done";
  if (returnsHere) return "wait";
  if (!cutoffStored) return "pass";
  return after !== before ? "wait" : "pass";
}

/** What a stored return keeps of the minion's load besides `return` (Salt's local_cache keeps these). */
const RETURN_FIELDS = ["retcode", "success", "out", "fun", "fun_args"] as const;
/** lmdb-js takes put options as an object in the third argument, though its typings name only a version. */
const NO_OVERWRITE = { noOverwrite: true } as unknown as number;
/** our own encoding of our own value: no bound but the stored record's size */
const OWN_RETURN_LIMITS: DecodeLimits = { bytesMax: Number.MAX_SAFE_INTEGER, depthMax: 1000, elementsMax: Number.MAX_SAFE_INTEGER };

/** A stored return as readers see it: `return_msgpack` decoded into `return` (an undecodable one reads as its error). */
function unpacked(value: Record<string, unknown>): Record<string, unknown> {
  const packed = value.return_msgpack;
  if (!(packed instanceof Uint8Array)) return value;
  const { return_msgpack: _bytes, ...rest } = value;
  try {
    return { ...rest, return: decodeWire(packed, OWN_RETURN_LIMITS) };
  } catch (e) {
    return { ...rest, return: `the stored return could not be decoded: ${(e as Error).message}` };
  }
}

/** A stored return's `return` as msgpack bytes: those it was stored as, or the value encoded. */
export function returnBytes(rec: Record<string, unknown>): Uint8Array {
  const packed = rec.return_msgpack;
  return packed instanceof Uint8Array ? packed : encodeWire(rec.return);
}

/**
 * Where the bytes a CBOR byte string holds start (how the `jobs/listed` entries are stored: they run to the end
 * of the value); -1 for any other value or one that does not hold a map (the entry is then made again from the
 * job's load).
 */
function cborBytesStart(v: Uint8Array): number {
  const t = v[0];
  if (t === undefined || t >> 5 !== 2) return -1;
  const info = t & 0x1f;
  const [n, at] = info < 24 ? [info, 1] : info === 24 ? [v[1]!, 2] : info === 25 ? [(v[1]! << 8) | v[2]!, 3] : info === 26 ? [((v[1]! << 24) >>> 0) + ((v[2]! << 16) | (v[3]! << 8) | v[4]!), 5] : [-1, 0];
  // and what it holds starts as an entry does (a map: job-listing.ts), or it is made again
  const m = v[at];
  return n > 0 && at + n === v.length && m !== undefined && ((m >= 0x80 && m <= 0x8f) || m === 0xde) ? at : -1;
}

/** Where a thread's deletes alongside returns stopped: a bank (JobCache.pruneBanks) and the last key chosen in it. */
interface ReclaimAt {
  bank: number;
  key: string;
}

/** A fresh outbox stamp: a write rewrites its record's stamp, so a hand-off settles only what it sent (job-handoff.ts). */
export function handoffStamp(): number {
  return randomInt(1, 2 ** 31);
}

export class JobCache {
  /**
   * `placed(jid)`: true when jobs are routed to a ring (the caller's gate), so every record written here also
   * goes into the hand-off outbox (`jobs/handoff`) for the jid's owners; absent (the mirror, a hand-off's
   * receiver, a single master): no outbox. The outbox stamp is written before the record, so a record that is
   * committed always has its stamp committed too. `reclaimMax`: the deletes a durable return carries along
   * (reclaimAlongMax; the prune bench compares others on one fill).
   */
  constructor(
    private readonly s: Store,
    private readonly placed?: (jid: string) => boolean,
    private readonly clock: () => number = () => performance.now(),
    private readonly reclaimMax: number = reclaimAlongMax,
  ) {}

  /** The stored prune cutoff as last read (ms since the epoch, 0: none) and the jid it is (`formatJid(ms, 0)`). */
  private cutMs = 0;
  private cutJid = "";
  /** A cutoff this thread's prune chose and has not had stored: the next return write here stores it. */
  private pendingCut = 0;
  /** When this thread next looks for records to delete alongside a return (clock), and the last one it chose. */
  private reclaimNextAt = 0;
  private reclaimAt: ReclaimAt | undefined;
  /** Records deleted alongside this instance's return writes (the prune's report), and its durable return writes. */
  private reclaimed = 0;
  private returnsIssued = 0;
  /** This instance's durable return writes not yet on disk (a slow fsync holds them past a prune's pause). */
  private returnsWaiting = 0;

  /** The stored prune cutoff (ms since the epoch; 0 when none): jobs older are pruned, hidden from every reader. */
  private cutoff(): number {
    const v = this.s.pruned.get("before");
    const ms = typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0;
    if (ms !== this.cutMs) [this.cutMs, this.cutJid] = [ms, ms > 0 ? formatJid(ms, 0) : ""];
    return ms;
  }

  /** A reader's test: `gone(jid)` when `jid`'s job is older than the stored cutoff (a text compare first, then its time). */
  private goneTest(): (jidOrKey: string) => boolean {
    if (this.cutoff() === 0) return () => false;
    const [ms, text] = [this.cutMs, this.cutJid];
    return (k) => k < text && jidToMs(k) < ms;
  }

  /** Whether `jid`'s records are placed on a ring's owners (so this master may not hold all of its returns). */
  placing(jid: string): boolean {
    return this.placed?.(jid) === true;
  }

  /** Queues `key` (`<jid>` or `<jid>/<id>`) for the hand-off when jobs are placed. */
  private outbox(jid: string, key: string = jid): void {
    if (this.placed?.(jid)) void this.s.handoff.put(key, handoffStamp());
  }

  async saveLoad(jid: string, load: Record<string, unknown>, minions?: string[]): Promise<void> {
    const { key: _key, ...rest } = load;
    this.outbox(jid);
    // the job's list entry beside its load (same transaction: lmdb-js batches the writes of one turn)
    const puts: Promise<boolean>[] = [this.s.loads.put(jid, rest), this.s.listed.put(jid, encodeListEntry(jid, rest))];
    if (minions) puts.push(this.s.minions.put(jid, [...minions].sort()));
    await Promise.all(puts);
  }

  async markNocache(jid: string): Promise<void> {
    this.outbox(jid);
    await this.s.nocache.put(jid, true);
  }

  isNocache(jid: string): boolean {
    return this.s.nocache.get(jid) === true && !this.goneTest()(jid);
  }

  getLoad(jid: string): Record<string, unknown> | undefined {
    if (this.goneTest()(jid)) return undefined;
    const load = this.s.loads.get(jid);
    if (!load) return undefined;
    const minions = new Set<string>(this.s.minions.get(jid) ?? []);
    return { ...load, Minions: [...minions].sort() };
  }

  hasLoad(jid: string): boolean {
    return this.s.loads.doesExist(jid) && !this.goneTest()(jid);
  }

  /** Stores a job's end time as given (Salt's endtime text; a migrated job keeps the one Salt wrote). */
  async setEndtime(jid: string, text: string): Promise<void> {
    this.outbox(jid);
    await this.s.endtimes.put(jid, text);
  }

  /** The end time stored for a job (job_cache_store_endtime), or undefined. */
  endtime(jid: string): string | undefined {
    return this.goneTest()(jid) ? undefined : this.s.endtimes.get(jid);
  }

  expectedMinions(jid: string): string[] {
    return this.goneTest()(jid) ? [] : (this.s.minions.get(jid) ?? []);
  }

  /**
   * Adds minions matched below a syndic to a job's expected minions (Salt's save_minions with syndic_id).
   * Read-merge-write: two threads adding to one jid at once may lose one side's additions (they only
   * decide which non-returning minions jobs.* list as expected).
   */
  async addMinions(jid: string, ids: readonly string[]): Promise<void> {
    const have = new Set<string>(this.s.minions.get(jid) ?? []);
    const before = have.size;
    for (const id of ids) have.add(id);
    if (have.size === before) return;
    this.outbox(jid);
    await this.s.minions.put(jid, [...have].sort());
  }

  /** Whether a return for (jid, id) is stored (a syndic's resent batch skips it quietly). */
  hasReturn(jid: string, id: string): boolean {
    return this.s.returns.doesExist(`${jid}/${id}`) && !this.goneTest()(jid);
  }

  /**
   * Store one return durably. Resolves false when a return for (jid, id) already exists (refused).
   * The promise resolves only after the batch holding it is committed to disk.
   */
  saveReturn(jid: string, id: string, rec: ReturnRecord, storeEndtime: boolean): Promise<boolean> {
    const stored = durable(this.addReturn(jid, id, rec));
    this.returnsIssued++;
    this.returnsWaiting++;
    const settled = () => void this.returnsWaiting--;
    stored.then(settled, settled);
    this.reclaimAlong();
    if (!storeEndtime) return stored;
    return stored.then(async (ok) => {
      if (!ok) return ok;
      this.outbox(jid);
      await durable(this.s.endtimes.put(jid, jidToTime(jid)));
      return ok;
    });
  }

  /**
   * Store one return unless one is stored for (jid, id) (resolves false then); resolves when committed, not
   * waiting for the disk (a bulk import flushes once at its end: `flush`).
   */
  addReturn(jid: string, id: string, rec: ReturnRecord): Promise<boolean> {
    const value: Record<string, unknown> = rec.return_msgpack instanceof Uint8Array ? { return_msgpack: rec.return_msgpack } : { return: rec.return };
    for (const k of RETURN_FIELDS) if (rec[k] !== undefined) value[k] = rec[k];
    this.outbox(jid, `${jid}/${id}`);
    // MDB_NOOVERWRITE: LMDB itself refuses the write inside the commit when the key exists (atomic across
    // threads), and lmdb-js resolves false; cheaper than a conditional block (ifNoExists) around a put.
    return this.s.returns.put(`${jid}/${id}`, value, NO_OVERWRITE);
  }

  /** Resolves when every write committed so far is on disk. */
  async flush(): Promise<void> {
    await this.s.root.flushed;
  }

  /** {id: record} of every return stored for jid. */
  returnsFor(jid: string): Record<string, Record<string, unknown>> {
    const out: Record<string, Record<string, unknown>> = {};
    this.eachReturn(jid, (id, rec) => (out[id] = unpacked(rec)));
    return out;
  }

  /**
   * Every return stored for jid, in id order, as stored: one range read, one decode per return, nothing collected.
   * A return stored as msgpack bytes (`return_msgpack`, a runner's) is handed over as those bytes, not decoded
   * (`returnBytes` gives any return's msgpack bytes).
   */
  eachReturn(jid: string, each: (id: string, rec: Record<string, unknown>) => void): void {
    if (this.goneTest()(jid)) return;
    const prefix = `${jid}/`;
    for (const { key, value } of this.s.returns.getRange({ start: prefix, end: `${jid}0` })) each(key.slice(prefix.length), value);
  }

  /**
   * Every job's load (without `Minions`), oldest first: one pass over the loads bank (jobs.list_jobs at
   * 100,000 jobs is one cursor walk, not a lookup per jid plus its expected minions).
   */
  *loads(): IterableIterator<[string, Record<string, unknown>]> {
    const gone = this.goneTest();
    for (const { key, value } of this.s.loads.getRange()) if (value && !gone(key)) yield [key, value];
  }

  /** jids with a load, newest last; optionally only those newer than `sinceMs`. */
  listJids(): string[] {
    const gone = this.goneTest();
    return [...this.s.loads.getKeys()].filter((jid) => !gone(jid));
  }

  /**
   * Jobs to read once ahead of a call (a spare runner thread warms its read paths on them: runner-thread.ts), newest
   * first: jobs among the newest `recordsMax` returns all of whose returns there are at most `recordBytesMax` stored
   * bytes each (a runner's own job, whose one return may be a 13 MB job list, is passed over), at most `recordsMax`
   * returns in all. Reads keys and stored sizes only.
   */
  warmingJids(recordsMax: number, recordBytesMax: number): string[] {
    const byJid = new Map<string, boolean>();
    const gone = this.goneTest();
    let seen = 0;
    let oldest = "";
    for (const key of this.s.returns.getKeys({ reverse: true, limit: recordsMax })) {
      seen++;
      oldest = key.slice(0, key.indexOf("/"));
      if (gone(oldest)) continue;
      const small = (this.s.returns.getBinaryFast(key)?.length ?? 0) <= recordBytesMax;
      byJid.set(oldest, (byJid.get(oldest) ?? true) && small);
    }
    // with the window full, the oldest jid in it may have more returns than the window held: not read
    if (seen >= recordsMax) byJid.delete(oldest);
    return [...byJid].filter(([, small]) => small).map(([jid]) => jid);
  }

  /** The jid of the `n`th newest job (the oldest when there are fewer), or undefined when there is none. */
  nthNewestJid(n: number): string | undefined {
    const gone = this.goneTest();
    let last: string | undefined;
    let seen = 0;
    for (const jid of this.s.loads.getKeys({ reverse: true })) {
      if (gone(jid)) break; // older jobs are all gone too
      last = jid;
      if (++seen >= n) break;
    }
    return last;
  }

  /**
   * Every job's jobs.list_jobs entry (job-listing.ts), oldest first, handed to `each` as the msgpack bytes stored
   * beside its load (valid only during the call: copy what you keep): one walk of the loads' keys beside one
   * range read of the entries (and, with `opts.endtimes`, one of the end times: `each` gets the job's, or null),
   * no load decoded, no read per job, nothing kept per job. A job with a load and no entry (its load came as a raw
   * bank copy, or from before entries were kept) is listed from its load, and `repair` gets its entry to store; an
   * entry without a load (its load removed by a shed or a hand-off) is not listed. `opts.from`: from that jid on.
   * `each`'s end time is undefined when this listing did not read them (a caller asks `endtime`).
   */
  listing(each: (jid: string, bytes: Uint8Array, start: number, endtime?: string | null) => void, repair?: (jid: string, entry: Buffer) => void, opts: { from?: string; endtimes?: boolean } = {}): void {
    const range = opts.from === undefined ? {} : { start: opts.from };
    const entries = this.s.listedRaw.getRange(range)[Symbol.iterator]();
    let e = entries.next();
    const ends = opts.endtimes ? this.s.endtimes.getRange(range)[Symbol.iterator]() : undefined;
    let end = ends?.next();
    const gone = this.goneTest();
    for (const jid of this.s.loads.getKeys(range)) {
      if (gone(jid)) continue;
      let endtime: string | null | undefined;
      if (ends) {
        while (!end!.done && end!.value.key < jid) end = ends.next();
        endtime = !end!.done && end!.value.key === jid && typeof end!.value.value === "string" ? end!.value.value : null;
      }
      while (!e.done && e.value.key < jid) e = entries.next();
      const start = !e.done && e.value.key === jid ? cborBytesStart(e.value.value) : -1;
      if (start >= 0) {
        each(jid, e.value!.value, start, endtime);
        e = entries.next();
        continue;
      }
      const load = this.s.loads.get(jid);
      if (!load) continue;
      const made = encodeListEntry(jid, load);
      repair?.(jid, made);
      each(jid, made, 0, endtime);
    }
  }


  /** Stores list entries `listing` made from loads (not waiting for the disk: they can be made again). */
  async storeEntries(entries: readonly (readonly [string, Buffer])[]): Promise<void> {
    await Promise.all(entries.map(([jid, entry]) => this.s.listed.put(jid, entry)));
  }

  /** The job banks in the order their records are deleted: a job's load goes last. */
  private pruneBanks(): readonly Store["returns"][] {
    const s = this.s;
    return [s.returns, s.handoff, s.minions, s.endtimes, s.nocache, s.listed, s.loads] as unknown as Store["returns"][];
  }

  /**
   * Issues the deletes of up to `max` records of jobs older than `cutMs` (oldest first, bank by bank; after `from`
   * when given), stopping early once `spent()` says so after the first; returns their promises and where the last
   * is. Issued in one turn, they are one transaction.
   */
  private deleteOlder(cutMs: number, max: number, spent: () => boolean = () => false, from?: ReclaimAt): { dels: Promise<boolean>[]; last?: ReclaimAt } {
    const end = formatJid(cutMs, 0);
    const dels: Promise<boolean>[] = [];
    let last: ReclaimAt | undefined;
    const banks = this.pruneBanks();
    walk: for (let bank = from?.bank ?? 0; bank < banks.length; bank++) {
      const db = banks[bank]!;
      const after = from !== undefined && bank === from.bank ? from.key : undefined;
      for (const key of db.getKeys(after === undefined ? { end } : { start: after, end })) {
        if (dels.length >= max || (dels.length > 0 && spent())) break walk;
        if (key === after || !(jidToMs(key) < cutMs)) continue;
        dels.push(db.remove(key));
        last = { bank, key };
      }
    }
    return { dels, last };
  }

  /** The oldest record of each bank still to delete for `cutMs`, as one text ("" when nothing is left). */
  private frontier(cutMs: number): string {
    const end = formatJid(cutMs, 0);
    let out = "";
    for (const [i, db] of this.pruneBanks().entries()) {
      for (const key of db.getKeys({ end })) {
        if (jidToMs(key) < cutMs) {
          out += `${i}:${key} `;
          break;
        }
      }
    }
    return out;
  }

  /**
   * Called as a durable return write is issued: stores this thread's pending cutoff and issues up to
   * reclaimAlongMax deletes of records older than the stored one, in the same turn (the return's transaction and its
   * fsync). One batch in flight at a time; with nothing to delete, looks again after reclaimCheckMs.
   */
  private reclaimAlong(): void {
    const t = this.clock();
    if (this.pendingCut === 0 && t < this.reclaimNextAt) return;
    let cut = this.cutoff();
    const writes: Promise<unknown>[] = [];
    if (this.pendingCut > cut) {
      cut = this.pendingCut;
      writes.push(this.s.pruned.put("before", cut));
    }
    this.pendingCut = 0;
    // on from the last record issued (the batch before may not be committed yet, and would be chosen again)
    let { dels, last } = cut > 0 ? this.deleteOlder(cut, this.reclaimMax, undefined, this.reclaimAt) : { dels: [] as Promise<boolean>[], last: undefined };
    if (dels.length === 0 && this.reclaimAt !== undefined) ({ dels, last } = this.deleteOlder(cut, this.reclaimMax));
    this.reclaimAt = last;
    if (dels.length === 0) this.reclaimNextAt = t + reclaimCheckMs;
    if (writes.length === 0 && dels.length === 0) return;
    void Promise.all([...writes, ...dels])
      .then((done) => (this.reclaimed += done.slice(writes.length).filter((d) => d === true).length))
      .catch((e: unknown) => reclaimLog.line(`keep_jobs: deleting pruned records alongside a return failed (the prune's own passes delete them): ${(e as Error).message}`));
  }

  /**
   * One pass of the prune's own: stores the cutoff (now − keepSeconds, never moved back) and deletes records of
   * jobs older, at most prunePassRecordsMax of them and no more than it chose in prunePassChoosingMsMax of `now`'s
   * time, in one write transaction (the cutoff first); resolves with how many it removed once that is committed.
   * Every pass starts again from the oldest key of each bank, so a prune cut short is finished by the next.
   */
  async cleanup(keepSeconds: number, nowMs: number, now: () => number = realPruneClock.now): Promise<number> {
    if (keepSeconds <= 0) return 0;
    const started = now();
    const stored = this.cutoff();
    const cut = Math.max(nowMs - keepSeconds * 1000, stored);
    const writes: Promise<unknown>[] = cut > stored ? [this.s.pruned.put("before", cut)] : [];
    if (this.pendingCut <= cut) this.pendingCut = 0;
    const { dels } = this.deleteOlder(cut, prunePassRecordsMax, () => now() - started >= prunePassChoosingMsMax);
    await Promise.all([...writes, ...dels]);
    return dels.length;
  }

  /**
   * keep_jobs pruning (the request worker's cleanup task), see the comment at prunePassRecordsMax: the cutoff is
   * stored by this thread's next return write (or by the first pass of its own); then, after each pause
   * (prunePauseMs of the last pass), `pruneStep` decides between waiting (returns are deleting records), a pass of
   * its own, and done. Resolves with the records its passes removed, its passes, and the records this thread's
   * return writes deleted meanwhile (other threads' are not counted).
   */
  async prune(keepSeconds: number, nowMs: number, clock: PruneClock = realPruneClock): Promise<{ removed: number; passes: number; alongside: number }> {
    if (keepSeconds <= 0) {
      // keep_jobs_seconds 0 (forever) after a prune: the cutoff goes, so nothing older is hidden or deleted any more
      if (this.cutoff() > 0) await this.s.pruned.remove("before");
      this.pendingCut = 0;
      return { removed: 0, passes: 0, alongside: 0 };
    }
    const stored = this.cutoff();
    const cut = Math.max(nowMs - keepSeconds * 1000, stored);
    let before = this.frontier(cut);
    if (before === "") return { removed: 0, passes: 0, alongside: 0 }; // nothing older: no cutoff to store
    const reclaimedBefore = this.reclaimed;
    if (cut > stored) this.pendingCut = cut;
    this.reclaimNextAt = 0; // this thread's next return carries deletes
    let removed = 0;
    let passes = 0;
    let passMs = 0;
    for (;;) {
      const returns = this.returnsIssued;
      await clock.pause(prunePauseMs(passMs));
      const after = this.frontier(cut);
      // a return still waiting for the disk is a return flowing: a pass now would only add its commit to the wait
      const step = pruneStep(before, after, this.cutoff() >= cut, this.returnsIssued !== returns || this.returnsWaiting > 0);
      if (step === "done") break;
      passMs = 0;
      if (step === "pass") {
        const t = clock.now();
        removed += await this.cleanup(keepSeconds, nowMs, clock.now);
        passes++;
        passMs = clock.now() - t;
        before = this.frontier(cut);
      } else before = after;
    }
    return { removed, passes, alongside: this.reclaimed - reclaimedBefore };
  }
}

/** One line a minute when deletes carried along with returns fail. */
const reclaimLog = new LogBudget(1, 60_000, (line) => getLogger("brine.job_cache").warning(line), "keep_jobs deletes alongside returns");
