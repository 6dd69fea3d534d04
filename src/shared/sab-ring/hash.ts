/**
 * The one hash every thread uses to place a key on a ring and to score nodes for a slot.
 *
 * Choice: MurmurHash3 x86_32 over the UTF-8 bytes of the string.
 * - Identical in every thread and every process: pure integer arithmetic on `Math.imul` and shifts, no
 *   floating point, no platform Math functions, no state. Any other language's murmur3_32 gives the same
 *   number for the same UTF-8 bytes (the test checks published vectors), so an operator can reproduce a
 *   placement outside brine.
 * - Its finaliser (fmix32) avalanches fully, so the low 12 bits used as a slot index are as uniform as the
 *   high ones. FNV-1a would be as fast but mixes its low bits poorly for ids that differ in one trailing digit
 *   (`web-0001`, `web-0002`, ...), which is exactly what minion ids look like.
 * - Salt's ring uses xxh3_64; a 64-bit multiply needs BigInt in JS (an order of magnitude slower) and buys
 *   nothing here: 32 bits address 4096 slots with room to spare, and brine's slot table does not try to
 *   reproduce Salt's vnode placement anyway.
 *
 * Strings are hashed without allocating: UTF-16 code units are encoded to UTF-8 on the fly (a lone
 * surrogate becomes U+FFFD, as TextEncoder does), so the hot path (one lookup per gated write) makes no
 * garbage.
 */

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

/** Seed for key placement; part of the on-wire meaning of a slot table, never change it. */
export const KEY_SEED = 0;
/** Seed for node identities, distinct from keys so a node id and an equal minion id are unrelated. */
export const NODE_SEED = 0x5bd1e995;

/** murmur3's 32-bit finaliser: every input bit affects every output bit with probability ~1/2. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Mixes one little-endian 4-byte block `k` into state `h` (the body step of murmur3_32). */
function mixBlock(h: number, k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/** Mixes the 1..3 trailing bytes held in `k` (the tail step of murmur3_32). */
function mixTail(h: number, k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, C2);
  return h ^ k;
}

/** murmur3_x86_32 of the UTF-8 encoding of `s`, as an unsigned 32-bit integer. */
export function hashString(s: string, seed: number = KEY_SEED): number {
  let h = seed | 0;
  let k = 0; // bytes not yet mixed, little-endian
  let shift = 0; // bits held in k: 0, 8, 16 or 24
  let len = 0; // UTF-8 byte length
  const n = s.length;
  let i = 0;
  while (i < n) {
    // Fast path, the common case for minion ids and jids: four ASCII characters landing on a block boundary
    // are one block.
    if (shift === 0 && i + 4 <= n) {
      const c0 = s.charCodeAt(i);
      const c1 = s.charCodeAt(i + 1);
      const c2 = s.charCodeAt(i + 2);
      const c3 = s.charCodeAt(i + 3);
      if ((c0 | c1 | c2 | c3) < 0x80) {
        h = mixBlock(h, c0 | (c1 << 8) | (c2 << 16) | (c3 << 24));
        i += 4;
        len += 4;
        continue;
      }
    }
    // Slow path: encode one code point to 1..4 bytes, packed little-endian into `bytes`.
    let c = s.charCodeAt(i++);
    let bytes: number;
    let count: number;
    if (c < 0x80) {
      bytes = c;
      count = 1;
    } else if (c < 0x800) {
      bytes = (0xc0 | (c >>> 6)) | ((0x80 | (c & 0x3f)) << 8);
      count = 2;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      const next = i < n ? s.charCodeAt(i) : 0;
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        i++;
        c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
        bytes =
          (0xf0 | (c >>> 18)) |
          ((0x80 | ((c >>> 12) & 0x3f)) << 8) |
          ((0x80 | ((c >>> 6) & 0x3f)) << 16) |
          ((0x80 | (c & 0x3f)) << 24);
        count = 4;
      } else {
        bytes = 0xef | (0xbf << 8) | (0xbd << 16); // U+FFFD for a lone surrogate, as TextEncoder does
        count = 3;
      }
    } else {
      bytes = (0xe0 | (c >>> 12)) | ((0x80 | ((c >>> 6) & 0x3f)) << 8) | ((0x80 | (c & 0x3f)) << 16);
      count = 3;
    }
    len += count;
    for (; count > 0; count--, bytes >>>= 8) {
      k |= (bytes & 0xff) << shift;
      shift += 8;
      if (shift === 32) {
        h = mixBlock(h, k);
        k = 0;
        shift = 0;
      }
    }
  }
  if (shift !== 0) h = mixTail(h, k);
  return fmix32(h ^ len);
}

/** murmur3_x86_32 of raw bytes (used for table checksums, never on a per-request path). */
export function hashBytes(bytes: Uint8Array, seed: number = KEY_SEED): number {
  let h = seed | 0;
  const n = bytes.length;
  const blocks = n & ~3;
  for (let i = 0; i < blocks; i += 4) {
    h = mixBlock(h, bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24));
  }
  let k = 0;
  for (let i = blocks, shift = 0; i < n; i++, shift += 8) k |= bytes[i]! << shift;
  if (n & 3) h = mixTail(h, k);
  return fmix32(h ^ n);
}

/** The hash of a node id, the input to `hrwScore`. */
export function nodeHash(nodeId: string): number {
  return hashString(nodeId, NODE_SEED);
}

/**
 * Rendezvous (HRW) score of a node for a slot: higher wins. The slot index is mixed on its own first so that
 * consecutive slots give unrelated scores, then combined with the node's hash and mixed again. Pure integer
 * arithmetic, so every thread and every master ranks nodes for a slot identically.
 */
export function hrwScore(nodeHashValue: number, slot: number): number {
  return fmix32((nodeHashValue ^ fmix32(Math.imul(slot + 1, 0x9e3779b1))) >>> 0);
}
