/**
 * Salt's Crypticle: AES-192-CBC + HMAC-SHA256 (encrypt-then-MAC) under a 76-character key string,
 * base64 of 24 AES bytes ‖ 32 HMAC bytes. Plaintexts are `pickle::` [‖ 32-char nonce] ‖ msgpack.
 *
 * A Crypticle instance also carries the publish serial check: a map with `serial` is accepted only when
 * the serial is strictly greater than the last one this instance accepted (anti-replay, minion side).
 */
import { createCipheriv, createDecipheriv, createHmac, randomBytes, type Cipher, type Decipher } from "node:crypto";
import { BrineError } from "../errors.js";
import { binHeaderBytes, decodeWire, encodeWire, isMap, writeBinHeader, type DecodeLimits, type DecodeTally, type MapEntrySpans, type WireValue, wireLimits } from "./msgpack.js";

const AES_KEY_BYTES = 24;
const HMAC_KEY_BYTES = 32;
const IV_BYTES = 16;
const MAC_BYTES = 32;
const BLOCK_BYTES = 16;
export const PICKLE_PREFIX = Buffer.from("pickle::", "latin1");
export const NONCE_CHARS = 32;

/** A fresh key string: base64 of 56 random bytes, 76 ASCII characters ending in '='. */
export function generateKeyString(): string {
  return randomBytes(AES_KEY_BYTES + HMAC_KEY_BYTES).toString("base64");
}

/**
 * IVs come from a pool of CSPRNG bytes refilled 64 KiB at a time: one randomFillSync call per 4096
 * encryptions instead of one per encryption (it showed as 5% of the return path).
 */
const ivPoolBytes = 64 * 1024;
let ivPool = Buffer.alloc(0);
let ivPos = 0;
function freshIv(): Buffer {
  if (ivPos + IV_BYTES > ivPool.length) {
    ivPool = randomBytes(ivPoolBytes);
    ivPos = 0;
  }
  const iv = ivPool.subarray(ivPos, ivPos + IV_BYTES);
  ivPos += IV_BYTES;
  return iv;
}

/**
 * AES-CBC through one long-lived OpenSSL context per key and direction. Creating a cipher context costs
 * about 7 µs per message (key schedule + EVP setup), several times the AES work of a 300-byte return.
 * A CBC context that is never finalised only carries the last ciphertext block forward as the chaining
 * value, so a message under a fresh IV is the CBC encryption of its first block XOR IV XOR that carried
 * block (decryption: XOR the first plaintext block with the same two): byte for byte what a new
 * context per message produces. Padding is done here (PKCS#7, as Salt pads), so every update() is a
 * whole number of blocks and the context never holds a partial block back.
 * Invariant: `last` equals the context's current chaining block (its last ciphertext block).
 */
class CbcStream {
  private ctx: Cipher | Decipher | undefined;
  private readonly last = Buffer.alloc(BLOCK_BYTES);

  constructor(
    private readonly key: Buffer,
    private readonly decrypting: boolean,
  ) {}

  /** CBC over `blocks` (a whole number of blocks) under `iv`; returns a new buffer of the same length. */
  run(blocks: Buffer, iv: Buffer): Buffer {
    if (!this.ctx) {
      const zero = Buffer.alloc(BLOCK_BYTES);
      this.ctx = this.decrypting ? createDecipheriv("aes-192-cbc", this.key, zero) : createCipheriv("aes-192-cbc", this.key, zero);
      this.ctx.setAutoPadding(false);
      this.last.fill(0);
    }
    let out: Buffer;
    try {
      if (this.decrypting) {
        out = this.ctx.update(blocks);
        for (let i = 0; i < BLOCK_BYTES; i++) out[i]! ^= iv[i]! ^ this.last[i]!;
        blocks.copy(this.last, 0, blocks.length - BLOCK_BYTES);
      } else {
        for (let i = 0; i < BLOCK_BYTES; i++) blocks[i]! ^= iv[i]! ^ this.last[i]!;
        out = this.ctx.update(blocks);
        out.copy(this.last, 0, out.length - BLOCK_BYTES);
      }
    } catch (e) {
      this.ctx = undefined; // chaining state unknown: start a fresh context next time
      throw e;
    }
    if (out.length !== blocks.length) {
      this.ctx = undefined;
      throw new BrineError("CRYPTICLE_FORMAT", "cipher context held back a block");
    }
    return out;
  }
}

