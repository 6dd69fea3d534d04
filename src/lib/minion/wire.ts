/**
 * msgpack exactly as a Salt minion writes it (`salt.payload.dumps` with `use_bin_type=False`): the *old*
 * spec, so text and bytes both go out as the str family (fixstr, str16, str32; no str8, no bin), integers in
 * their smallest form, floats as float64, maps in insertion order. The master-side `encodeWire` (msgpackr)
 * writes bytes as bin, which Salt masters accept too; this packer makes the minion's frames byte-identical
 * to a real minion's, so the captured requests can be compared byte for byte.
 */
import { PICKLE_PREFIX, type Crypticle } from "../../shared/protocol/crypticle.js";

class Out {
  buf = Buffer.allocUnsafe(256);
  len = 0;
  need(n: number): void {
    if (this.len + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.len + n) size *= 2;
    const b = Buffer.allocUnsafe(size);
    this.buf.copy(b, 0, 0, this.len);
    this.buf = b;
  }
  u8(v: number): void {
    this.need(1);
    this.buf[this.len++] = v;
  }
  u16(v: number): void {
    this.need(2);
    this.buf.writeUInt16BE(v, this.len);
    this.len += 2;
  }
  u32(v: number): void {
    this.need(4);
    this.buf.writeUInt32BE(v, this.len);
    this.len += 4;
  }
  bytes(b: Uint8Array): void {
    this.need(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }
}

const TWO_64 = 1n << 64n;

function packInt(o: Out, v: bigint): void {
  if (v >= 0n) {
    if (v < 128n) o.u8(Number(v));
    else if (v < 256n) (o.u8(0xcc), o.u8(Number(v)));
    else if (v < 65536n) (o.u8(0xcd), o.u16(Number(v)));
    else if (v < 4294967296n) (o.u8(0xce), o.u32(Number(v)));
    else if (v < TWO_64) {
      o.u8(0xcf);
      o.need(8);
      o.buf.writeBigUInt64BE(v, o.len);
      o.len += 8;
    } else packStr(o, Buffer.from(v.toString(), "latin1")); // Salt sends ints ≥ 2^64 as decimal text
  } else {
    if (v >= -32n) o.u8(Number(v) & 0xff);
    else if (v >= -128n) (o.u8(0xd0), o.u8(Number(v) & 0xff));
    else if (v >= -32768n) {
      o.u8(0xd1);
      o.need(2);
      o.buf.writeInt16BE(Number(v), o.len);
      o.len += 2;
    } else if (v >= -2147483648n) {
      o.u8(0xd2);
      o.need(4);
      o.buf.writeInt32BE(Number(v), o.len);
      o.len += 4;
    } else if (v >= -(1n << 63n)) {
      o.u8(0xd3);
      o.need(8);
      o.buf.writeBigInt64BE(v, o.len);
      o.len += 8;
    } else packStr(o, Buffer.from(v.toString(), "latin1"));
  }
}

function packStr(o: Out, b: Uint8Array): void {
  const n = b.length;
  if (n < 32) o.u8(0xa0 | n);
  else if (n < 65536) (o.u8(0xda), o.u16(n));
  else (o.u8(0xdb), o.u32(n));
  o.bytes(b);
}

function packValue(o: Out, v: unknown, depth: number): void {
  if (depth > 512) throw new RangeError("value nests too deeply to pack");
  if (v === null || v === undefined) return o.u8(0xc0);
  switch (typeof v) {
    case "boolean":
      return o.u8(v ? 0xc3 : 0xc2);
    case "number":
      if (Number.isInteger(v)) return packInt(o, BigInt(v));
      o.u8(0xcb);
      o.need(8);
      o.buf.writeDoubleBE(v, o.len);
      o.len += 8;
      return;
    case "bigint":
      return packInt(o, v);
    case "string":
      return packStr(o, Buffer.from(v, "utf8"));
  }
  if (v instanceof Uint8Array) return packStr(o, v);
  if (Array.isArray(v)) {
    const n = v.length;
    if (n < 16) o.u8(0x90 | n);
    else if (n < 65536) (o.u8(0xdc), o.u16(n));
    else (o.u8(0xdd), o.u32(n));
    for (const x of v) packValue(o, x, depth + 1);
    return;
  }
  if (v instanceof Set) return packValue(o, [...v], depth);
  const entries: [unknown, unknown][] = v instanceof Map ? [...v.entries()] : Object.entries(v as object);
  const n = entries.length;
  if (n < 16) o.u8(0x80 | n);
  else if (n < 65536) (o.u8(0xde), o.u16(n));
  else (o.u8(0xdf), o.u32(n));
  for (const [k, x] of entries) {
    packValue(o, k, depth + 1);
    packValue(o, x, depth + 1);
  }
}

/** Pack like `salt.payload.dumps(obj)` on a minion (old spec, everything str-family). */
export function packSalt(value: unknown): Buffer {
  const o = new Out();
  packValue(o, value, 0);
  return Buffer.from(o.buf.subarray(0, o.len));
}

/** `Crypticle.dumps(obj)` as a minion makes it: `pickle::` ‖ old-spec msgpack, encrypted. */
export function sealSalt(c: Crypticle, obj: unknown): Buffer {
  return c.encrypt(Buffer.concat([PICKLE_PREFIX, packSalt(obj)]));
}
