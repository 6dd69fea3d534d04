/**
 * Length-prefixed msgpack frames for brine's local control socket (4-byte big-endian length, then
 * msgpack). Local and written by our own tools, but still bounded: a frame over `controlFrameBytesMax`
 * closes the connection.
 *
 * Maps and arrays of any size cross it (a `jobs.list_jobs` of 100,000 jobs, a return with 100,000 keys):
 * frames are encoded by the wire encoder (`encodeWire`: map 32 / array 32 headers when needed; msgpackr's
 * default "fast 16-bit map size" throws past 65,535 keys) and decoded by the strict decoder, which answers
 * any bytes with a coded error (MSGPACK_*), never a crash or an allocation a length prefix asked for.
 * A frame arriving in many chunks is copied once, when it is complete (not once per chunk).
 */
import { BrineError } from "./errors.js";
import { decodeWire, encodeWire, type DecodeLimits } from "./protocol/msgpack.js";

export const controlFrameBytesMax = 256 * 1024 * 1024;
/** What one control frame may hold (a runner's return: the job cache's whole answer). */
export const controlLimits: DecodeLimits = { bytesMax: controlFrameBytesMax, depthMax: 256, elementsMax: 100_000_000 };

export function frame(value: unknown): Buffer {
  return frameEncoded(encodeWire(value));
}

/** The frame of a body already encoded (encodeWithEncodedEntry). */
export function frameEncoded(body: Buffer): Buffer {
  if (body.length > controlFrameBytesMax) throw new BrineError("CONTROL_FRAME", `a reply of ${body.length} bytes exceeds controlFrameBytesMax (${controlFrameBytesMax})`);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  return Buffer.concat([head, body]);
}

/**
 * The frame of a body sent in two pieces (a head, then a large value's own bytes), as the two buffers to write:
 * the value is never copied into a joined frame.
 */
export function frameOfPieces(head: Uint8Array, value: Uint8Array): [Buffer, Uint8Array] {
  const bytes = head.length + value.length;
  if (bytes > controlFrameBytesMax) throw new BrineError("CONTROL_FRAME", `a reply of ${bytes} bytes exceeds controlFrameBytesMax (${controlFrameBytesMax})`);
  const first = Buffer.allocUnsafe(4 + head.length);
  first.writeUInt32BE(bytes);
  first.set(head, 4);
  return [first, value];
}

export class FrameReader {
  private chunks: Buffer[] = [];
  private bytes = 0;
  /** the whole frame's size (4 + body) once its length is known */
  private want = 0;

  /**
   * Complete messages in this chunk. Throws a BrineError (CONTROL_FRAME when a frame claims more than the
   * limit, MSGPACK_* when a body does not decode); the stream cannot be resynchronised after either, so the
   * caller closes the connection.
   */
  push(chunk: Buffer): unknown[] {
    if (chunk.length === 0) return [];
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    const out: unknown[] = [];
    for (;;) {
      if (this.want === 0) {
        if (this.bytes < 4) break;
        const head = this.chunks[0]!.length >= 4 ? this.chunks[0]! : this.join();
        const len = head.readUInt32BE(0);
        if (len > controlFrameBytesMax) throw new BrineError("CONTROL_FRAME", `a frame of ${len} bytes exceeds controlFrameBytesMax (${controlFrameBytesMax})`);
        this.want = 4 + len;
      }
      if (this.bytes < this.want) break;
      const buf = this.join();
      const body = buf.subarray(4, this.want);
      this.chunks = buf.length > this.want ? [buf.subarray(this.want)] : [];
      this.bytes = buf.length - this.want;
      this.want = 0;
      if (body.length === 0) throw new BrineError("CONTROL_FRAME", "an empty frame");
      out.push(decodeWire(body, controlLimits));
    }
    return out;
  }

  private join(): Buffer {
    if (this.chunks.length > 1) this.chunks = [Buffer.concat(this.chunks, this.bytes)];
    return this.chunks[0]!;
  }
}
