/**
 * Salt's wire msgpack.
 *
 * Salt packs with the old spec (use_bin_type=False), so ciphertexts and signatures arrive as msgpack
 * *str* values that are not UTF-8. Salt unpacks with raw=True and then turns every byte string that is
 * valid UTF-8 into text. msgpackr has no raw mode (it would corrupt such strings), so decoding uses
 * this strict decoder, which also enforces our limits (size, depth, element count, ext allow-list) —
 * a hostile frame gets a coded error, never a crash, a stack overflow or an over-allocation.
 *
 * Encoding uses msgpackr: Buffers go out as bin, which minions read as bytes (raw=True treats str and
 * bin alike), strings as str.
 *
 * Decoded shapes: str/bin → string when valid UTF-8, else Buffer; map → plain object (integer keys
 * become their decimal text; `__proto__` is defined as an own property, never a prototype);
 * integers beyond 2^53 → bigint; ext 78 (datetime) → its ASCII text; ext 79 (_Constant) → its value.
 */
import { Packr } from "msgpackr";
import { isUtf8 } from "node:buffer";
import { BrineError } from "../errors.js";
import { frameBytesMax, msgpackDepthMax, msgpackElementsMax } from "./limits.js";

export type WireValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Buffer
  | WireValue[]
  | { [key: string]: WireValue };

export interface DecodeLimits {
  bytesMax: number;
  depthMax: number;
  elementsMax: number;
}

export const wireLimits: DecodeLimits = {
  bytesMax: frameBytesMax,
  depthMax: msgpackDepthMax,
  elementsMax: msgpackElementsMax,
};

/**
 * Where each entry (key and value) of a decoded top-level map lies in `buf`, in wire order, so parts of
 * it can be sent on unchanged (a return's event carries the minion's own encoding of its return, which
 * can be large, instead of a re-encoding). Filled by decodeWire when passed; offsets index `buf`.
 */
export interface MapEntrySpans {
  buf: Buffer | undefined;
  keys: string[];
  starts: number[];
  ends: number[];
}

/** Counts what decodeWire produced, for a caller that bounds what it holds decoded (request.ts, decode-budget.ts). */
export interface DecodeTally {
  /** containers' elements decoded (what `elementsMax` bounds), summed over every decode this tally was passed to */
  elements: number;
}

export function newMapEntrySpans(): MapEntrySpans {
  return { buf: undefined, keys: [], starts: [], ends: [] };
}

/** ext type codes Salt uses (salt/payload.py). */
export const EXT_DATETIME = 78;
export const EXT_CONSTANT = 79;


/**
 * MSGPACK_TRUNCATED with the least length the buffer must have before decoding it again can get further
 * (a stream reader waits for that many bytes instead of retrying, and copying, on every chunk).
 */
export class TruncatedError extends BrineError {
  constructor(
    readonly needBytes: number,
    detail: string,
  ) {
    super("MSGPACK_TRUNCATED", detail);
  }
}

class Reader {
  pos = 0;
  elements = 0;
  constructor(
    readonly buf: Buffer,
    readonly limits: DecodeLimits,
    /** byte values may be views into `buf` (the caller owns it and never rewrites it) instead of copies */
    readonly shareBytes = false,
    /** where the entries of a top-level map lie, when the caller wants them */
    readonly spans?: MapEntrySpans,
  ) {}

  need(n: number): void {
    if (this.pos + n > this.buf.length) throw new TruncatedError(this.pos + n, `need ${n} bytes at ${this.pos}`);
  }
  u8(): number {
    this.need(1);
    return this.buf[this.pos++]!;
  }
  u16(): number {
    this.need(2);
    const v = this.buf.readUInt16BE(this.pos);
    this.pos += 2;
    return v;
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }
  bytes(n: number): Buffer {
    this.need(n);
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }
  count(n: number): void {
    // A length prefix can claim far more elements than the frame could hold: refuse before allocating.
    if (n > this.buf.length - this.pos) throw new TruncatedError(this.pos + n, `container of ${n} in a short frame`);
    this.elements += n;
    if (this.elements > this.limits.elementsMax) throw new BrineError("MSGPACK_TOO_MANY");
  }
}

/**
 * Short ASCII strings (map keys above all: `cmd`, `id`, `jid`, `return`...) are looked up in a small
 * cache instead of being built anew: the same key string object every time keeps V8's property-name
 * lookups and object shapes warm, and skips a native string allocation. Entries are compared byte for
 * byte, so a hash collision only costs a rebuild.
 */