/**
 * `data[at .. at+32)` equals `mac`, in time independent of where they differ (what timingSafeEqual
 * does, without the view object it needs on the hot path).
 */
function macEqual(data: Buffer, at: number, mac: Buffer): boolean {
  let diff = 0;
  for (let i = 0; i < MAC_BYTES; i++) diff |= data[at + i]! ^ mac[i]!;
  return diff === 0;
}

function hasPicklePrefix(plain: Buffer): boolean {
  if (plain.length < PICKLE_PREFIX.length) return false;
  for (let i = 0; i < PICKLE_PREFIX.length; i++) if (plain[i] !== PICKLE_PREFIX[i]) return false;
  return true;
}

/** Bytes of PKCS#7 padding after `n` plaintext bytes (1..16). */
function padBytes(n: number): number {
  return BLOCK_BYTES - (n % BLOCK_BYTES);
}

export interface LoadsOptions {
  nonce?: string;
  checkSerial?: boolean;
  limits?: DecodeLimits;
  /** filled with where the top-level map's entries lie in the plaintext */
  spans?: MapEntrySpans;
  /** adds the elements decoded (msgpack.ts DecodeTally) */
  tally?: DecodeTally;
}

/**
 * How many Crypticles of a thread may hold their long-lived OpenSSL contexts at once (count). A context pair
 * costs about 3.7 KB of native and V8 memory; a master keeps a session Crypticle per minion in every request
 * worker, so contexts for all of them cost ~4 KB × minions × workers (about 18 KB per connected minion with
 * 5 workers: issue 17). The oldest holder beyond this bound drops its contexts (first in, first out; a hit
 * stays a field read) and makes new ones on its next message: one context set-up, ~7 µs, for a minion not
 * heard from in the last this-many others.
 */
export const cipherContextHoldersMax = 512;
const contextHolders = new Set<Crypticle>();

/** Crypticles of this thread that hold cipher contexts now (tests). */
export function cipherContextHolders(): number {
  return contextHolders.size;
}

function holdContexts(c: Crypticle): void {
  if (contextHolders.has(c)) return;
  contextHolders.add(c);
  if (contextHolders.size > cipherContextHoldersMax) {
    const oldest = contextHolders.values().next().value!;
    contextHolders.delete(oldest);
    oldest.dropContexts();
  }
}

export class Crypticle {
  readonly keyString: string;
  private readonly aesKey: Buffer;
  private readonly hmacKey: Buffer;
  private encStream: CbcStream | undefined;
  private decStream: CbcStream | undefined;
  /** last publish serial accepted by loads(); 0 = none yet */
  serial = 0;

  constructor(keyString: string) {
    // an allocation of its own, not a slice of Buffer's shared 8 KiB pool: a Crypticle lives as long as its minion's
    // session, and a kept slice keeps its whole pool chunk alive (measured: ~6 KB per minion and thread)
    const raw = Buffer.alloc(AES_KEY_BYTES + HMAC_KEY_BYTES);
    if (Buffer.byteLength(keyString, "base64") !== raw.length || raw.write(keyString, "base64") !== raw.length) throw new BrineError("CRYPTICLE_FORMAT", "key string is not 56 bytes");
    this.keyString = keyString;
    this.aesKey = raw.subarray(0, AES_KEY_BYTES);
    this.hmacKey = raw.subarray(AES_KEY_BYTES);
  }

  /** Let go of the OpenSSL contexts (the next message makes new ones; see cipherContextHoldersMax). */
  dropContexts(): void {
    this.encStream = undefined;
    this.decStream = undefined;
  }

  encrypt(plain: Buffer): Buffer {
    const padded = Buffer.allocUnsafe(plain.length + padBytes(plain.length));
    plain.copy(padded);
    return this.seal(padded, plain.length);
  }

  /**
   * IV ‖ AES-CBC(padded) ‖ HMAC. `padded` holds the plaintext in its first `plainBytes` bytes and has room
   * for the padding; it is overwritten. With `framed`, the result is already the msgpack bin holding
   * those bytes (a reply frame: one buffer, no second copy by the encoder).
   */
  private seal(padded: Buffer, plainBytes: number, framed = false): Buffer {
    padded.fill(padded.length - plainBytes, plainBytes);
    const iv = freshIv();
    if (!this.encStream) {
      this.encStream = new CbcStream(this.aesKey, false);
      holdContexts(this);
    }
    const ct = this.encStream.run(padded, iv);
    const sealedBytes = IV_BYTES + ct.length + MAC_BYTES;
    const at = framed ? binHeaderBytes(sealedBytes) : 0;
    const out = Buffer.allocUnsafe(at + sealedBytes);
    if (framed) writeBinHeader(out, 0, sealedBytes);
    iv.copy(out, at);
    ct.copy(out, at + IV_BYTES);
    const body = out.subarray(at, at + IV_BYTES + ct.length);
    createHmac("sha256", this.hmacKey).update(body).digest().copy(out, at + body.length);
    return out;
  }

