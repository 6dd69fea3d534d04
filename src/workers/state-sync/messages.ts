/**
 * The state-sync thread's messages and limits (issue 15): its port to the main thread (ToEngine / FromEngine, the
 * one port-call style of src/shared/port-calls.ts), a runner's port to the main thread's link (RunnerAsk / RunnerAnswer), the messages
 * between two masters' engines over the peer channel (PeerMsg, Piece), and the transfer limits engine.ts keeps.
 * Types and constants only: the main thread and the runner thread import this, never engine.ts.
 */
import type { PortError } from "../../shared/port-calls.js";
import type { Channel } from "./manifest.js";

/** Entries in one manifest page, count. */
export const pageItemsMax = 1000;
/**
 * Paths in one manifest page, characters in all (a page ends at the entry that reaches it, or at pageItemsMax): a page of
 * the longest paths (itemPathBytesMax, 4 KiB) would otherwise be ~4 MiB of strings, held on both sides while its items
 * are fetched (and promoted: bench/RESULTS.md, session 12).
 */
export const pagePathCharsMax = 256 * 1024;
/** Bytes in one fetch request's reply (a range of a large item, or a batch of small ones), bytes. */
export const chunkBytesMax = 512 * 1024;
/** Small items in one fetch request, count: what a server answers (a puller asks fetchBatchItems). */
export const batchItemsMax = 256;
/**
 * Entries a puller asks in one manifest page, and small items in one of its fetch requests, count (a server answers up to
 * pageItemsMax and batchItemsMax, as a puller of an earlier version asks). What a page's diff or a batch's install makes
 * is alive from its reply until it is done, and the state-sync thread's young generation is 1 MiB a semi-space
 * (stateSyncHeapLimits): a page or batch that allocates more than that while it is processed has what it made survive two
 * scavenges and promoted to the old generation, garbage there until the next mark-compact (entry-list.ts; bench/RESULTS.md,
 * session 13). A small item installed allocates ~6 KiB (a 256-byte file: its Stats, path, manifest row and LMDB encoding).
 */
export const pullPageItems = 250;
export const fetchBatchItems = 64;
/** Fetch requests in flight per transfer, count. */
export const requestsInFlightMax = 4;
/** A range whose hash does not match is fetched again this many times in all, count. */
export const rangeAttemptsMax = 3;
/** One manifest page or fetch request, ms. */
export const requestTimeoutMs = 30_000;
/** A peer's whole pull of our roots (sync_roots waits this long for each peer), ms. */
export const pullTimeoutMs = 10 * 60_000;
/**
 * A runner's call the state-sync thread did not answer because it ended waits this long for the next thread before the
 * link fails it (StateSyncLink.runnerCall), ms: beyond the host's longest restart delay (60 s).
 */
export const restartWaitForCallMsMax = 90_000;
/** The key channels' coarse timer, ms. */
export const keysTickMs = 2_000;
/** A full rescan of the key directories even if no watcher fired, ms. */
export const keysRescanMs = 30_000;
/** The key channels' digest is announced to every peer at least this often, ms. */
export const announceMs = 15_000;
/** The wire form this engine speaks: 2 = hashes as bytes in pages, whole small items by path (1: hex, ranges only). */
export const wireForm = 2;
/** Paths in one range summary, bytes in all (a manifest whose summary is longer is sent as pages). */
export const summaryPathBytesMax = 1024 * 1024;

export const STATUS_DIR = "brine-state-sync";
export const STATUS_FILE = "status.json";
const PROBE_PREFIX = ".brine-statesync-probe-";

/** The probe file a server writes for one puller and key channel (node ids are file-name safe: validated ids). */
export function probeName(server: string, puller: string, ch: Channel): string {
  return `${PROBE_PREFIX}${server}.${puller}.${ch}`;
}

/** What one transfer (or several channels of it) from one peer did. */
export interface PeerReport {
  items: number;
  bytes: number;
  deleted: number;
  errors: string[];
  ms: number;
  /** channels skipped because both masters see the same key directory */
  shared?: string[];
  /** channels whose transfer stopped before the end (the peer's manifest or a request failed); items may have been refused without this */
  failed?: string[];
}

