/**
 * Byte layout of the shared ring buffer (one SharedArrayBuffer per master, created by the main thread, written
 * only by the Raft worker through RingWriter, read by every thread through RingReader).
 *
 *   offset 0     HEADER, 16 x int32: magic, layout version, ringSlots and every limit below (so a reader
 *                rebuilds the layout from the buffer itself and refuses one it does not understand), total
 *                bytes, the writer claim word, and the routes sequence word.
 *   ringsOffset  RING RECORDS, ringsMax of them. Each record is
 *                  [seq: int32, padded to 64 bytes] [copy 0] [copy 1]
 *                and each copy is
 *                  8 x int32: state (0 free, 1 active), epoch lo/hi (uint32 halves of a safe integer),
 *                             node count, replicas, name length, table checksum, reserved
 *                  name bytes      ringNameBytesMax         UTF-8 ring name
 *                  node lengths    ringNodesMax x uint8     UTF-8 length of each node id
 *                  node ids        ringNodesMax x nodeIdBytesMax
 *                  slot owners     ringSlots x uint8        index into the node table, NO_OWNER if none
 *   routesOffset ROUTES, two copies of
 *                  [rows used: int32, padded to 16] dataTypesMax x row
 *                where a row is [state, data type length, ring length, pad: int32] [data type bytes] [ring bytes].
 *                A row is also the drop_stats bucket of its data type; rows are handed out once and kept.
 *   countersOffset DROP COUNTERS, dataTypesMax x [not_a_member, other_ring_member] as int64, never copied:
 *                every thread increments them in place with Atomics.add.
 *
 * Consistency protocol (a "latch", i.e. a seqlock over two copies, one per ring record and one for routes):
 *   writer:  seq += 1 (now odd: readers use copy 1)  -> write copy 0
 *            seq += 1 (now even: readers use copy 0) -> write copy 1
 *   reader:  s = load(seq); read copy (s & 1); if load(seq) != s, retry.
 * The copy a reader is sent to is never the one being written at that moment, so readers do not wait for a
 * writer; they retry only when a write *started* during their read, and give up loudly after
 * ringReadRetriesMax attempts. Every access to the buffer (both sides) is an Atomics operation: they are
 * sequentially consistent in the JS memory model, which is what makes the second seq load a valid check
 * that no write to the copy happened during the read (plain reads could be reordered after it).
 */
import { BrineError } from "../errors.js";

/** Slots per ring. A power of two so that `slot = hash & (ringSlots - 1)`. */
export const ringSlots = 4096;
/** Slot owner value meaning "no owner" (empty ring). Node indexes therefore stay below 255. */
export const NO_OWNER = 0xff;
/** The ring that follows the cluster group's voters (Salt's DEFAULT_RING). */
export const CLUSTER_RING = "cluster";
/** Attempts a reader makes before deciding the writer never lets it finish, then throws RING_TORN_READ. */
export const ringReadRetriesMax = 100_000;

export interface RingLimits {
  /** named rings, "cluster" included, count */
  ringsMax: number;
  /** nodes in one ring, count; at most 64 keeps "removing a node moves only its slots" exact (assign.ts) */
  ringNodesMax: number;
  /** UTF-8 bytes of one node id */
  nodeIdBytesMax: number;
  /** UTF-8 bytes of one ring name */
  ringNameBytesMax: number;
  /** distinct data types ever routed (routes and drop_stats rows), count */
  dataTypesMax: number;
  /** UTF-8 bytes of one data type name */
  dataTypeBytesMax: number;
}

export const DEFAULT_RING_LIMITS: Readonly<RingLimits> = Object.freeze({
  ringsMax: 16,
  ringNodesMax: 64,
  nodeIdBytesMax: 128,
  ringNameBytesMax: 64,
  dataTypesMax: 64,
  dataTypeBytesMax: 64,
});

/** Header word indexes (int32). */
export const H = {
  MAGIC: 0,
  VERSION: 1,
  SLOTS: 2,
  RINGS_MAX: 3,
  NODES_MAX: 4,
  NODE_ID_BYTES: 5,
  RING_NAME_BYTES: 6,
  DATA_TYPES_MAX: 7,
  DATA_TYPE_BYTES: 8,
  TOTAL_BYTES: 9,
  WRITER: 10,
  ROUTES_SEQ: 11,
} as const;
const HEADER_BYTES = 64;
const MAGIC = 0x474e4952; // "RING" little-endian
const LAYOUT_VERSION = 1;

/** Word indexes inside a ring copy (int32, relative to the copy's first word). */
export const C = {
  STATE: 0,
  EPOCH_LO: 1,
  EPOCH_HI: 2,
  NODE_COUNT: 3,
  REPLICAS: 4,
  NAME_LEN: 5,
  CHECKSUM: 6,
} as const;
const COPY_HEADER_BYTES = 32;
export const RING_FREE = 0;
export const RING_ACTIVE = 1;

