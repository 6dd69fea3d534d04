/**
 * The one CBOR codec of brine's own data between threads and masters: Raft entries and snapshots, group
 * state, the peer channel's frames, forwarded events and cache-sync records. Plain maps as objects, no
 * cbor-x records (a decoder must not need structures an encoder shared), byte arrays as plain byte strings
 * (no typed-array tag, so every peer decodes them as Uint8Array whatever produced them). LMDB values use
 * lmdb's own cbor-x setup (src/lib/store/lmdb-env.ts, LMDB_CBOR); nothing else makes an Encoder.
 */
import { Encoder } from "cbor-x";

export const cbor = new Encoder({ mapsAsObjects: true, useRecords: false, tagUint8Array: false });
