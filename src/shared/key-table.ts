/**
 * Minions' accepted keys once per master (issue 17): one SharedArrayBuffer every request thread reads, so the
 * five request threads do not each keep a minion's accepted key text (~750 B of V8 heap with its entry, per
 * minion and thread) nor the tok they verified against it (~350 B per minion and request-lane thread). A record
 * holds what a thread found when it read the key file (or the indexed store): the key's text (Salt's clean_key
 * form), when it was read, what vouched for it (the store's generation, the accepted directory's mtime, the
 * file's identity), a tag naming this text, and the minion's tok once a thread verified it against that text.
 * When a record is still good is the caller's decision (AcceptedKeyCache in src/lib/pki/key-store.ts): this
 * module only stores and reads, sans I/O (the caller passes its clock readings).
 *
 * Layout: a header; an index of Int32 buckets (0 = empty, else the record's offset / 8 + 1; open addressing,
 * linear probing on the FNV-1a hash of the id's UTF-8 bytes; at least twice as many buckets as minions); records
 * of variable size bump-allocated in order from an arena (Atomics.add on a byte counter), so resident memory
 * grows with the minions stored, not with the capacity. A record's id never changes once its bucket is
 * published; the rest is under a seqlock (odd: being written; a writer that finds it odd or loses the swap skips
 * its write, the caller then works from what it read itself; a reader retries a few times, then answers
 * "absent"). A text longer than its record's room goes to a new record, and the bucket is swung to it by
 * compare-and-swap (the old record is marked moved; its bytes are not reused). Records are never freed: a full
 * arena, or an id over `keyIdBytesMax`, answers "not stored" and the caller keeps its own copy, as without the
 * table.
 *
 * Tags: a record's tag changes exactly when its text does (a re-read of the same text keeps it), so a thread can
 * key what it derived from a key (parsed keys, ciphertexts) by the tag instead of by a copy of the text. Tags come
 * from one counter (positive; 2^31 text changes before one repeats).
 */

import { IdScratch, indexBucketsFor } from "./id-scratch.js";

/** Longest id the table holds, UTF-8 bytes (a longer one is never stored: its thread keeps its own copy). */
export const keyIdBytesMax = 120;
/** Arena bytes per minion the table is made for (a 2,048-bit key's record is ~900 B, a 4,096-bit one's ~1,400). */
export const keyTableBytesPerMinion = 1536;
/** Longest tok a record keeps, bytes (an RSA block of a 16,384-bit key: rsaBlockBytesMax). */
const tokBytesMax = 2048;

const HEADER_BYTES = 64;
const H_MAGIC = 0;
const H_USED = 1;
const H_CAPACITY = 2;
const H_BUCKETS = 3;
const H_TAGS = 4;
const H_EPOCH = 5;
const MAGIC = 0x6b65_7974;

/** within a record, bytes */
const SEQ = 0;
const ID_LEN = 4;
const TEXT_ROOM = 8;
const TEXT_LEN = 12;
const TOK_ROOM = 16;
const TOK_LEN = 20;
const TAG = 24;
const EPOCH = 28;
const FLAGS = 32;
const READ_AT = 40;
const GEN = 48;
const DIR_MTIME = 56;
const INO = 64;
const SIZE = 72;
const MTIME = 80;
const CTIME = 88;
const RECORD_HEAD = 96;
/** FLAGS bits */
const F_FILE = 1;
const F_MOVED = 2;
const F_DROPPED = 4;
const readTries = 8;
/** how many times `drop` tries a record another thread is writing before it gives up (the caller's checks still hold) */
const dropTries = 1000;

/** What a thread found when it read a minion's accepted key. */
export interface KeyRecord {
  /** the key's text, clean_key form */
  text: string;
  /** when it was read (ms) */
  readAt: number;
  /** the indexed store's generation then; NaN with key files */
  gen: number;
  /** the accepted directory's mtime a thread's stamp vouched for before the read (ms); NaN: none vouched */
  dirMtime: number;
  /** the key file as it was read (its identity), or undefined when not to be trusted */
  file: { ino: number; size: number; mtimeMs: number; ctimeMs: number } | undefined;
}

