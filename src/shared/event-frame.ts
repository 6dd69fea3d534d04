/**
 * Master events on the local bus, framed as Salt frames them (so Salt's own tools could read the
 * stream): each event is one msgpack map `{"head": {}, "body": tag ‖ "\n\n" ‖ msgpack(data)}`, and the
 * stream is those maps back to back. Data gets `_stamp` (UTC, ISO without zone) when it is a map.
 */
import { binHeaderBytes, decodeWire, decodeWirePrefix, TruncatedError, encodeWire, isMap, mapHeaderBytes, writeBinHeader, writeMapHeader, type DecodeLimits, type MapEntrySpans } from "./protocol/msgpack.js";

export const TAG_END = "\n\n";

let lastStampMs = -1;
let lastStamp = "";
/** `_stamp`: UTC ISO time without zone, microsecond digits (cached per millisecond: hot on returns). */
export function stamp(d = new Date()): string {
  const ms = d.getTime();
  if (ms !== lastStampMs) {
    lastStampMs = ms;
    lastStamp = d.toISOString().replace("Z", "").padEnd(26, "0");
  }
  return lastStamp;
}

/** `{"head": {}, "body": ` as msgpack: a 2-entry map, an empty map, and the key of the bin that follows. */
const FRAME_HEAD = Buffer.from([0x82, 0xa4, ...Buffer.from("head"), 0x80, 0xa4, ...Buffer.from("body")]);

/**
 * One bus frame. Built in place (one allocation, one msgpack encoding of the data) rather than by
 * encoding the data and then the frame around it: events are fired for every return, on the hot path.
 * With `owned`, `data` is a map the caller made for this event alone, and gets `_stamp` set on it
 * instead of being copied.
 */
export function packEvent(tag: string, data: unknown, now = new Date(), owned = false): Buffer {
  let payload = data;
  if (data && typeof data === "object" && !Array.isArray(data) && !Buffer.isBuffer(data)) {
    if (owned) (data as Record<string, unknown>)._stamp = stamp(now);
    else payload = { ...(data as object), _stamp: stamp(now) };
  }
  const packed = encodeWire(payload);
  const { out, pos } = frameFor(tag, packed.length);
  packed.copy(out, pos);
  return out;
}

/** The bus frame of an event whose data is already msgpack (`_stamp` included by the caller). */
export function packEventEncoded(tag: string, data: Uint8Array): Buffer {
  const { out, pos } = frameFor(tag, data.length);
  out.set(data, pos);
  return out;
}

/**
 * A frame whose body is `tag` "\n\n" and then `dataBytes` bytes of msgpack: returns the frame with
 * everything before the data written, and where the data goes.
 */
function frameFor(tag: string, dataBytes: number): { out: Buffer; pos: number } {
  const tagBytes = Buffer.byteLength(tag, "utf8");
  const bodyBytes = tagBytes + TAG_END.length + dataBytes;
  const out = Buffer.allocUnsafe(FRAME_HEAD.length + binHeaderBytes(bodyBytes) + bodyBytes);
  let pos = writeBinHeader(out, FRAME_HEAD.copy(out), bodyBytes);
  pos += out.write(tag, pos, "utf8");
  pos += out.write(TAG_END, pos, "latin1");
  return { out, pos };
}

const STAMP_KEY = encodeWire("_stamp");

const JOB_TAG = Buffer.from("salt/job/");
const RET_PART = Buffer.from("/ret/");

/**
 * A job return's event in one packed bus frame, read without decoding it: the jid and minion id of its tag
 * (`salt/job/<jid>/ret/<id>`) and its data's msgpack bytes (a view into the frame); undefined for any other
 * frame, or one not packed as packEvent packs them.
 */
export function jobReturnOfFrame(frame: Uint8Array): { jid: string; id: string; data: Uint8Array } | undefined {
  const h = FRAME_HEAD.length;
  if (frame.length < h + 2 + JOB_TAG.length || Buffer.compare(FRAME_HEAD, frame.subarray(0, h)) !== 0) return undefined;
  const b = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength);
  let start: number;
  let len: number;
  if (b[h] === 0xc4) [start, len] = [h + 2, b[h + 1]!];
  else if (b[h] === 0xc5 && b.length >= h + 3) [start, len] = [h + 3, b.readUInt16BE(h + 1)];
  else if (b[h] === 0xc6 && b.length >= h + 5) [start, len] = [h + 5, b.readUInt32BE(h + 1)];
  else return undefined;
  const end = start + len;
  if (end > b.length || Buffer.compare(JOB_TAG, b.subarray(start, start + JOB_TAG.length)) !== 0) return undefined;
  const ret = b.indexOf(RET_PART, start + JOB_TAG.length);
  if (ret < 0 || ret >= end) return undefined;
  const sep = b.indexOf(TAG_END, ret + RET_PART.length, "latin1");
  if (sep < 0 || sep + TAG_END.length > end) return undefined;
  const jid = b.toString("utf8", start + JOB_TAG.length, ret);
  const id = b.toString("utf8", ret + RET_PART.length, sep);
  if (jid.includes("/")) return undefined;
  return { jid, id, data: b.subarray(sep + TAG_END.length, end) };
}

