/**
 * Wire format of the peer channel. One ZeroMQ message part is one frame; its first byte is the frame type.
 *
 *   clear frames   (handshake, before keys exist):  [type u8][CBOR map]
 *   sealed frames  (AUTH, CONFIRM, DATA):           [type u8][seq u64 BE][XChaCha20-Poly1305 ciphertext + 16-byte tag]
 *
 * The 9-byte header of a sealed frame is the AEAD's associated data, so neither the type nor the counter can
 * be changed without the tag failing. The plaintext of a DATA frame is a CBOR sequence (RFC 8742) of one or
 * more message bodies, each a CBOR array; the writer coalesces what is already queued into one frame
 * (up to batchBytesMax), so a busy peer pays one seal, one socket write and one wake-up per batch:
 *
 *   [0, channel, payload]            one-way message
 *   [1, channel, id, payload]        request (id: the sender's correlation number)
 *   [2, id, payload]                 response to request `id`
 *   [3, id, code, text]              error response to request `id` (the handler threw, or no handler)
 *
 * Every decoder here validates shape and bounds and throws CLUSTER_PEER_FRAME; nothing it returns has an
 * unchecked field.
 */
import { cbor as codec } from "../../../shared/cbor.js";
import { BrineError } from "../../../shared/errors.js";

export const FRAME = Object.freeze({ HELLO: 0x01, WELCOME: 0x02, AUTH: 0x03, CONFIRM: 0x04, DATA: 0x05, REFUSE: 0x06 });
export type FrameType = (typeof FRAME)[keyof typeof FRAME];

/** Version of the handshake and framing; a peer speaking another is refused. */
export const PROTOCOL_VERSION = 1;
/** type byte + 64-bit sequence number */
export const SEALED_HEADER_BYTES = 9;
/** Poly1305 tag */
export const AEAD_TAG_BYTES = 16;
/** Overhead of a DATA frame around its body: header + tag. */
export const DATA_OVERHEAD_BYTES = SEALED_HEADER_BYTES + AEAD_TAG_BYTES;
/** bytes of an X25519 public key and of a handshake nonce */
export const KEY_BYTES = 32;
/** UTF-8 bytes of an error code or text in an error response (longer ones are cut, not refused) */
const errorTextBytesMax = 512;
/** Channel names: printable, safe in logs and metrics labels. */
const CHANNEL_RE = /^[A-Za-z0-9][A-Za-z0-9_.:/-]*$/;

// Maps decode as plain objects, byte strings stay untagged Uint8Arrays (same settings as the Raft entries).
const utf8 = new TextEncoder();

export function frameError(detail: string): BrineError {
  return new BrineError("CLUSTER_PEER_FRAME", detail);
}

/**
 * Channel names already found well-formed, with their UTF-8 length, so that a name is checked once rather
 * than on every message sent and every body received (a handful of names, each on every Raft message). Bounded:
 * past `channelNamesCachedMax` names, a new one is checked each time and not kept.
 */
const checkedChannels = new Map<string, number>();
/** channel names kept as checked, count */
const channelNamesCachedMax = 256;

export function validateChannel(channel: unknown, channelBytesMax: number): string {
  if (typeof channel === "string") {
    let bytes = checkedChannels.get(channel);
    if (bytes === undefined && CHANNEL_RE.test(channel)) {
      bytes = utf8.encode(channel).length;
      if (checkedChannels.size < channelNamesCachedMax) checkedChannels.set(channel, bytes);
    }
    if (bytes !== undefined && bytes <= channelBytesMax) return channel;
  }
  throw new BrineError("CLUSTER_PEER_CHANNEL", `channel ${JSON.stringify(channel)} must match ${CHANNEL_RE.source} and be at most ${channelBytesMax} bytes`);
}

// ---------------------------------------------------------------- clear handshake frames