/** A record as `look` found it: its metadata, and where to read its text and tok from while `seq` holds. */
export class KeyView {
  tag = 0;
  readAt = 0;
  gen = NaN;
  dirMtime = NaN;
  /** the file identity, when the record has one (else NaN) */
  ino = NaN;
  size = NaN;
  mtimeMs = NaN;
  ctimeMs = NaN;
  /** absolute byte offset of the record, its seq when read, its id's byte length */
  base = -1;
  seq = 0;
  idLen = 0;
  textRoom = 0;
  textLen = 0;
  tokLen = 0;
}

export class KeyTable {
  readonly sab: SharedArrayBuffer;
  private readonly i32: Int32Array;
  private readonly f64: Float64Array;
  private readonly u8: Buffer;
  private readonly index: Int32Array;
  private readonly mask: number;
  private readonly arenaAt: number;
  private readonly arenaBytes: number;
  /** the id being looked up */
  private readonly id = new IdScratch(keyIdBytesMax);

  /** A table for `minions` accepted keys: an index of 4 B × (≥ 2 × minions, a power of two) and an arena of keyTableBytesPerMinion × minions. */
  static create(minions: number): SharedArrayBuffer {
    if (!Number.isInteger(minions) || minions < 1) throw new RangeError(`key table of ${minions} minions`);
    const buckets = indexBucketsFor(minions);
    const arena = minions * keyTableBytesPerMinion;
    if (arena > 2 ** 31 - 8) throw new RangeError(`key table of ${minions} minions: its arena would pass 2 GiB`);
    const sab = new SharedArrayBuffer(HEADER_BYTES + buckets * 4 + arena);
    const h = new Int32Array(sab, 0, HEADER_BYTES / 4);
    h[H_CAPACITY] = arena;
    h[H_BUCKETS] = buckets;
    Atomics.store(h, H_MAGIC, MAGIC);
    return sab;
  }

  constructor(sab: SharedArrayBuffer) {
    this.sab = sab;
    this.i32 = new Int32Array(sab);
    if (Atomics.load(this.i32, H_MAGIC) !== MAGIC) throw new RangeError("not a key table");
    this.f64 = new Float64Array(sab, 0, Math.floor(sab.byteLength / 8));
    this.u8 = Buffer.from(sab);
    this.arenaBytes = this.i32[H_CAPACITY]!;
    const buckets = this.i32[H_BUCKETS]!;
    this.mask = buckets - 1;
    this.index = new Int32Array(sab, HEADER_BYTES, buckets);
    this.arenaAt = HEADER_BYTES + buckets * 4;
  }

  /** Arena bytes handed out (tests, the full warning). */
  get usedBytes(): number {
    return Math.min(Atomics.load(this.i32, H_USED), this.arenaBytes);
  }

  /** A new tag (positive), for a copy a thread keeps itself (an id the table cannot hold). */
  newTag(): number {
    return (Atomics.add(this.i32, H_TAGS, 1) + 1) & 0x7fff_ffff || this.newTag();
  }

