/**
 * A state-sync reply as bytes on the peer channel (issue 15), sans I/O: CBOR, deflated for an asker that reads
 * deflated replies.
 *
 * Why: a minion key is ~450 bytes of PEM (base64 of a DER key: 6 bits of content per byte, and the same BEGIN/END
 * lines and DER prefix in every key), and its manifest entry (path, size, sha256, mode, stamp) with the fetch framing
 * cost ~110 bytes more: a keys-only join put 1.24× the content on the wire. Deflated at level 1, a batch of 256
 * keys is 0.58 of its CBOR and a manifest page of keys about half (the sha256s do not shrink), for ~6 µs of CPU per
 * key on the server and ~1.6 µs on the puller (bench/RESULTS.md, session 11). Nothing is weakened: the puller
 * inflates, then checks every item against the manifest's size and sha256 as before.
 *
 * - An asker says it reads deflated replies with `z: 1` in its request (a server of an earlier version ignores the
 *   field and answers in plain CBOR, which `unpackReply` reads as before).
 * - A reply to such an asker is `{z: <deflate-raw of the reply's CBOR>}` when that is smaller by at least 1/16th;
 *   else the plain CBOR. A reply longer than deflateSampleBytes is first judged by its first deflateSampleBytes: if
 *   they do not shrink by 1/16th the reply is sent plain without deflating the rest (a batch of small files that do
 *   not compress, random or already compressed, cost a deflate of every byte for nothing: +240 µs an item on a
 *   join of 41 KiB files). A batch whose first items do not compress and the rest would is sent plain: a missed
 *   saving, never a wrong reply.
 * - Ranges of large items are not deflated (`compress: false`): large files are mostly compressed already (archives,
 *   images), and deflating 512 KiB of such bytes costs milliseconds for nothing.
 * - A deflated reply that inflates past replyInflatedBytesMax is refused (a malformed reply), never inflated whole.
 */
import { deflateRawSync, inflateRawSync } from "node:zlib";
import { cbor } from "../../shared/cbor.js";

/** The deflate level of replies: 1 (level 6 saves 0.1 % more on keys for twice the CPU). */
export const deflateLevel = 1;
/** Replies shorter than this are sent as they are, bytes. */
export const deflateMinBytes = 256;
/** A longer reply is deflated only if its first this many bytes shrink (see the header), bytes. */
export const deflateSampleBytes = 8 * 1024;
/**
 * The largest reply a deflated one may inflate to, bytes: a manifest page (pageItemsMax entries of paths up to
 * itemPathBytesMax) or a batch of chunkBytesMax plus framing stays well below.
 */
export const replyInflatedBytesMax = 8 * 1024 * 1024;

/** A reply's bytes: its CBOR, deflated when the asker reads deflated replies (`deflate`) and that pays. */
export function packReply(reply: unknown, deflate: boolean): Uint8Array {
  const plain = cbor.encode(reply) as Uint8Array;
  if (!deflate || plain.byteLength < deflateMinBytes) return plain;
  if (plain.byteLength > deflateSampleBytes && !pays(plain.subarray(0, deflateSampleBytes), deflateRawSync(plain.subarray(0, deflateSampleBytes), { level: deflateLevel }))) return plain;
  const z = deflateRawSync(plain, { level: deflateLevel });
  return pays(plain, z) ? (cbor.encode({ z }) as Uint8Array) : plain;
}

/** Whether `z` is smaller than `plain` by at least 1/16th. */
function pays(plain: Uint8Array, z: Uint8Array): boolean {
  return z.byteLength <= plain.byteLength - (plain.byteLength >> 4);
}

/** A reply as sent by packReply (deflated or not) or by a server of an earlier version (plain CBOR). */
export function unpackReply(bytes: Uint8Array): unknown {
  const v = cbor.decode(bytes) as unknown;
  if (v === null || typeof v !== "object" || !((v as { z?: unknown }).z instanceof Uint8Array) || Object.keys(v).length !== 1) return v;
  let plain: Buffer;
  try {
    plain = inflateRawSync((v as { z: Uint8Array }).z, { maxOutputLength: replyInflatedBytesMax });
  } catch (e) {
    const code = (e as { code?: string }).code;
    throw new Error(code === "ERR_BUFFER_TOO_LARGE" ? `a deflated reply inflates past ${replyInflatedBytesMax} bytes` : `a deflated reply does not inflate: ${(e as Error).message}`);
  }
  return cbor.decode(plain) as unknown;
}