/** HELLO (initiator → responder) and WELCOME (responder → initiator) carry the same fields. */
export interface HelloFields {
  v: number;
  cluster: string;
  /** the sender's node id */
  from: string;
  /** the node id the sender believes it talks to; null when the initiator dialled an address only */
  to: string | null;
  /** the sender's ephemeral X25519 public key */
  eph: Uint8Array;
  /** 32 random bytes: freshness even if an ephemeral key were ever reused */
  nonce: Uint8Array;
  /**
   * The newer payload forms the sender reads, by channel (`{raft: 2}`); a channel not named is read in its
   * first form only. Absent in the frames of masters before session 18, and when the sender reads no newer form.
   */
  ch?: Readonly<Record<string, number>>;
}

/** channels one HELLO or WELCOME may name in `ch`, count */
const channelVersionsMax = 16;

export function encodeClear(type: typeof FRAME.HELLO | typeof FRAME.WELCOME | typeof FRAME.REFUSE, fields: object): Uint8Array {
  const body = codec.encode(fields) as Uint8Array;
  const out = new Uint8Array(1 + body.length);
  out[0] = type;
  out.set(body, 1);
  return out;
}

function decodeMap(frame: Uint8Array, maxBytes: number): Record<string, unknown> {
  if (frame.length > maxBytes) throw frameError(`handshake frame of ${frame.length} bytes exceeds ${maxBytes}`);
  let v: unknown;
  try {
    v = codec.decode(frame.subarray(1));
  } catch (e) {
    throw frameError(`handshake frame is not CBOR (${(e as Error).message})`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v) || v instanceof Uint8Array) throw frameError("handshake frame is not a map");
  return v as Record<string, unknown>;
}

function own(m: Record<string, unknown>, k: string): unknown {
  return Object.hasOwn(m, k) ? m[k] : undefined;
}

function bytes32(v: unknown, what: string): Uint8Array {
  if (!(v instanceof Uint8Array) || v.length !== KEY_BYTES) throw frameError(`${what} must be ${KEY_BYTES} bytes`);
  return v;
}

function str(v: unknown, what: string, maxBytes: number): string {
  if (typeof v !== "string" || v.length === 0 || utf8.encode(v).length > maxBytes) throw frameError(`${what} must be a string of 1-${maxBytes} bytes`);
  return v;
}

/** Decodes a HELLO or WELCOME; ids are only shape-checked here (the handshake validates them as node ids). */
export function decodeHello(frame: Uint8Array, maxBytes: number): HelloFields {
  const m = decodeMap(frame, maxBytes);
  const v = own(m, "v");
  if (typeof v !== "number" || !Number.isInteger(v)) throw frameError("version missing");
  const to = own(m, "to");
  return {
    v,
    cluster: str(own(m, "cluster"), "cluster", maxBytes),
    from: str(own(m, "from"), "from", maxBytes),
    to: to === null || to === undefined ? null : str(to, "to", maxBytes),
    eph: bytes32(own(m, "eph"), "eph"),
    nonce: bytes32(own(m, "nonce"), "nonce"),
    ch: channelVersions(own(m, "ch"), maxBytes),
  };
}

/** A HELLO's `ch`: channel name → a payload form's version (a positive count); absent is `{}`. */
function channelVersions(v: unknown, maxBytes: number): Record<string, number> {
  if (v === undefined || v === null) return {};
  if (typeof v !== "object" || Array.isArray(v) || v instanceof Uint8Array) throw frameError("ch must be a map");
  const out: Record<string, number> = {};
  const keys = Object.keys(v);
  if (keys.length > channelVersionsMax) throw frameError(`ch names ${keys.length} channels, at most ${channelVersionsMax}`);
  for (const k of keys) {
    const n = (v as Record<string, unknown>)[k];
    let ok = false;
    try {
      validateChannel(k, maxBytes);
      ok = typeof n === "number" && Number.isSafeInteger(n) && n >= 1;
    } catch {
      ok = false;
    }
    if (!ok) throw frameError(`ch: ${JSON.stringify(k).slice(0, 64)} is not a channel with a version`);
    out[k] = n as number;
  }
  return out;
}

/** REFUSE: why a handshake was turned down, as a short reason code (never secret material). */
export function decodeRefuse(frame: Uint8Array, maxBytes: number): string {
  const m = decodeMap(frame, maxBytes);
  const r = own(m, "reason");
  return typeof r === "string" ? r.slice(0, 64) : "unspecified";
}