  /**
   * Fills `out` with `id`'s record; false when there is none to use (never stored, dropped, from before
   * `dropAll`, being written for long, or an id too long for the table).
   */
  look(id: string, out: KeyView): boolean {
    const n = this.id.encode(id);
    if (n < 0) return false;
    for (let moved = 0; moved < 4; moved++) {
      const bucket = this.find(n);
      if (bucket < 0) return false;
      const base = this.arenaAt + (Atomics.load(this.index, bucket) - 1) * 8;
      const seq = (base + SEQ) >> 2;
      for (let i = 0; i < readTries; i++) {
        const s1 = Atomics.load(this.i32, seq);
        if (s1 & 1) continue;
        const flags = this.i32[(base + FLAGS) >> 2]!;
        const epoch = this.i32[(base + EPOCH) >> 2]!;
        out.tag = this.i32[(base + TAG) >> 2]!;
        out.readAt = this.f64[(base + READ_AT) >> 3]!;
        out.gen = this.f64[(base + GEN) >> 3]!;
        out.dirMtime = this.f64[(base + DIR_MTIME) >> 3]!;
        const file = (flags & F_FILE) !== 0;
        out.ino = file ? this.f64[(base + INO) >> 3]! : NaN;
        out.size = file ? this.f64[(base + SIZE) >> 3]! : NaN;
        out.mtimeMs = file ? this.f64[(base + MTIME) >> 3]! : NaN;
        out.ctimeMs = file ? this.f64[(base + CTIME) >> 3]! : NaN;
        out.idLen = this.i32[(base + ID_LEN) >> 2]!;
        out.textRoom = this.i32[(base + TEXT_ROOM) >> 2]!;
        out.textLen = this.i32[(base + TEXT_LEN) >> 2]!;
        out.tokLen = this.i32[(base + TOK_LEN) >> 2]!;
        if (Atomics.load(this.i32, seq) !== s1) continue;
        if (flags & F_MOVED) break; // swung to a new record: find the bucket again
        if (flags & F_DROPPED || out.tag === 0 || epoch !== Atomics.load(this.i32, H_EPOCH)) return false;
        out.base = base;
        out.seq = s1;
        return true;
      }
    }
    return false;
  }

  /** The text of the record `v` was filled from, or undefined when it changed since. */
  text(v: KeyView): string | undefined {
    const at = v.base + RECORD_HEAD + v.idLen;
    const s = this.u8.toString("utf8", at, at + v.textLen);
    return Atomics.load(this.i32, (v.base + SEQ) >> 2) === v.seq ? s : undefined;
  }

  /** Whether `tok` is the tok a thread verified against the text of the record `v` was filled from. */
  tokIs(v: KeyView, tok: Uint8Array): boolean {
    if (v.tokLen === 0 || v.tokLen !== tok.length) return false;
    const at = v.base + RECORD_HEAD + v.idLen + v.textRoom;
    const same = this.u8.compare(tok, 0, tok.length, at, at + v.tokLen) === 0;
    return same && Atomics.load(this.i32, (v.base + SEQ) >> 2) === v.seq;
  }

  /** Keeps `tok` as verified against `id`'s text while that text has tag `tag`; false when not kept. */
  setTok(id: string, tag: number, tok: Uint8Array): boolean {
    const n = this.id.encode(id);
    if (n < 0 || tag === 0) return false;
    const bucket = this.find(n);
    if (bucket < 0) return false;
    const base = this.arenaAt + (Atomics.load(this.index, bucket) - 1) * 8;
    if (!this.lock(base, 1)) return false;
    const seq = (base + SEQ) >> 2;
    const ok = this.i32[(base + TAG) >> 2] === tag && !(this.i32[(base + FLAGS) >> 2]! & F_MOVED) && tok.length > 0 && tok.length <= this.i32[(base + TOK_ROOM) >> 2]!;
    if (ok) {
      this.u8.set(tok, base + RECORD_HEAD + this.i32[(base + ID_LEN) >> 2]! + this.i32[(base + TEXT_ROOM) >> 2]!);
      this.i32[(base + TOK_LEN) >> 2] = tok.length;
    }
    this.unlock(seq);
    return ok;
  }

