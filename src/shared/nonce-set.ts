/**
 * Replay protection across threads: a SharedArrayBuffer set of recently seen request nonces.
 *
 * Every request worker checks-and-inserts the 64-bit prefix of a request's nonce (uuid4 hex, random)
 * with a CAS on open-addressed slots. Two generations of tables: the main thread clears the older and
 * makes it current every `windowMs`, so a nonce is remembered for between one and two windows.
 * A request is a replay when its nonce is in either table. Only requests that were actually
 * dispatched are recorded (a request refused before dispatch may be resent with its nonce by a minion
 * after re-authenticating; that is not a replay).
 *
 * When a table is too full to insert (probe limit reached), the nonce is accepted and the overflow is
 * counted: replay protection degrades under a flood rather than refusing real minions.
 *
 * Nonces also come from outside the request workers (insertWords): a peer master's accepted nonces, the nonces a
 * peer asks this master to decide on (src/shared/nonce-owner.ts) and this master's own from before a restart
 * (src/shared/nonce-journal.ts). A generation counter (ctrl[2], current
 * table = its low bit) names the journal file each generation's nonces are appended to.
 */

const probesMax = 32;
/** Spins before a reader that found its own `hi` in a just-claimed slot starts sleeping for `lo`. */
const claimSpinsMax = 1000;
/**
 * How long that reader waits for `lo` in all. The inserter stores it right after its CAS, so only a
 * thread descheduled between the two instructions makes anyone wait; past this the reader counts the
 * slot as its own nonce (a refusal the minion recovers from) rather than insert a second copy of it.
 */
const claimWaitMsMax = 100;

/**
 * A slot is two Int32 words, [hi, lo], of the nonce's first 64 bits (no BigInt: it allocated on every
 * check, on the hot path). Neither word is ever 0 (0 is mapped to 1), so 0 marks an empty word.
 * Insert claims a slot by a CAS of `hi` from 0, then stores `lo`; a reader that finds its own `hi`
 * waits until `lo` is visible (see settledLo). Mapping 0 → 1 merges two values of 2^32 per word:
 * about 2^-31 more false matches, still none in practice.
 */
function hexWord(nonce: string, from: number): number {
  let v = 0;
  for (let i = from; i < from + 8; i++) {
    const c = nonce.charCodeAt(i);
    const d = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
    if (d < 0) return 0;
    v = (v << 4) | d;
  }
  return v === 0 ? 1 : v;
}

/** Bytes one nonce takes in its packed form (packNonces): its first 64 bits as two little-endian Int32 words. */
export const NONCE_PACKED_BYTES = 8;

/** The accepted nonces of a batch, packed (hex text → 8 bytes each; a malformed one is left out). */
export function packNonces(nonces: readonly string[]): Uint8Array {
  const out = new Int32Array(nonces.length * 2);
  let n = 0;
  for (const nonce of nonces) {
    const hi = hexWord(nonce, 0) | 0;
    const lo = hexWord(nonce, 8) | 0;
    if (nonce.length < 16 || hi === 0 || lo === 0) continue;
    out[n++] = hi;
    out[n++] = lo;
  }
  return new Uint8Array(out.buffer, 0, n * 4);
}

export class NonceSet {
  readonly sab: SharedArrayBuffer;
  private readonly ctrl: Int32Array; // [0] current table index (0|1), [1] overflow count, [2] generation
  /** two tables of `slots` slots of two words each */
  private readonly tables: Int32Array[];
  readonly slots: number;

  constructor(slotsOrSab: number | SharedArrayBuffer) {
    if (typeof slotsOrSab === "number") {
      const slots = 1 << Math.ceil(Math.log2(Math.max(1024, slotsOrSab)));
      this.sab = new SharedArrayBuffer(16 + 2 * slots * 8);
    } else this.sab = slotsOrSab;
    this.slots = (this.sab.byteLength - 16) / 16;
    this.ctrl = new Int32Array(this.sab, 0, 4);
    this.tables = [new Int32Array(this.sab, 16, this.slots * 2), new Int32Array(this.sab, 16 + this.slots * 8, this.slots * 2)];
  }