/** AUTH and CONFIRM plaintext: the sender's signature over the transcript. */
export function encodeProof(sig: Uint8Array): Uint8Array {
  return codec.encode({ sig }) as Uint8Array;
}

export function decodeProof(plain: Uint8Array): Uint8Array {
  let v: unknown;
  try {
    v = codec.decode(plain);
  } catch {
    throw frameError("proof is not CBOR");
  }
  if (v === null || typeof v !== "object") throw frameError("proof is not a map");
  const sig = own(v as Record<string, unknown>, "sig");
  if (!(sig instanceof Uint8Array) || sig.length === 0 || sig.length > 1024) throw frameError("proof has no signature");
  return sig;
}

// ---------------------------------------------------------------- sealed frame header

export function writeSealedHeader(out: Uint8Array, type: FrameType, seq: number): void {
  out[0] = type;
  const dv = new DataView(out.buffer, out.byteOffset, SEALED_HEADER_BYTES);
  dv.setUint32(1, Math.floor(seq / 0x1_0000_0000));
  dv.setUint32(5, seq >>> 0);
}

/** The sequence number of a sealed frame; frames too short to hold a header and a tag are refused. */
export function readSealedSeq(frame: Uint8Array): number {
  if (frame.length < SEALED_HEADER_BYTES + AEAD_TAG_BYTES) throw frameError(`sealed frame of ${frame.length} bytes is too short`);
  const dv = new DataView(frame.buffer, frame.byteOffset, SEALED_HEADER_BYTES);
  const hi = dv.getUint32(1);
  // 2^53: a peer that sends more is lying (sessionMessagesMax recycles sessions far earlier)
  if (hi >= 0x20_0000) throw frameError("sequence number out of range");
  return hi * 0x1_0000_0000 + dv.getUint32(5);
}

// ---------------------------------------------------------------- message bodies (inside DATA)

export const BODY = Object.freeze({ MSG: 0, REQ: 1, RES: 2, ERR: 3 });

export type Body =
  | { kind: typeof BODY.MSG; channel: string; payload: Uint8Array }
  | { kind: typeof BODY.REQ; channel: string; id: number; payload: Uint8Array }
  | { kind: typeof BODY.RES; id: number; payload: Uint8Array }
  | { kind: typeof BODY.ERR; id: number; code: string; text: string };

export function encodeBody(b: Body): Uint8Array {
  switch (b.kind) {
    case BODY.MSG:
      return encodeMessageBody(b.channel, b.payload);
    case BODY.REQ:
      return codec.encode([b.kind, b.channel, b.id, b.payload]) as Uint8Array;
    case BODY.RES:
      return codec.encode([b.kind, b.id, b.payload]) as Uint8Array;
    case BODY.ERR:
      return codec.encode([b.kind, b.id, clip(b.code), clip(b.text)]) as Uint8Array;
  }
}

/**
 * A one-way message's body, `[0, channel, payload]`, written directly: the CBOR head of each item, then the
 * payload's bytes copied once. The same bytes as the codec writes for that array (a test holds them equal);
 * the codec would walk the array and copy the payload through its own buffer, on every message the Raft link
 * sends. The channel name is ASCII (CHANNEL_RE), so its length in bytes is its length.
 */
function encodeMessageBody(channel: string, payload: Uint8Array): Uint8Array {
  const n = payload.length;
  const ch = channel.length;
  // from node's pool of small buffers: a new ArrayBuffer per message costs more than the encoding
  const out = Buffer.allocUnsafe(2 + headBytes(ch) + ch + headBytes(n) + n);
  out[0] = 0x83; // array of 3
  out[1] = BODY.MSG;
  let o = 2;
  o = writeHead(out, o, 0x60, ch); // text string
  for (let i = 0; i < ch; i++) out[o++] = channel.charCodeAt(i);
  o = writeHead(out, o, 0x40, n); // byte string
  out.set(payload, o);
  return out;
}