export type EngineCall = { op: "syncFrom"; peer: string; channels: string[] } | { op: "sync_roots" | "collect"; channels: string[]; async?: boolean };

/**
 * main → state-sync (the link's port), in the one port-call style (src/shared/port-calls.ts): `in` with `req`
 * and `call` are calls the thread answers with FromEngine `res`/`err`; `res`/`err` here answer the thread's `req`.
 */
export type ToEngine =
  | { k: "peers"; up: string[]; known: string[] }
  | { k: "up"; peer: string }
  | { k: "in"; id: number; from: string; p: Uint8Array; req: boolean }
  | { k: "res"; id: number; p: Uint8Array }
  | ({ k: "err"; id: number } & PortError)
  | { k: "call"; id: number; call: EngineCall };

/** state-sync → main: requests to a peer (`req`, answered by ToEngine `res`/`err`), notes, and answers to `in` (bytes) and `call` */
export type FromEngine =
  | { k: "req"; id: number; to: string; p: Uint8Array; ms: number }
  | { k: "send"; to: string; p: Uint8Array }
  | { k: "res"; id: number; v: unknown }
  | ({ k: "err"; id: number } & PortError);

/**
 * runner → state-sync, on a port the runner thread gets from the main thread's link (StateSyncLink.runnerPort), which
 * relays each call to the current thread; answered by RunnerAnswer. `again`: the thread ended during the call and the
 * link asked it once more of the restarted thread (the answer is the second call's).
 */
export interface RunnerAsk {
  k: "call";
  id: number;
  call: EngineCall;
}
export type RunnerAnswer = { k: "res"; id: number; v: unknown; again?: true } | ({ k: "err"; id: number } & PortError);

export type PeerMsg =
  /**
   * `w: 2`: the asker reads the compact forms (entryToWire pages, whole items by path); a page in them says `w: 2`.
   * `r: 1` (first request only): the asker reads a range summary (`{sum: [[first path, sha256 bytes], …]}`,
   * manifest.ts summarize) instead of a first page when the server has many items; it then asks the ranges that
   * differ, `from` (inclusive) `to` (exclusive), in pages. A server of an earlier version ignores `r` and pages.
   * `t: 1` (with `r: 1`): the asker reads a tree of summaries (range-tree.ts): the first has at most 16 ranges, each
   * with its count of entries (`[path, sha256, count]`), and the asker asks a differing stretch's own summary with
   * `sub: 1`, `from`, `to` and the count `c` the server gave it. A server of the previous version ignores `t`.
   * `z: 1` (manifest and get requests): the asker reads deflated replies (wire.ts packReply: `{z: deflate-raw of the
   * reply's CBOR}` when that is smaller); a server of an earlier version ignores it and answers in plain CBOR.
   */
  | { op: "manifest"; ch: string; after?: string; n: number; digest?: string; w?: number; r?: number; t?: number; sub?: number; c?: number; from?: string; to?: string; z?: number }
  /**
   * items by range (`{p, h, off, len}`: the source serves them only while the item still has hash `h`, and the
   * reply's piece carries the range's sha256 `ph`), or whole (the path alone: the puller checks the bytes against
   * the manifest's size and sha256 and fetches a mismatch again by ranges, so the piece carries neither path,
   * offsets nor a hash of its own; this is what keeps a small item's framing small). The reply's pieces are in the
   * request's order.
   */
  | { op: "get"; ch: string; items: ({ p: string; h: string; off: number; len: number } | string)[]; z?: number }
  | { op: "pull"; channels: string[] }
  | { op: "changed"; ch: string; digest: string };

export interface Piece {
  /** absent for a whole item (the reply's pieces are in the request's order) */
  p?: string;
  /** absent for a whole item */
  off?: number;
  data?: Uint8Array;
  ph?: string;
  error?: string;
}
