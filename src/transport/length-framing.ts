/**
 * Length-prefixed msgpack frames for brine's local control socket (4-byte big-endian length, then
 * msgpack). Local and written by our own tools, but still bounded: a frame over `controlFrameBytesMax`
 * closes the connection.
 */
import { Packr, Unpackr } from "msgpackr";

export const controlFrameBytesMax = 256 * 1024 * 1024;
const packr = new Packr({ useRecords: false, moreTypes: false, largeBigIntToString: true });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });

export function frame(value: unknown): Buffer {
  const body = packr.pack(value);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length);
  return Buffer.concat([head, body]);
}

export class FrameReader {
  private buf: Buffer = Buffer.alloc(0);

  /** Complete messages in this chunk; throws when a frame claims more than the limit. */
  push(chunk: Buffer): unknown[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: unknown[] = [];
    while (this.buf.length >= 4) {
      const len = this.buf.readUInt32BE(0);
      if (len > controlFrameBytesMax) throw new Error(`control frame of ${len} bytes exceeds controlFrameBytesMax`);
      if (this.buf.length < 4 + len) break;
      out.push(unpackr.unpack(this.buf.subarray(4, 4 + len)));
      this.buf = this.buf.subarray(4 + len);
    }
    return out;
  }
}