const cachedStringBytesMax = 16;
const stringCacheSlots = 4096;
/**
 * Each slot's bytes at `slot * cachedStringBytesMax` in one buffer of the thread's own, and their count (0: empty):
 * a Buffer per slot was a slice of Buffer's shared 8 KiB pool, and every kept slice kept its whole pool chunk
 * alive (with minion ids cached, up to 8 KiB per slot and thread).
 */
const stringCacheBytes = Buffer.alloc(stringCacheSlots * cachedStringBytesMax);
const stringCacheLengths = new Uint8Array(stringCacheSlots);
const stringCacheText: string[] = new Array(stringCacheSlots);

/**
 * Buffer's per-encoding slice methods (what `toString(encoding, start, end)` dispatches to, long stable in
 * Node though left out of its typings): called directly they skip the encoding lookup, which showed in
 * profiles of the return path.
 */
interface SliceMethods {
  latin1Slice(start: number, end: number): string;
  utf8Slice(start: number, end: number): string;
}
const slices = (b: Buffer): SliceMethods => b as unknown as SliceMethods;

function cachedAscii(buf: Buffer, start: number, n: number): string | undefined {
  let h = n;
  for (let i = start; i < start + n; i++) {
    const c = buf[i]!;
    if (c > 0x7f) return undefined;
    h = (Math.imul(h, 31) + c) | 0;
  }
  const slot = (h ^ (h >>> 12)) & (stringCacheSlots - 1);
  const at = slot * cachedStringBytesMax;
  if (stringCacheLengths[slot] === n) {
    let same = true;
    for (let i = 0; i < n; i++) {
      if (stringCacheBytes[at + i] !== buf[start + i]) {
        same = false;
        break;
      }
    }
    if (same) return stringCacheText[slot]!;
  }
  const text = slices(buf).latin1Slice(start, start + n);
  buf.copy(stringCacheBytes, at, start, start + n);
  stringCacheLengths[slot] = n;
  stringCacheText[slot] = text;
  return text;
}

/** Longest string checked for ASCII in JS before the native UTF-8 check (which needs a view object). */
const asciiScanBytesMax = 64;

function isAscii(buf: Buffer, start: number, n: number): boolean {
  for (let i = start; i < start + n; i++) if (buf[i]! > 0x7f) return false;
  return true;
}

/** A str or bin of `n` bytes at the reader's position: text when valid UTF-8, else a copy of the bytes. */
function readText(r: Reader, n: number): string | Buffer {
  r.need(n);
  const start = r.pos;
  r.pos += n;
  const buf = r.buf;
  if (n <= cachedStringBytesMax) {
    const s = cachedAscii(buf, start, n);
    if (s !== undefined) return s;
  } else if (n <= asciiScanBytesMax && isAscii(buf, start, n)) {
    return slices(buf).latin1Slice(start, start + n); // jids, nonces, stamps: no view object needed
  }
  const b = buf.subarray(start, start + n);
  // ciphertexts are not UTF-8: a native validity check avoids a throwing decode for each of them
  // (V8's UTF-8 decoder takes an ASCII fast path itself)
  if (isUtf8(b)) return slices(buf).utf8Slice(start, start + n);
  return r.shareBytes ? b : Buffer.from(b);
}

