/**
 * A minion id as the shared tables of per-minion records key it (key-table.ts, session-table.ts): its UTF-8 bytes in
 * a thread's scratch buffer, hashed with FNV-1a onto an index of Int32 buckets in the table's SharedArrayBuffer (open
 * addressing, linear probing; at least twice as many buckets as minions, a power of two). Sans I/O.
 */

/** Buckets of an index for `minions` ids: a power of two, at least twice as many. */
export function indexBucketsFor(minions: number): number {
  let b = 2;
  while (b < minions * 2) b *= 2;
  return b;
}

/** One thread's scratch for the id being looked up. */
export class IdScratch {
  /** the id's UTF-8 bytes, from 0 */
  readonly bytes: Buffer;

  constructor(private readonly idBytesMax: number) {
    this.bytes = Buffer.alloc(idBytesMax * 3);
  }

  /** `id` into `bytes`: its byte count, or -1 when it is longer than the table's ids (idBytesMax bytes). */
  encode(id: string): number {
    if (id.length > this.idBytesMax) return -1;
    const n = this.bytes.write(id, 0, "utf8");
    return n > this.idBytesMax ? -1 : n;
  }

  /** The first bucket of the probe path of the id's first `n` bytes, in an index of `mask + 1` buckets. */
  firstBucket(n: number, mask: number): number {
    let h = 0x811c9dc5;
    for (let i = 0; i < n; i++) h = Math.imul(h ^ this.bytes[i]!, 0x01000193);
    return h & mask;
  }

  /** Whether the `n` bytes at `at` of `u8` are the id's. */
  isAt(u8: Buffer, at: number, n: number): boolean {
    return u8.compare(this.bytes, 0, n, at, at + n) === 0;
  }
}
