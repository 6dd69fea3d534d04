/**
 * A job's records as they travel from the master that took them to the jid's owners (the job hand-off:
 * src/workers/raft/job-placement.ts), or from a removed master's outbox into a live master's
 * (cluster.recover_outbox: src/runners/cluster-recover.ts): read from a job cache, checked when they come from
 * elsewhere, and stored the way an owner stores them (a load it lacks with its list entry, the union of the
 * expected minions, the end time, the nocache mark, the returns it lacks; a nocache job keeps no returns).
 */
import { validId, validJid } from "../../shared/protocol/ids.js";
import { encodeListEntry } from "./job-listing.js";
import type { Store } from "./lmdb-env.js";

/** One jid's records on their way to an owner. */
export interface HandedJob {
  jid: string;
  load?: Record<string, unknown>;
  minions?: string[];
  endtime?: string;
  nocache?: boolean;
  /** [minion id, return record] */
  rets?: [string, Record<string, unknown>][];
}

const NO_OVERWRITE = { noOverwrite: true } as unknown as number;
const isMap = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === "string");

/** Adds `jid`'s job record in `s` (load, expected minions, end time, nocache) to `h`; false when `s` holds none of it. */
export function jobRecord(s: Store, jid: string, h: HandedJob): boolean {
  const load = s.loads.get(jid);
  const minions = s.minions.get(jid);
  const endtime = s.endtimes.get(jid);
  const nocache = s.nocache.get(jid) === true;
  if (load) h.load = load;
  if (Array.isArray(minions)) h.minions = minions;
  if (typeof endtime === "string") h.endtime = endtime;
  if (nocache) h.nocache = true;
  return load !== undefined || minions !== undefined || endtime !== undefined || nocache;
}

/** Adds the return stored under `key` (`<jid>/<minion>`) in `s` to `h`; false when `s` does not hold it. */
export function returnRecord(s: Store, jid: string, key: string, h: HandedJob): boolean {
  const rec = s.returns.get(key);
  if (!rec) return false;
  (h.rets ??= []).push([key.slice(jid.length + 1), rec]);
  return true;
}

/** `raw` as a HandedJob, undefined when any part of it is malformed. */
export function checkHanded(raw: unknown): HandedJob | undefined {
  if (!isMap(raw) || !validJid(raw.jid)) return undefined;
  const h: HandedJob = { jid: raw.jid };
  if (raw.load !== undefined) {
    if (!isMap(raw.load)) return undefined;
    h.load = raw.load;
  }
  if (raw.minions !== undefined) {
    if (!isStrings(raw.minions) || !raw.minions.every(validId)) return undefined;
    h.minions = raw.minions;
  }
  if (raw.endtime !== undefined) {
    if (typeof raw.endtime !== "string" || raw.endtime.length > 64) return undefined;
    h.endtime = raw.endtime;
  }
  if (raw.nocache === true) h.nocache = true;
  if (raw.rets !== undefined) {
    if (!Array.isArray(raw.rets)) return undefined;
    // a stored return holds `return`, or `return_msgpack` (a runner job's, job-cache.ts): handed on as stored
    for (const r of raw.rets) if (!Array.isArray(r) || r.length !== 2 || !validId(r[0]) || !isMap(r[1]) || !("return" in r[1] || r[1].return_msgpack instanceof Uint8Array)) return undefined;
    h.rets = raw.rets as [string, Record<string, unknown>][];
  }
  return h;
}

/** Stores `h` in `s` as an owner does (see the header); the writes are pushed on `writes`. */
export function storeHanded(s: Store, h: HandedJob, writes: Promise<unknown>[]): void {
  // the job's list entry with its load, as the job cache writes them (job-listing.ts)
  if (h.load && !s.loads.doesExist(h.jid)) writes.push(s.loads.put(h.jid, h.load), s.listed.put(h.jid, encodeListEntry(h.jid, h.load)));
  if (h.minions) {
    const have = new Set<string>(s.minions.get(h.jid) ?? []);
    const before = have.size;
    for (const id of h.minions) have.add(id);
    if (have.size !== before || before === 0) writes.push(s.minions.put(h.jid, [...have].sort()));
  }
  if (h.endtime !== undefined) writes.push(s.endtimes.put(h.jid, h.endtime));
  if (h.nocache) writes.push(s.nocache.put(h.jid, true));
  const nocache = h.nocache === true || s.nocache.get(h.jid) === true;
  // a nocache job keeps no returns (as locally): acknowledged all the same, the sender may drop its copy
  if (!nocache) for (const [id, rec] of h.rets ?? []) writes.push(s.returns.put(`${h.jid}/${id}`, rec, NO_OVERWRITE));
}