/** Bytes of the CBOR head of an item of length `n` (below 2^32: frameBytesMax keeps every body far under it). */
function headBytes(n: number): number {
  return n < 24 ? 1 : n < 0x100 ? 2 : n < 0x1_0000 ? 3 : 5;
}

/** Writes a CBOR head of major type `major` (its top three bits) for `n` at `o`; returns where it ends. */
function writeHead(out: Uint8Array, o: number, major: number, n: number): number {
  if (n < 24) {
    out[o] = major | n;
    return o + 1;
  }
  if (n < 0x100) {
    out[o] = major | 24;
    out[o + 1] = n;
    return o + 2;
  }
  if (n < 0x1_0000) {
    out[o] = major | 25;
    out[o + 1] = n >>> 8;
    out[o + 2] = n & 0xff;
    return o + 3;
  }
  out[o] = major | 26;
  out[o + 1] = n >>> 24;
  out[o + 2] = (n >>> 16) & 0xff;
  out[o + 3] = (n >>> 8) & 0xff;
  out[o + 4] = n & 0xff;
  return o + 5;
}

function clip(s: string): string {
  return s.length > errorTextBytesMax / 4 ? s.slice(0, errorTextBytesMax / 4) : s;
}

function reqId(v: unknown): number {
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) throw frameError("request id must be a positive integer");
  return v;
}

/** A byte string as a plain Uint8Array view (cbor-x hands out Buffers in Node; handlers get one type). */
function payloadOf(v: unknown): Uint8Array {
  if (!(v instanceof Uint8Array)) throw frameError("payload must be a byte string");
  return Buffer.isBuffer(v) ? new Uint8Array(v.buffer, v.byteOffset, v.length) : v;
}

/** Concatenates byte strings (a single one is returned as is). `totalBytes`: their summed length, if known. */
export function concatBytes(parts: Uint8Array[], totalBytes?: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(totalBytes ?? parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** One DATA plaintext (a CBOR sequence) from encoded bodies. */
export const joinBodies: (bodies: Uint8Array[], totalBytes: number) => Uint8Array = concatBytes;

/**
 * Every body of a DATA plaintext, all validated before any is returned: a frame with one malformed body
 * is refused whole, so a receiver never acts on half a batch.
 */
export function decodeBodies(plain: Uint8Array, channelBytesMax: number): Body[] {
  let items: unknown[];
  try {
    items = (codec.decodeMultiple(plain) as unknown[] | undefined) ?? [];
  } catch (e) {
    throw frameError(`body is not CBOR (${(e as Error).message})`);
  }
  if (items.length === 0) throw frameError("DATA frame without a body");
  return items.map((v) => checkBody(v, channelBytesMax));
}

/** One body on its own (tests, and plaintexts known to hold a single body). */
export function decodeBody(plain: Uint8Array, channelBytesMax: number): Body {
  let v: unknown;
  try {
    v = codec.decode(plain);
  } catch (e) {
    throw frameError(`body is not CBOR (${(e as Error).message})`);
  }
  return checkBody(v, channelBytesMax);
}

function checkBody(v: unknown, channelBytesMax: number): Body {
  if (!Array.isArray(v)) throw frameError("body is not an array");
  const kind = v[0];
  const channel = (x: unknown): string => {
    try {
      return validateChannel(x, channelBytesMax);
    } catch {
      throw frameError("bad channel name");
    }
  };
  switch (kind) {
    case BODY.MSG:
      if (v.length !== 3) break;
      return { kind, channel: channel(v[1]), payload: payloadOf(v[2]) };
    case BODY.REQ:
      if (v.length !== 4) break;
      return { kind, channel: channel(v[1]), id: reqId(v[2]), payload: payloadOf(v[3]) };
    case BODY.RES:
      if (v.length !== 3) break;
      return { kind, id: reqId(v[1]), payload: payloadOf(v[2]) };
    case BODY.ERR:
      if (v.length !== 4 || typeof v[2] !== "string" || typeof v[3] !== "string") break;
      return { kind, id: reqId(v[1]), code: clip(v[2]), text: clip(v[3]) };
  }
  throw frameError(`body of kind ${JSON.stringify(kind)} with ${v.length} fields`);
}
