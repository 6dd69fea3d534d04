/**
 * The one CBOR codec of brine's own data between threads and masters: Raft entries and snapshots, group
 * state, the peer channel's frames, forwarded events and cache-sync records. Plain maps as objects, no
 * cbor-x records (a decoder must not need structures an encoder shared), byte arrays as plain byte strings
 * (no typed-array tag, so every peer decodes them as Uint8Array whatever produced them). LMDB values use
 * lmdb's own cbor-x setup (src/lib/store/lmdb-env.ts, LMDB_CBOR); nothing else makes an Encoder.
 */
import { Encoder } from "cbor-x";

export const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });

/**
 * An encode() result in an ArrayBuffer of its own, to post with that buffer in the transfer list (no copy at all): cbor-x
 * (this codec, and lmdb's and the sync store's encoders) returns a view into its shared output buffer, which is as large
 * as the largest value encoded so far, and a postMessage of a view copies its whole ArrayBuffer (an 8-byte message
 * posted after a 64 KiB one carried 147 KiB).
 */
export function ownBytes(b: Uint8Array): Uint8Array<ArrayBuffer> {
  return new Uint8Array(b);
}