  /**
   * `lo` of a claimed slot once its inserter has stored it; `expected` if it does not show within
   * claimWaitMsMax (the conservative answer: "same nonce", i.e. a replay refusal, never a double accept).
   */
  private static settledLo(table: Int32Array, slot: number, expected: number): number {
    const at = slot * 2 + 1;
    for (let spin = 0; spin < claimSpinsMax; spin++) {
      const lo = Atomics.load(table, at);
      if (lo !== 0) return lo;
    }
    for (let waited = 0; waited < claimWaitMsMax; waited++) {
      Atomics.wait(table, at, 0, 1);
      const lo = Atomics.load(table, at);
      if (lo !== 0) return lo;
    }
    return expected;
  }

  private has(table: Int32Array, hi: number, lo: number): boolean {
    const mask = this.slots - 1;
    let i = (lo ^ hi) & mask;
    for (let p = 0; p < probesMax; p++, i = (i + 1) & mask) {
      const h = Atomics.load(table, i * 2);
      if (h === 0) return false;
      if (h === hi && NonceSet.settledLo(table, i, lo) === lo) return true;
    }
    return false;
  }

  /** True if the nonce was new (and is now recorded); false if it is a replay. */
  checkAndInsert(nonce: string): boolean {
    const hi = hexWord(nonce, 0) | 0;
    const lo = hexWord(nonce, 8) | 0;
    if (nonce.length < 16 || hi === 0 || lo === 0) return true; // malformed nonces are refused by the envelope check, not here
    return this.insertWords(hi, lo);
  }

  /**
   * Records packed nonces (packNonces) seen elsewhere: a peer's, or this master's before a restart. The count
   * that were new here; words of 0 (never packed) are skipped.
   */
  insertPacked(bytes: Uint8Array): number {
    const words = new Int32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + (bytes.byteLength & ~7)));
    let added = 0;
    for (let i = 0; i + 1 < words.length; i += 2) {
      if (words[i] !== 0 && words[i + 1] !== 0 && this.insertWords(words[i]!, words[i + 1]!)) added++;
    }
    return added;
  }

  /** checkAndInsert on the nonce's two words (neither 0). */
  insertWords(hi: number, lo: number): boolean {
    const cur = Atomics.load(this.ctrl, 0) & 1;
    if (this.has(this.tables[cur ^ 1]!, hi, lo)) return false;
    const table = this.tables[cur]!;
    const mask = this.slots - 1;
    let i = (lo ^ hi) & mask;
    for (let p = 0; p < probesMax; p++, i = (i + 1) & mask) {
      const prev = Atomics.compareExchange(table, i * 2, 0, hi);
      if (prev === 0) {
        Atomics.store(table, i * 2 + 1, lo);
        Atomics.notify(table, i * 2 + 1);
        return true;
      }
      if (prev === hi && NonceSet.settledLo(table, i, lo) === lo) return false;
    }
    Atomics.add(this.ctrl, 1, 1);
    return true;
  }

  /** Main thread, every window: forget the older generation. */
  rotate(): void {
    const cur = Atomics.load(this.ctrl, 0) & 1;
    const older = this.tables[cur ^ 1]!;
    older.fill(0);
    Atomics.store(this.ctrl, 0, cur ^ 1);
    Atomics.add(this.ctrl, 2, 1);
  }

  /** The current generation (its low bit is the current table). */
  generation(): number {
    return Atomics.load(this.ctrl, 2);
  }

  /** Main thread, at start before any worker runs: continue the numbering of a previous run's generations. */
  startAt(generation: number): void {
    Atomics.store(this.ctrl, 2, generation);
    Atomics.store(this.ctrl, 0, generation & 1);
  }

  overflows(): number {
    return Atomics.load(this.ctrl, 1);
  }
}
