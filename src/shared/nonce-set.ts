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
 */

const probesMax = 32;

export class NonceSet {
  readonly sab: SharedArrayBuffer;
  private readonly ctrl: Int32Array; // [0] current table index (0|1), [1] overflow count
  private readonly tables: BigInt64Array[];
  readonly slots: number;

  constructor(slotsOrSab: number | SharedArrayBuffer) {
    if (typeof slotsOrSab === "number") {
      const slots = 1 << Math.ceil(Math.log2(Math.max(1024, slotsOrSab)));
      this.sab = new SharedArrayBuffer(16 + 2 * slots * 8);
    } else this.sab = slotsOrSab;
    this.slots = (this.sab.byteLength - 16) / 16;
    this.ctrl = new Int32Array(this.sab, 0, 4);
    this.tables = [new BigInt64Array(this.sab, 16, this.slots), new BigInt64Array(this.sab, 16 + this.slots * 8, this.slots)];
  }

  static key(nonce: string): bigint | undefined {
    if (!/^[0-9a-fA-F]{16}/.test(nonce)) return undefined;
    const k = BigInt.asIntN(64, BigInt("0x" + nonce.slice(0, 16)));
    return k === 0n ? 1n : k; // 0 marks an empty slot
  }

  private has(table: BigInt64Array, k: bigint): boolean {
    const mask = this.slots - 1;
    let i = Number(BigInt.asUintN(32, k)) & mask;
    for (let p = 0; p < probesMax; p++, i = (i + 1) & mask) {
      const v = Atomics.load(table, i);
      if (v === k) return true;
      if (v === 0n) return false;
    }
    return false;
  }

  /** True if the nonce was new (and is now recorded); false if it is a replay. */
  checkAndInsert(nonce: string): boolean {
    const k = NonceSet.key(nonce);
    if (k === undefined) return true; // malformed nonces are refused by the envelope check, not here
    const cur = Atomics.load(this.ctrl, 0) & 1;
    if (this.has(this.tables[cur ^ 1]!, k)) return false;
    const table = this.tables[cur]!;
    const mask = this.slots - 1;
    let i = Number(BigInt.asUintN(32, k)) & mask;
    for (let p = 0; p < probesMax; p++, i = (i + 1) & mask) {
      const prev: bigint = Atomics.compareExchange(table, i, 0n, k);
      if (prev === 0n) return true;
      if (prev === k) return false;
    }
    Atomics.add(this.ctrl, 1, 1);
    return true;
  }

  /** Main thread, every window: forget the older generation. */
  rotate(): void {
    const cur = Atomics.load(this.ctrl, 0) & 1;
    const older = this.tables[cur ^ 1]!;
    older.fill(0n);
    Atomics.store(this.ctrl, 0, cur ^ 1);
  }

  overflows(): number {
    return Atomics.load(this.ctrl, 1);
  }
}