  /**
   * Stores what a thread read of `id`'s key: its tag (the record's own when the text is the one it holds,
   * else a new one); 0 when the table cannot hold it (the arena is full, the id too long); -1 when another
   * thread is writing the record at this moment (nothing stored).
   */
  put(id: string, rec: KeyRecord): number {
    const n = this.id.encode(id);
    if (n < 0) return 0;
    const text = Buffer.from(rec.text, "utf8");
    // a record made for this id and not yet published (another thread publishing the same id first leaves it unused)
    let mine = -1;
    let mineTag = 0;
    for (let tries = 0; tries < 4; tries++) {
      const bucket = this.find(n);
      if (bucket < 0) {
        const slot = this.claimBucket(n);
        if (slot < 0) return 0;
        if (mine < 0) {
          mine = this.alloc(n, text.length);
          if (mine < 0) return 0;
          mineTag = this.newTag();
          this.fill(mine, text, rec, mineTag, 0);
          Atomics.store(this.i32, mine >> 2, 2); // written; never 0 once published
        }
        if (Atomics.compareExchange(this.index, slot, 0, (mine - this.arenaAt) / 8 + 1) === 0) return mineTag;
        continue; // another thread published a bucket there first (its id may be this one: look again)
      }
      const cur = Atomics.load(this.index, bucket);
      const base = this.arenaAt + (cur - 1) * 8;
      if (!this.lock(base, 1)) return -1;
      const seq = (base + SEQ) >> 2;
      if (this.i32[(base + FLAGS) >> 2]! & F_MOVED) {
        this.unlock(seq);
        continue;
      }
      const sameText = this.i32[(base + TEXT_LEN) >> 2] === text.length && this.i32[(base + TAG) >> 2] !== 0 && this.u8.compare(text, 0, text.length, base + RECORD_HEAD + n, base + RECORD_HEAD + n + text.length) === 0;
      if (sameText || text.length <= this.i32[(base + TEXT_ROOM) >> 2]!) {
        const tag = sameText ? this.i32[(base + TAG) >> 2]! : this.newTag();
        this.fill(base, text, rec, tag, sameText ? this.i32[(base + TOK_LEN) >> 2]! : 0, true);
        this.unlock(seq);
        return tag;
      }
      // a longer text than the record has room for: a new record, and the bucket swung to it
      const fresh = this.alloc(n, text.length);
      if (fresh < 0) {
        this.i32[(base + FLAGS) >> 2] = this.i32[(base + FLAGS) >> 2]! | F_DROPPED;
        this.unlock(seq);
        return 0;
      }
      const tag = this.newTag();
      this.fill(fresh, text, rec, tag, 0);
      Atomics.store(this.i32, fresh >> 2, 2);
      Atomics.store(this.index, bucket, (fresh - this.arenaAt) / 8 + 1);
      this.i32[(base + FLAGS) >> 2] = this.i32[(base + FLAGS) >> 2]! | F_MOVED;
      this.unlock(seq);
      return tag;
    }
    return -1;
  }

  /** Every thread reads `id`'s key again before using it (a key written, moved or removed by this master). */
  drop(id: string): void {
    const n = this.id.encode(id);
    if (n < 0) return;
    for (let moved = 0; moved < 4; moved++) {
      const bucket = this.find(n);
      if (bucket < 0) return;
      const base = this.arenaAt + (Atomics.load(this.index, bucket) - 1) * 8;
      if (!this.lock(base, dropTries)) return;
      const flags = this.i32[(base + FLAGS) >> 2]!;
      if (!(flags & F_MOVED)) this.i32[(base + FLAGS) >> 2] = flags | F_DROPPED;
      this.unlock((base + SEQ) >> 2);
      if (!(flags & F_MOVED)) return;
    }
  }

  /** Every record is read again before it is used (every thread). */
  dropAll(): void {
    Atomics.add(this.i32, H_EPOCH, 1);
  }