function readInt64(r: Reader, signed: boolean): number | bigint {
  r.need(8);
  const v = signed ? r.buf.readBigInt64BE(r.pos) : r.buf.readBigUInt64BE(r.pos);
  r.pos += 8;
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

function mapKey(k: WireValue): string {
  if (typeof k === "string") return k;
  if (typeof k === "number" || typeof k === "bigint" || typeof k === "boolean") return String(k);
  if (k === null) return "None";
  if (Buffer.isBuffer(k)) return k.toString("latin1");
  throw new BrineError("MSGPACK_INVALID", "unhashable map key");
}

function readMap(r: Reader, n: number, depth: number): { [key: string]: WireValue } {
  r.count(n * 2);
  const out: { [key: string]: WireValue } = {};
  const spans = depth === 0 ? r.spans : undefined;
  for (let i = 0; i < n; i++) {
    const start = r.pos;
    const k = mapKey(readValue(r, depth + 1));
    const v = readValue(r, depth + 1);
    if (spans) {
      spans.keys.push(k);
      spans.starts.push(start);
      spans.ends.push(r.pos);
    }
    if (k === "__proto__") Object.defineProperty(out, k, { value: v, enumerable: true, writable: true, configurable: true });
    else out[k] = v;
  }
  return out;
}

function readArray(r: Reader, n: number, depth: number): WireValue[] {
  r.count(n);
  const out: WireValue[] = new Array(n);
  for (let i = 0; i < n; i++) out[i] = readValue(r, depth + 1);
  return out;
}

function readExt(r: Reader, type: number, len: number, depth: number): WireValue {
  const body = r.bytes(len);
  if (type === EXT_DATETIME) return body.toString("latin1");
  if (type === EXT_CONSTANT) {
    // its elements count toward the frame's: a frame of many such values holds no more than elementsMax in all
    const sub: DecodeTally = { elements: 0 };
    const inner = decodeWire(body, { ...r.limits, depthMax: r.limits.depthMax - depth, elementsMax: r.limits.elementsMax - r.elements }, false, undefined, sub);
    r.elements += sub.elements;
    return Array.isArray(inner) && inner.length === 2 ? inner[1]! : inner;
  }
  throw new BrineError("MSGPACK_EXT", `type ${type}`);
}

function readValue(r: Reader, depth: number): WireValue {
  if (depth > r.limits.depthMax) throw new BrineError("MSGPACK_TOO_DEEP");
  const t = r.u8();
  if (t <= 0x7f) return t;
  if (t >= 0xe0) return t - 0x100;
  if (t >= 0xa0 && t <= 0xbf) return readText(r, t & 0x1f);
  if (t >= 0x90 && t <= 0x9f) return readArray(r, t & 0x0f, depth);
  if (t >= 0x80 && t <= 0x8f) return readMap(r, t & 0x0f, depth);
  switch (t) {
    case 0xc0:
      return null;
    case 0xc2:
      return false;
    case 0xc3:
      return true;
    case 0xc4:
    case 0xd9:
      return readText(r, r.u8());
    case 0xc5:
    case 0xda:
      return readText(r, r.u16());
    case 0xc6:
    case 0xdb:
      return readText(r, r.u32());
    case 0xc7: {
      const len = r.u8();
      return readExt(r, r.buf.readInt8((r.need(1), r.pos++)), len, depth);
    }
    case 0xc8: {
      const len = r.u16();
      return readExt(r, r.buf.readInt8((r.need(1), r.pos++)), len, depth);
    }
    case 0xc9: {
      const len = r.u32();
      return readExt(r, r.buf.readInt8((r.need(1), r.pos++)), len, depth);
    }
    case 0xca: {
      r.need(4);
      const v = r.buf.readFloatBE(r.pos);
      r.pos += 4;
      return v;
    }
    case 0xcb: {
      r.need(8);
      const v = r.buf.readDoubleBE(r.pos);
      r.pos += 8;
      return v;
    }
    case 0xcc:
      return r.u8();
    case 0xcd:
      return r.u16();
    case 0xce:
      return r.u32();
    case 0xcf:
      return readInt64(r, false);
    case 0xd0:
      return r.buf.readInt8((r.need(1), r.pos++));
    case 0xd1: {
      r.need(2);
      const v = r.buf.readInt16BE(r.pos);
      r.pos += 2;
      return v;
    }
    case 0xd2: {
      r.need(4);
      const v = r.buf.readInt32BE(r.pos);
      r.pos += 4;
      return v;
    }
    case 0xd3:
      return readInt64(r, true);
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8: {
      const len = 1 << (t - 0xd4);
      const type = r.buf.readInt8((r.need(1), r.pos++));
      return readExt(r, type, len, depth);
    }
    case 0xdc:
      return readArray(r, r.u16(), depth);
    case 0xdd:
      return readArray(r, r.u32(), depth);
    case 0xde:
      return readMap(r, r.u16(), depth);
    case 0xdf:
      return readMap(r, r.u32(), depth);
    default:
      throw new BrineError("MSGPACK_INVALID", `type byte 0x${t.toString(16)}`);
  }
}

/**
 * Decode one complete msgpack value; trailing bytes are an error (a frame holds exactly one).
 * Byte values are copies unless `shareBytes`: then they are views into `buf`, for a caller that owns
 * `buf` and never rewrites it (a request frame, a decrypted plaintext) and spares the copies.
 */
export function decodeWire(buf: Uint8Array, limits: DecodeLimits = wireLimits, shareBytes = false, spans?: MapEntrySpans, tally?: DecodeTally): WireValue {
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  if (b.length > limits.bytesMax) throw new BrineError("FRAME_TOO_LARGE", `${b.length} bytes`);
  if (b.length === 0) throw new BrineError("MSGPACK_TRUNCATED", "empty frame");
  if (spans) {
    spans.buf = b;
    spans.keys.length = spans.starts.length = spans.ends.length = 0;
  }
  const r = new Reader(b, limits, shareBytes, spans);
  const v = readValue(r, 0);
  if (r.pos !== b.length) throw new BrineError("MSGPACK_INVALID", `${b.length - r.pos} trailing bytes`);
  if (tally) tally.elements += r.elements;
  return v;
}

/**
 * Decode the first complete value of `buf` and say where it ended (for streams of back-to-back
 * values). Throws MSGPACK_TRUNCATED when the value is not complete yet.
 */
export function decodeWirePrefix(buf: Buffer, limits: DecodeLimits = wireLimits): { value: WireValue; end: number } {
  if (buf.length === 0) throw new BrineError("MSGPACK_TRUNCATED", "empty buffer");
  const r = new Reader(buf, limits);
  const value = readValue(r, 0);
  return { value, end: r.pos };
}

const packr = new Packr({
  useRecords: false,
  moreTypes: false,
  structuredClone: false,
  variableMapSize: true,
  encodeUndefinedAsNil: true,
  useFloat32: 0,
  largeBigIntToString: true,
});

/** Encode for the wire (requests, replies, publishes) and for nested payloads inside them. */
export function encodeWire(value: unknown): Buffer {
  return packr.pack(value);
}

/**
 * `map` encoded with one more entry, `key`, whose value is `encodedValue`, already msgpack (a runner's result
 * encoded in its own thread): the value's bytes are copied, never decoded or encoded again.
 */
export function encodeWithEncodedEntry(map: Record<string, unknown>, key: string, encodedValue: Uint8Array): Buffer {
  const head = headOfEncodedEntry(map, key);
  const out = Buffer.allocUnsafe(head.length + encodedValue.length);
  head.copy(out, 0);
  out.set(encodedValue, head.length);
  return out;
}

/**
 * What precedes the value in encodeWithEncodedEntry(map, key, value): the map's entries and `key`. Sent before the
 * value's own bytes, it spares a copy of a large value (the control socket's reply to a 100,000-job list).
 */
export function headOfEncodedEntry(map: Record<string, unknown>, key: string): Buffer {
  const head = encodeWire(map);
  const t = head[0]!;
  const [n, at] = t >= 0x80 && t <= 0x8f ? [t & 0x0f, 1] : t === 0xde ? [head.readUInt16BE(1), 3] : [head.readUInt32BE(1), 5];
  const k = encodeWire(key);
  const out = Buffer.allocUnsafe(mapHeaderBytes(n + 1) + head.length - at + k.length);
  let pos = writeMapHeader(out, 0, n + 1);
  pos += head.copy(out, pos, at);
  k.copy(out, pos);
  return out;
}

/** Bytes of the msgpack bin header (bin 8 / 16 / 32, as msgpackr writes a Buffer) of `n` bytes of data. */
export function binHeaderBytes(n: number): number {
  return n < 0x100 ? 2 : n < 0x10000 ? 3 : 5;
}

/** Bytes of the msgpack map header (fixmap / map 16 / map 32) of `n` entries. */
export function mapHeaderBytes(n: number): number {
  return n < 0x10 ? 1 : n < 0x10000 ? 3 : 5;
}

/** Writes a bin header for `n` bytes at `pos`; returns the position after it. */
export function writeBinHeader(out: Buffer, pos: number, n: number): number {
  return writeSized(out, pos, n, binHeaderBytes(n), n < 0x100 ? 0xc4 : n < 0x10000 ? 0xc5 : 0xc6);
}

/** Writes a map header for `n` entries at `pos`; returns the position after it. */
export function writeMapHeader(out: Buffer, pos: number, n: number): number {
  if (n < 0x10) {
    out[pos] = 0x80 | n;
    return pos + 1;
  }
  return writeSized(out, pos, n, mapHeaderBytes(n), n < 0x10000 ? 0xde : 0xdf);
}

/** `op` then `n` big-endian in the header's remaining 1, 2 or 4 bytes. */
function writeSized(out: Buffer, pos: number, n: number, headerBytes: number, op: number): number {
  out[pos] = op;
  if (headerBytes === 2) out[pos + 1] = n;
  else if (headerBytes === 3) out.writeUInt16BE(n, pos + 1);
  else out.writeUInt32BE(n, pos + 1);
  return pos + headerBytes;
}

/** True for a plain decoded map (not an array, Buffer or null). */
export function isMap(v: unknown): v is { [key: string]: WireValue } {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !Buffer.isBuffer(v);
}

/** A field that must be bytes on the wire (ciphertexts): strings that happened to be UTF-8 go back to bytes. */
export function asBytes(v: unknown): Buffer | undefined {
  if (Buffer.isBuffer(v)) return v;
  if (typeof v === "string") return Buffer.from(v, "utf8");
  return undefined;
}