/** Word indexes inside a route row (int32, relative to the row's first word). */
export const R = { STATE: 0, DT_LEN: 1, RING_LEN: 2 } as const;
const ROW_HEADER_BYTES = 16;
const ROUTES_HEADER_BYTES = 16;
/** Route row states. A row is never returned to FREE once used, so its drop counters stay with its type. */
export const ROUTE_FREE = 0;
export const ROUTE_TO_RING = 1;
/** No route, or a route to None: broadcast. The row keeps the last ring name for drop_stats. */
export const ROUTE_NONE = 2;

const align = (n: number, a: number): number => Math.ceil(n / a) * a;

export interface RingLayout {
  readonly limits: Readonly<RingLimits>;
  readonly totalBytes: number;
  readonly ringsOffset: number;
  readonly ringRecordBytes: number;
  /** bytes of one copy; copy c of ring r starts at ringsOffset + r * ringRecordBytes + 64 + c * copyBytes */
  readonly copyBytes: number;
  /** offsets inside a copy */
  readonly nameOff: number;
  readonly nodeLensOff: number;
  readonly nodeIdsOff: number;
  readonly slotsOff: number;
  readonly routesOffset: number;
  readonly routeCopyBytes: number;
  readonly routeRowBytes: number;
  /** offsets inside a route row */
  readonly rowDataTypeOff: number;
  readonly rowRingOff: number;
  readonly countersOffset: number;
}

function checkLimits(l: RingLimits): void {
  for (const [name, v] of Object.entries(l)) {
    if (!Number.isSafeInteger(v) || v < 1) throw new BrineError("CONFIG_INVALID", `ring limit ${name}=${v}`);
  }
  if (l.ringNodesMax >= NO_OWNER) {
    throw new BrineError("CONFIG_INVALID", `ringNodesMax=${l.ringNodesMax} must stay below ${NO_OWNER}`);
  }
  for (const k of ["nodeIdBytesMax", "ringNameBytesMax", "dataTypeBytesMax"] as const) {
    if (l[k] > 1024) throw new BrineError("CONFIG_INVALID", `ring limit ${k}=${l[k]} exceeds 1024 bytes`);
  }
}

export function resolveRingLimits(partial: Partial<RingLimits> = {}): RingLimits {
  const l: RingLimits = { ...DEFAULT_RING_LIMITS, ...partial };
  checkLimits(l);
  return l;
}

export function computeLayout(limits: RingLimits): RingLayout {
  checkLimits(limits);
  const nameOff = COPY_HEADER_BYTES;
  const nodeLensOff = nameOff + align(limits.ringNameBytesMax, 4);
  const nodeIdsOff = nodeLensOff + align(limits.ringNodesMax, 4);
  const slotsOff = nodeIdsOff + align(limits.ringNodesMax * limits.nodeIdBytesMax, 4);
  const copyBytes = align(slotsOff + ringSlots, 64);
  const ringRecordBytes = 64 + 2 * copyBytes;
  const ringsOffset = HEADER_BYTES;
  const routesOffset = align(ringsOffset + limits.ringsMax * ringRecordBytes, 64);
  const rowDataTypeOff = ROW_HEADER_BYTES;
  const rowRingOff = rowDataTypeOff + align(limits.dataTypeBytesMax, 4);
  const routeRowBytes = rowRingOff + align(limits.ringNameBytesMax, 4);
  const routeCopyBytes = align(ROUTES_HEADER_BYTES + limits.dataTypesMax * routeRowBytes, 64);
  const countersOffset = align(routesOffset + 2 * routeCopyBytes, 64);
  const totalBytes = countersOffset + limits.dataTypesMax * 16;
  return {
    limits: Object.freeze({ ...limits }),
    totalBytes,
    ringsOffset,
    ringRecordBytes,
    copyBytes,
    nameOff,
    nodeLensOff,
    nodeIdsOff,
    slotsOff,
    routesOffset,
    routeCopyBytes,
    routeRowBytes,
    rowDataTypeOff,
    rowRingOff,
    countersOffset,
  };
}

/** Byte offset of ring record `r`'s seq word. */
export function ringSeqByte(layout: RingLayout, r: number): number {
  return layout.ringsOffset + r * layout.ringRecordBytes;
}

/** Byte offset of copy `c` (0 or 1) of ring record `r`. */
export function ringCopyByte(layout: RingLayout, r: number, c: number): number {
  return layout.ringsOffset + r * layout.ringRecordBytes + 64 + c * layout.copyBytes;
}

/** Byte offset of copy `c` of the routes table. */
export function routesCopyByte(layout: RingLayout, c: number): number {
  return layout.routesOffset + c * layout.routeCopyBytes;
}

/** Byte offset of row `row` in the routes copy starting at byte `copyBase`. */
export function routeRowByte(layout: RingLayout, copyBase: number, row: number): number {
  return copyBase + ROUTES_HEADER_BYTES + row * layout.routeRowBytes;
}

