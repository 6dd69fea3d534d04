/**
 * Master events on the local bus, framed as Salt frames them (so Salt's own tools could read the
 * stream): each event is one msgpack map `{"head": {}, "body": tag ‖ "\n\n" ‖ msgpack(data)}`, and the
 * stream is those maps back to back. Data gets `_stamp` (UTC, ISO without zone) when it is a map.
 */
import { Unpackr } from "msgpackr";
import { encodeWire } from "../protocol/msgpack.js";

export const TAG_END = "\n\n";

export function stamp(d = new Date()): string {
  return d.toISOString().replace("Z", "").padEnd(26, "0");
}

export function packEvent(tag: string, data: unknown, now = new Date()): Buffer {
  const payload = data && typeof data === "object" && !Array.isArray(data) && !Buffer.isBuffer(data) ? { ...(data as object), _stamp: stamp(now) } : data;
  const body = Buffer.concat([Buffer.from(tag + TAG_END, "utf8"), encodeWire(payload)]);
  return encodeWire({ head: {}, body });
}

const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });

export interface BusEvent {
  tag: string;
  data: any;
}

export function unpackBody(body: Uint8Array): BusEvent {
  const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const sep = b.indexOf(TAG_END);
  if (sep < 0) return { tag: b.toString("utf8"), data: {} };
  return { tag: b.subarray(0, sep).toString("utf8"), data: unpackr.unpack(b.subarray(sep + 2)) };
}

/** Incremental reader of a concatenated event stream (local, trusted: written by the master). */
export class EventStreamReader {
  private pending: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): BusEvent[] {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const out: BusEvent[] = [];
    let consumed = 0;
    try {
      unpackr.unpackMultiple(this.pending, (frame: any, _start?: number, end?: number) => {
        if (frame && frame.body) out.push(unpackBody(frame.body));
        if (end !== undefined) consumed = end;
      });
      consumed = this.pending.length;
    } catch (e) {
      const err = e as { incomplete?: boolean; lastPosition?: number };
      if (!err.incomplete) throw e;
      consumed = err.lastPosition ?? consumed;
    }
    this.pending = this.pending.subarray(consumed);
    return out;
  }
}