/**
 * The event of a decoded map sent on in the sender's own encoding: the entries of `spans` (from
 * decodeWire) except the keys in `drop` and any `_stamp`, then `_stamp`. Equal, once decoded, to
 * packEvent of the decoded map without those keys; but a large value (a state run's return) is copied,
 * not encoded again.
 */
export function packEventFromSpans(tag: string, spans: MapEntrySpans, drop: ReadonlySet<string>, now = new Date()): Buffer {
  const src = spans.buf!;
  let entries = 1;
  let bytes = 0;
  for (let i = 0; i < spans.keys.length; i++) {
    const k = spans.keys[i]!;
    if (drop.has(k) || k === "_stamp") continue;
    entries++;
    bytes += spans.ends[i]! - spans.starts[i]!;
  }
  const stampValue = encodeWire(stamp(now));
  const { out, pos: at } = frameFor(tag, mapHeaderBytes(entries) + bytes + STAMP_KEY.length + stampValue.length);
  let pos = writeMapHeader(out, at, entries);
  for (let i = 0; i < spans.keys.length; i++) {
    const k = spans.keys[i]!;
    if (drop.has(k) || k === "_stamp") continue;
    pos += src.copy(out, pos, spans.starts[i]!, spans.ends[i]!);
  }
  pos += STAMP_KEY.copy(out, pos);
  stampValue.copy(out, pos);
  return out;
}

/** Local event frames can carry big job returns; the bus allows more than a request frame. */
const busLimits: DecodeLimits = { bytesMax: 1024 * 1024 * 1024, depthMax: 200, elementsMax: 50_000_000 };

export interface BusEvent {
  tag: string;
  data: any;
}

/** Separators tried per body: a tag may itself hold "\n\n" (Salt's framing cannot say where such a tag ends). */
const tagEndsTriedMax = 16;

/**
 * The event in a frame's body: the tag, "\n\n", msgpack data. Salt splits at the first "\n\n"; when what follows
 * it does not decode (a tag holding "\n\n" itself), the next separators are tried, so such an event keeps its
 * whole tag instead of ending the reader. Throws (MSGPACK_*) when no split decodes.
 */
export function unpackBody(body: Uint8Array, limits: DecodeLimits = busLimits): BusEvent {
  const b = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  let sep = b.indexOf(TAG_END);
  if (sep < 0) return { tag: b.toString("utf8"), data: {} };
  let first: unknown;
  for (let tries = 0; sep >= 0 && tries < tagEndsTriedMax; tries++) {
    try {
      return { tag: b.subarray(0, sep).toString("utf8"), data: decodeWire(b.subarray(sep + 2), limits) };
    } catch (e) {
      first ??= e;
      sep = b.indexOf(TAG_END, sep + 1);
    }
  }
  throw first;
}

/** The event carried by one decoded bus frame, if it is one. Throws (MSGPACK_*) when its data does not decode (within `limits`). */
export function eventOfFrame(frame: unknown, limits: DecodeLimits = busLimits): BusEvent | undefined {
  return isMap(frame) && Buffer.isBuffer(frame.body) ? unpackBody(frame.body, limits) : isMap(frame) && typeof frame.body === "string" ? unpackBody(Buffer.from(frame.body), limits) : undefined;
}

/** The event in one packed bus frame (as the main thread hands them to runner threads), or undefined when unreadable. */
export function busEventOf(frame: Uint8Array): BusEvent | undefined {
  try {
    return eventOfFrame(decodeWire(frame, busLimits));
  } catch {
    return undefined;
  }
}

/**
 * Incremental reader of a concatenated event stream. Frame boundaries come from the strict decoder,
 * which reports an incomplete value as such (msgpackr's unpackMultiple can decode a truncated value
 * and emit it twice) and how many bytes it needs, so a large frame arriving in many chunks is copied once,
 * when complete. A frame whose event does not decode is skipped and counted (`skipped`): any bytes in a tag or
 * in data leave the reader working. Only a stream that is not msgpack at all throws (MSGPACK_*): it cannot be
 * resynchronised, and the caller closes it.
 */
export class EventStreamReader {
  /** `limits`: what one frame may hold (default: the bus's, busLimits) */
  constructor(private readonly limits: DecodeLimits = busLimits) {}
  private chunks: Buffer[] = [];
  private bytes = 0;
  /** bytes needed before decoding is worth trying again */
  private want = 0;
  /** frames whose event could not be decoded */
  skipped = 0;

  push(chunk: Buffer): BusEvent[] {
    if (chunk.length) {
      this.chunks.push(chunk);
      this.bytes += chunk.length;
    }
    const out: BusEvent[] = [];
    if (this.bytes === 0 || this.bytes < this.want) return out;
    const buf = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.bytes);
    let pos = 0;
    this.want = 0;
    while (pos < buf.length) {
      let r;
      try {
        r = decodeWirePrefix(buf.subarray(pos), this.limits);
      } catch (e) {
        if (e instanceof TruncatedError && e.needBytes > buf.length - pos) {
          this.want = e.needBytes; // counted from `pos`, where the kept bytes start
          break;
        }
        throw e;
      }
      pos += r.end;
      let ev: BusEvent | undefined;
      try {
        ev = eventOfFrame(r.value, this.limits);
      } catch {
        this.skipped++;
        continue;
      }
      if (ev) out.push(ev);
    }
    const rest = buf.subarray(pos);
    this.chunks = rest.length ? [rest] : [];
    this.bytes = rest.length;
    return out;
  }
}