/** Index (in a BigInt64Array over the buffer) of data type row `row`'s not_a_member counter; +1 is other_ring_member. */
export function counterIndex(layout: RingLayout, row: number): number {
  return layout.countersOffset / 8 + row * 2;
}

/** Allocates and stamps a zeroed ring buffer. Zero is a valid initial state: every ring free, no routes. */
export function createRingBuffer(partial: Partial<RingLimits> = {}): SharedArrayBuffer {
  const limits = resolveRingLimits(partial);
  const layout = computeLayout(limits);
  const sab = new SharedArrayBuffer(layout.totalBytes);
  const i32 = new Int32Array(sab);
  Atomics.store(i32, H.SLOTS, ringSlots);
  Atomics.store(i32, H.RINGS_MAX, limits.ringsMax);
  Atomics.store(i32, H.NODES_MAX, limits.ringNodesMax);
  Atomics.store(i32, H.NODE_ID_BYTES, limits.nodeIdBytesMax);
  Atomics.store(i32, H.RING_NAME_BYTES, limits.ringNameBytesMax);
  Atomics.store(i32, H.DATA_TYPES_MAX, limits.dataTypesMax);
  Atomics.store(i32, H.DATA_TYPE_BYTES, limits.dataTypeBytesMax);
  Atomics.store(i32, H.TOTAL_BYTES, layout.totalBytes);
  Atomics.store(i32, H.VERSION, LAYOUT_VERSION);
  // Magic last: a buffer is only recognised once its header is complete.
  Atomics.store(i32, H.MAGIC, MAGIC);
  return sab;
}

/** Rebuilds the layout from a buffer's header, refusing anything this code did not create. */
export function readLayout(sab: SharedArrayBuffer): RingLayout {
  if (!(sab instanceof SharedArrayBuffer) || sab.byteLength < HEADER_BYTES) {
    throw new BrineError("RING_LAYOUT_MISMATCH", "not a ring buffer");
  }
  const i32 = new Int32Array(sab, 0, HEADER_BYTES / 4);
  if (Atomics.load(i32, H.MAGIC) !== MAGIC || Atomics.load(i32, H.VERSION) !== LAYOUT_VERSION) {
    throw new BrineError("RING_LAYOUT_MISMATCH", "bad magic or layout version");
  }
  if (Atomics.load(i32, H.SLOTS) !== ringSlots) {
    throw new BrineError("RING_LAYOUT_MISMATCH", `ringSlots ${Atomics.load(i32, H.SLOTS)} != ${ringSlots}`);
  }
  const layout = computeLayout({
    ringsMax: Atomics.load(i32, H.RINGS_MAX),
    ringNodesMax: Atomics.load(i32, H.NODES_MAX),
    nodeIdBytesMax: Atomics.load(i32, H.NODE_ID_BYTES),
    ringNameBytesMax: Atomics.load(i32, H.RING_NAME_BYTES),
    dataTypesMax: Atomics.load(i32, H.DATA_TYPES_MAX),
    dataTypeBytesMax: Atomics.load(i32, H.DATA_TYPE_BYTES),
  });
  if (layout.totalBytes !== Atomics.load(i32, H.TOTAL_BYTES) || layout.totalBytes !== sab.byteLength) {
    throw new BrineError("RING_LAYOUT_MISMATCH", "size does not match the header");
  }
  return layout;
}

const utf8 = new TextEncoder();
const utf8Decoder = new TextDecoder("utf-8", { fatal: true });

/** UTF-8 bytes of `s`, refused (with `code`) when empty or longer than `maxBytes`. */
export function encodeBounded(
  s: string,
  maxBytes: number,
  code: "RING_BAD_NODE_ID" | "RING_BAD_NAME" | "RING_BAD_DATA_TYPE",
): Uint8Array {
  if (typeof s !== "string" || s.length === 0) throw new BrineError(code, "empty");
  const bytes = utf8.encode(s);
  if (bytes.length > maxBytes) throw new BrineError(code, `${bytes.length} bytes > ${maxBytes}`);
  return bytes;
}

/** Writes bytes into the buffer one Atomics.store at a time (see the protocol note above). */
export function storeBytes(u8: Uint8Array, byteOffset: number, bytes: Uint8Array): void {
  for (let i = 0; i < bytes.length; i++) Atomics.store(u8, byteOffset + i, bytes[i]!);
}

/**
 * Reads `len` bytes with Atomics.load and decodes them. Bytes read during a concurrent write may be garbage;
 * callers re-check their seq word and discard the result then, so a decoding failure is reported as `null`
 * (retry) rather than thrown.
 */
export function loadString(u8: Uint8Array, byteOffset: number, len: number, scratch: Uint8Array): string | null {
  if (len < 0 || len > scratch.length) return null;
  for (let i = 0; i < len; i++) scratch[i] = Atomics.load(u8, byteOffset + i);
  try {
    return utf8Decoder.decode(scratch.subarray(0, len));
  } catch {
    return null;
  }
}
