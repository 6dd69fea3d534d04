/**
 * Minions' session keys once per master (issue 17): a SharedArrayBuffer every request thread reads, so five
 * threads do not each keep a session key, its file's identity and its last check per minion (~1.4 KB of V8 heap
 * per minion and thread). A thread keeps only the session Crypticles it used last (sessions.ts) and builds one
 * for any other minion from this table, without touching its file, while the shared check is under a second old.
 *
 * Layout: a header; an index of Int32 buckets (0 = empty, else slot + 1; open addressing, linear probing on the
 * FNV-1a hash of the id's UTF-8 bytes; at least twice as many buckets as slots); slots of `slotBytes`, handed out
 * in order (Atomics.add on a counter), so resident memory grows with the minions stored, not with the capacity.
 * A slot holds the id (written before its bucket is published by compare-and-swap, never changed after) and a
 * record under a seqlock (odd: being written; a writer that finds it odd or loses the swap skips its write, the
 * other writer's record being as new; a reader retries a few times, then answers "absent"). Slots are never
 * freed: a minion removed keeps its slot, and a full table answers "absent" (the caller reads the file, as
 * without the table). Sans I/O: the caller passes the clock readings it stores.
 */

import { IdScratch, indexBucketsFor } from "./id-scratch.js";

/** Bytes of one slot. */
export const sessionSlotBytes = 256;
/** Longest id a slot holds, UTF-8 bytes (a longer one is never stored: its thread reads its file). */
export const sessionIdBytesMax = 120;
const HEADER_BYTES = 64;
const H_MAGIC = 0;
const H_USED = 1;
const H_CAPACITY = 2;
const H_BUCKETS = 3;
const MAGIC = 0x5e55_7ab1;
/** within a slot */
const SEQ = 0;
const ID_LEN = 4;
const ID = 8;
const KEY = 128;
const KEY_BYTES = 56;
const MTIME = 184;
const INO = 192;
const CHECKED = 200;
const readTries = 8;

/** A minion's session key as the last thread that checked its file saw it. */
export interface SessionRecord {
  /** the key string (76 characters of base64) */
  key: string;
  /** the key file's mtime (the key's creation) and inode */
  mtimeMs: number;
  ino: number;
  /** when a thread last found the file so (ms) */
  checkedAt: number;
}

export class SessionTable {
  readonly sab: SharedArrayBuffer;
  private readonly i32: Int32Array;
  private readonly f64: Float64Array;
  private readonly u8: Buffer;
  private readonly index: Int32Array;
  private readonly capacity: number;
  private readonly mask: number;
  private readonly slotsAt: number;
  /** the id being looked up */
  private readonly id = new IdScratch(sessionIdBytesMax);

  /** A table for `minions` session keys (its bytes: 64 + 8 × minions rounded up to a power of two + 256 × minions). */
  static create(minions: number): SharedArrayBuffer {
    if (!Number.isInteger(minions) || minions < 1) throw new RangeError(`session table of ${minions} minions`);
    const buckets = indexBucketsFor(minions);
    const sab = new SharedArrayBuffer(HEADER_BYTES + buckets * 4 + minions * sessionSlotBytes);
    const h = new Int32Array(sab, 0, HEADER_BYTES / 4);
    h[H_CAPACITY] = minions;
    h[H_BUCKETS] = buckets;
    Atomics.store(h, H_MAGIC, MAGIC);
    return sab;
  }

  constructor(sab: SharedArrayBuffer) {
    this.sab = sab;
    this.i32 = new Int32Array(sab);
    if (Atomics.load(this.i32, H_MAGIC) !== MAGIC) throw new RangeError("not a session table");
    this.f64 = new Float64Array(sab);
    this.u8 = Buffer.from(sab);
    this.capacity = this.i32[H_CAPACITY]!;
    const buckets = this.i32[H_BUCKETS]!;
    this.mask = buckets - 1;
    this.index = new Int32Array(sab, HEADER_BYTES, buckets);
    this.slotsAt = HEADER_BYTES + buckets * 4;
  }