  /** A record's text and state at `base`, and its id from the scratch buffer unless `inPlace` (the record's own id). */
  private fill(base: number, text: Buffer, rec: KeyRecord, tag: number, tokLen: number, inPlace = false): void {
    const idLen = this.i32[(base + ID_LEN) >> 2]!;
    if (!inPlace) this.id.bytes.copy(this.u8, base + RECORD_HEAD, 0, idLen);
    text.copy(this.u8, base + RECORD_HEAD + idLen);
    this.i32[(base + TEXT_LEN) >> 2] = text.length;
    this.i32[(base + TOK_LEN) >> 2] = tokLen;
    this.i32[(base + TAG) >> 2] = tag;
    this.i32[(base + EPOCH) >> 2] = Atomics.load(this.i32, H_EPOCH);
    this.i32[(base + FLAGS) >> 2] = rec.file ? F_FILE : 0;
    this.f64[(base + READ_AT) >> 3] = rec.readAt;
    this.f64[(base + GEN) >> 3] = rec.gen;
    this.f64[(base + DIR_MTIME) >> 3] = rec.dirMtime;
    this.f64[(base + INO) >> 3] = rec.file?.ino ?? NaN;
    this.f64[(base + SIZE) >> 3] = rec.file?.size ?? NaN;
    this.f64[(base + MTIME) >> 3] = rec.file?.mtimeMs ?? NaN;
    this.f64[(base + CTIME) >> 3] = rec.file?.ctimeMs ?? NaN;
  }

  /** A new record for an id of `n` bytes (in the scratch buffer) and a text of `textBytes`: its absolute offset, or -1 when the arena is full. */
  private alloc(n: number, textBytes: number): number {
    const textRoom = (textBytes + 63) & ~63;
    // a tok is an RSA block of the key's modulus, shorter than the key's base64 text by a quarter at least
    const tokRoom = Math.min(tokBytesMax, Math.floor((textBytes * 3) / 4));
    const bytes = (RECORD_HEAD + n + textRoom + tokRoom + 7) & ~7;
    if (Atomics.load(this.i32, H_USED) + bytes > this.arenaBytes) return -1;
    const at = Atomics.add(this.i32, H_USED, bytes);
    if (at + bytes > this.arenaBytes) return -1;
    const base = this.arenaAt + at;
    this.i32[(base + ID_LEN) >> 2] = n;
    this.i32[(base + TEXT_ROOM) >> 2] = textRoom;
    this.i32[(base + TOK_ROOM) >> 2] = tokRoom;
    return base;
  }

  /** Takes the record's seqlock (odd), trying `tries` times; false when another thread holds it. */
  private lock(base: number, tries: number): boolean {
    const seq = (base + SEQ) >> 2;
    for (let i = 0; i < tries; i++) {
      const s = Atomics.load(this.i32, seq);
      if (!(s & 1) && Atomics.compareExchange(this.i32, seq, s, s + 1) === s) return true;
    }
    return false;
  }

  private unlock(seq: number): void {
    const s = Atomics.load(this.i32, seq);
    Atomics.store(this.i32, seq, (s + 1) | 0 || 2);
  }

  /** The bucket holding the id in the scratch buffer (its first `n` bytes), or -1. */
  private find(n: number): number {
    let b = this.id.firstBucket(n, this.mask);
    for (let probes = 0; probes <= this.mask; probes++, b = (b + 1) & this.mask) {
      const v = Atomics.load(this.index, b);
      if (v === 0) return -1;
      if (this.idAt(this.arenaAt + (v - 1) * 8, n)) return b;
    }
    return -1;
  }

  /** The first empty bucket on the id's probe path, or -1 when the index is full. */
  private claimBucket(n: number): number {
    let b = this.id.firstBucket(n, this.mask);
    for (let probes = 0; probes <= this.mask; probes++, b = (b + 1) & this.mask) if (Atomics.load(this.index, b) === 0) return b;
    return -1;
  }

  private idAt(base: number, n: number): boolean {
    if (this.i32[(base + ID_LEN) >> 2] !== n) return false;
    return this.id.isAt(this.u8, base + RECORD_HEAD, n);
  }
}
