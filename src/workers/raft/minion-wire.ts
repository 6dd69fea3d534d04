/**
 * The peer channel `raft/minions` shared by the two halves of minion data placement in the Raft worker
 * (minion-placement.ts: the hand-off to owners, the reads and the serving side; minion-broadcast.ts: the way back
 * to broadcast): its name and limits, what both halves are given (MinionPlacementDeps), one request to a peer, and
 * the checks of what a peer answers (a malformed answer is an error, never stored).
 */
import { BrineError } from "../../shared/errors.js";
import { cbor } from "../../shared/cbor.js";
import { validId } from "../../shared/protocol/ids.js";
import type { PlacementTable } from "../../shared/placement.js";
import type { MinionBank, MinionRecord, StampEntry } from "../../shared/minion-placement.js";
import type { Store } from "../../lib/store/lmdb-env.js";
import type { RingCallChannel } from "./ring-forward.js";

export const MINION_PLACEMENT_CHANNEL = "raft/minions";
/** one hand-off request's records at most (the peer channel's frame is 8 MiB), bytes */
export const minionRequestBytesMax = 4 * 1024 * 1024;
/** ids one `records` or `target` request names at most (the asker sends more in several), count */
export const readIdsPerRequestMax = 20_000;
/** one `records` answer's bytes at most: the ids left out are named (`rest`) and asked again, bytes */
export const recordsAnswerBytesMax = 4 * 1024 * 1024;
/** ids one `ids` answer carries at most (~25 bytes each: inside one peer frame), count */
export const idsAnswerMax = 200_000;
/** stamps one `stamps` page carries at most (~40 bytes each: inside one peer frame), count */
export const stampsPageMax = 20_000;

export interface MinionPlacementDeps {
  /** the job cache's environment (minions/data and minions/mine live in it), shared with JobPlacement */
  store: () => Store;
  channel: RingCallChannel;
  self: string;
  timeoutMs: number;
  /** the ring a data type (`grains`, `mine`) is routed to now, null for broadcast */
  route: (dataType: string) => string | null;
  /** this master's own table of `ring` when it hosts it */
  localTable: (ring: string) => PlacementTable | undefined;
  /** the table to place `ring`'s keys with: this master's own, else one fetched from a host (JobPlacement.table) */
  table: (ring: string) => Promise<PlacementTable | undefined>;
  /** every other master of the cluster (reads ask them all) */
  peers: () => string[];
  /** whether the peer channel has a session with `peer` now */
  up: (peer: string) => boolean;
  now?: () => number;
}

/** One `raft/minions` request to `peer`, its answer decoded (a peer's refusal rejects). */
export function askPeer(d: MinionPlacementDeps, peer: string, q: Record<string, unknown>): Promise<unknown> {
  return d.channel.request(peer, MINION_PLACEMENT_CHANNEL, cbor.encode(q) as Uint8Array, d.timeoutMs).then((b) => cbor.decode(b));
}

export const isMap = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);

export function checkRecord(raw: unknown): MinionRecord | undefined {
  if (!isMap(raw) || (raw.k !== "data" && raw.k !== "mine") || !validId(raw.id) || !Number.isFinite(raw.t) || typeof raw.o !== "string" || raw.o.length > 256) return undefined;
  if (raw.v !== null && !isMap(raw.v)) return undefined;
  return { k: raw.k, id: raw.id, t: raw.t as number, o: raw.o, v: raw.v as Record<string, unknown> | null };
}

export function checkRecordsAnswer(raw: unknown, bank: MinionBank): { records: MinionRecord[]; rest: string[] } {
  if (!isMap(raw) || !Array.isArray(raw.records) || !Array.isArray(raw.rest)) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "malformed records answer");
  const records: MinionRecord[] = [];
  for (const r of raw.records) {
    const ok = checkRecord(r);
    if (ok && ok.k === bank) records.push(ok);
  }
  return { records, rest: raw.rest.filter(validId) };
}

export function checkTargetAnswer(raw: unknown): { matched: string[]; held: string[] } {
  if (!isMap(raw) || !Array.isArray(raw.matched) || !Array.isArray(raw.held)) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "malformed target answer");
  return { matched: raw.matched.filter(validId), held: raw.held.filter(validId) };
}

export function checkStampsAnswer(raw: unknown): { entries: StampEntry[]; next?: string } {
  if (!isMap(raw) || !Array.isArray(raw.entries)) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "malformed stamps answer");
  const entries: StampEntry[] = [];
  for (const e of raw.entries) if (Array.isArray(e) && e.length === 3 && validId(e[0]) && Number.isFinite(e[1]) && typeof e[2] === "string" && e[2].length <= 256) entries.push([e[0], e[1] as number, e[2]]);
  if (raw.next !== undefined && !validId(raw.next)) throw new BrineError("MINION_PLACEMENT_BAD_MESSAGE", "stamps page cursor is not a minion id");
  return { entries, ...(raw.next !== undefined ? { next: raw.next as string } : {}) };
}