  /** Minions the table holds. */
  get used(): number {
    return Math.min(Atomics.load(this.i32, H_USED), this.capacity);
  }

  /** Whether a minion not yet in the table can no longer be stored. */
  get full(): boolean {
    return Atomics.load(this.i32, H_USED) >= this.capacity;
  }

  /** `id`'s record, or undefined (never stored, being written for long, or an id too long for a slot). */
  read(id: string): SessionRecord | undefined {
    const n = this.id.encode(id);
    if (n < 0) return undefined;
    const slot = this.find(n, false);
    if (slot < 0) return undefined;
    const base = this.slotsAt + slot * sessionSlotBytes;
    const seq = (base + SEQ) >> 2;
    for (let i = 0; i < readTries; i++) {
      const s1 = Atomics.load(this.i32, seq);
      if (s1 === 0) return undefined;
      if (s1 & 1) continue;
      const key = this.u8.toString("base64", base + KEY, base + KEY + KEY_BYTES);
      const mtimeMs = this.f64[(base + MTIME) >> 3]!;
      const ino = this.f64[(base + INO) >> 3]!;
      const checkedAt = this.f64[(base + CHECKED) >> 3]!;
      if (Atomics.load(this.i32, seq) === s1) return { key, mtimeMs, ino, checkedAt };
    }
    return undefined;
  }

  /**
   * Stores `id`'s record; false when it was not stored (the table is full, the id too long for a slot, the key
   * not 56 bytes of base64, or another thread writing the same record at this moment).
   */
  write(id: string, rec: SessionRecord): boolean {
    const n = this.id.encode(id);
    if (n < 0) return false;
    const key = Buffer.from(rec.key, "base64");
    if (key.length !== KEY_BYTES || key.toString("base64") !== rec.key) return false;
    const slot = this.find(n, true);
    if (slot < 0) return false;
    const base = this.slotsAt + slot * sessionSlotBytes;
    const seq = (base + SEQ) >> 2;
    const s = Atomics.load(this.i32, seq);
    if (s & 1 || Atomics.compareExchange(this.i32, seq, s, s + 1) !== s) return false;
    key.copy(this.u8, base + KEY);
    this.f64[(base + MTIME) >> 3] = rec.mtimeMs;
    this.f64[(base + INO) >> 3] = rec.ino;
    this.f64[(base + CHECKED) >> 3] = rec.checkedAt;
    Atomics.store(this.i32, seq, (s + 2) | 0 || 2); // 0 means "never written"
    return true;
  }

  /** The slot of the id in the scratch buffer (its first `n` bytes); with `claim`, taken when absent. -1: none. */
  private find(n: number, claim: boolean): number {
    let b = this.id.firstBucket(n, this.mask);
    let mine = -1;
    for (let probes = 0; probes <= this.mask; probes++, b = (b + 1) & this.mask) {
      let v = Atomics.load(this.index, b);
      if (v === 0) {
        if (!claim) return -1;
        if (mine < 0) {
          if (Atomics.load(this.i32, H_USED) >= this.capacity) return -1;
          mine = Atomics.add(this.i32, H_USED, 1);
          if (mine >= this.capacity) return -1;
          const base = this.slotsAt + mine * sessionSlotBytes;
          this.id.bytes.copy(this.u8, base + ID, 0, n);
          this.i32[(base + ID_LEN) >> 2] = n;
        }
        v = Atomics.compareExchange(this.index, b, 0, mine + 1);
        if (v === 0) return mine;
        // another thread took this bucket first: its id may be this one (then our slot stays unused)
      }
      if (this.idAt(v - 1, n)) return v - 1;
    }
    return -1;
  }

  private idAt(slot: number, n: number): boolean {
    const base = this.slotsAt + slot * sessionSlotBytes;
    if (this.i32[(base + ID_LEN) >> 2] !== n) return false;
    return this.id.isAt(this.u8, base + ID, n);
  }
}