  /**
   * Whether `data` is a sealed message (IV ‖ whole blocks ‖ HMAC) whose HMAC this key makes: what decrypt()
   * checks before it decrypts, without decrypting (a sealed publish a peer forwarded, src/workers/publisher/).
   */
  authentic(data: Buffer): boolean {
    return this.fault(data) === undefined;
  }

  /** Why `data` is not a sealed message of this key (its shape, or its HMAC), or undefined when it is one. */
  private fault(data: Buffer): "CRYPTICLE_FORMAT" | "CRYPTICLE_AUTH" | undefined {
    if (data.length < IV_BYTES + BLOCK_BYTES + MAC_BYTES || (data.length - IV_BYTES - MAC_BYTES) % BLOCK_BYTES !== 0) return "CRYPTICLE_FORMAT";
    const bodyBytes = data.length - MAC_BYTES;
    return macEqual(data, bodyBytes, createHmac("sha256", this.hmacKey).update(data.subarray(0, bodyBytes)).digest()) ? undefined : "CRYPTICLE_AUTH";
  }

  decrypt(data: Buffer): Buffer {
    const fault = this.fault(data);
    if (fault === "CRYPTICLE_FORMAT") throw new BrineError(fault, `${data.length} bytes`);
    if (fault === "CRYPTICLE_AUTH") throw new BrineError(fault);
    const body = data.subarray(0, data.length - MAC_BYTES);
    if (!this.decStream) {
      this.decStream = new CbcStream(this.aesKey, true);
      holdContexts(this);
    }
    const plain = this.decStream.run(body.subarray(IV_BYTES), body.subarray(0, IV_BYTES));
    // Salt strips as many bytes as the last byte says, with no further check; so do we.
    const pad = plain[plain.length - 1]!;
    return plain.subarray(0, Math.max(0, plain.length - pad));
  }

  /** encrypt(`pickle::` ‖ nonce? ‖ msgpack(obj)); `framed`: as a msgpack bin, ready to send as a reply. */
  dumps(obj: unknown, nonce?: string, framed = false): Buffer {
    if (nonce !== undefined && nonce.length !== NONCE_CHARS) throw new BrineError("CRYPTICLE_NONCE", "nonce must be 32 characters");
    const packed = encodeWire(obj);
    const head = PICKLE_PREFIX.length + (nonce === undefined ? 0 : NONCE_CHARS);
    const plainBytes = head + packed.length;
    const padded = Buffer.allocUnsafe(plainBytes + padBytes(plainBytes));
    PICKLE_PREFIX.copy(padded);
    if (nonce !== undefined) padded.write(nonce, PICKLE_PREFIX.length, "latin1");
    packed.copy(padded, head);
    return this.seal(padded, plainBytes, framed);
  }

  /**
   * Decrypt and decode. Returns {} when the prefix is missing (as Salt does). With `nonce`, the
   * 32 characters after the prefix must equal it. With `checkSerial`, a map carrying `serial` is
   * returned without it only if the serial is newer than the last accepted; otherwise {}.
   */
  loads(data: Buffer, opts: LoadsOptions = {}): WireValue {
    const plain = this.decrypt(data);
    if (!hasPicklePrefix(plain)) return {};
    let body: Buffer = plain.subarray(PICKLE_PREFIX.length);
    if (opts.nonce !== undefined) {
      const got = body.subarray(0, NONCE_CHARS).toString("latin1");
      if (got !== opts.nonce) throw new BrineError("CRYPTICLE_NONCE");
      body = body.subarray(NONCE_CHARS);
    }
    const value = decodeWire(body, opts.limits ?? wireLimits, true, opts.spans, opts.tally); // the plaintext buffer is ours alone
    if (opts.checkSerial && isMap(value) && "serial" in value) {
      const serial = Number(value.serial);
      delete value.serial;
      if (!(serial > this.serial)) return {};
      this.serial = serial;
    }
    return value;
  }
}
