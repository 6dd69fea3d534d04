/**
 * What masters tell each other about the minion data cache, the mine and per-minion session keys (what Salt
 * shared through a shared `cachedir`: `minions/<id>/data.p`, `minions/<id>/mine.p`, `sessions/<id>`). Pure:
 * the shapes, their validation (a peer's bad record is refused, never stored) and the last-writer-wins order.
 *
 * Every data/mine write carries a stamp (time, origin master); a master keeps a peer's record only when its
 * stamp is newer than the one it holds, so masters converge whatever order records arrive in (a minion
 * refreshing its pillar on master 1 and then on master 2 ends with master 2's copy everywhere). A removal is a
 * record with `v: null` (a tombstone: it keeps its stamp, so an older copy cannot bring the data back).
 * Session keys are merged by their own rule (session-merge.ts): every live key stays usable.
 *
 * The job cache travels in bulk syncs only (live, it travels as forwarded events): a job's load (`job`) and one
 * minion's return to it (`ret`), read from the sender's job cache, which holds only returns a master verified.
 * They need no stamp: a load is kept when none is stored for its jid, a return when none is stored for (jid, id).
 * So do the request nonces a peer remembers (`nonce`): a master that was away learns which frames its peers
 * accepted meanwhile, and refuses them replayed to it.
 *
 * Protocol v3 marks (`v3`, src/lib/store/v3-marks.ts) travel live and in bulk syncs: a minion that signed in with
 * v3 on one master is known as such on every master, so a v2 request forged in its name is refused everywhere.
 * A mark is only ever added while the minion's key lives (each master drops its own with the key), so a record
 * is kept when no mark is held; its time only lets a bulk sync send the marks made since.
 *
 * eauth tokens (`tok`, src/lib/auth/tokens.ts) travel live and in bulk syncs: a token's data when it is made, and a
 * tombstone (`v: null`) when it is revoked, kept until the token's own expiry. A token is made once (32 random
 * bytes) and revoked after, so the order is simply: a tombstone wins over the token's data whatever their times,
 * and nothing comes after it (an older copy of the data, a second tombstone). Expiry needs no record: every
 * master drops a token at the `expire` it carries, and refuses a peer's copy that is past it.
 */
import { cbor } from "./cbor.js";
import { optionBounds } from "./config/options.js";
import type { TokenData } from "../lib/auth/tokens.js";
import { validId, validJid } from "./protocol/ids.js";

/** when a record was written (ms since the epoch, origin's clock) and by which master */
/** The longest token life (the schema's bound of `token_expire`), for checking a peer's token record. */
const tokenExpireSMax = optionBounds("token_expire").max;

export interface Stamp {
  t: number;
  o: string;
}

export interface DataRecord extends Stamp {
  k: "data";
  id: string;
  /** {grains, pillar}, or null: removed */
  v: Record<string, unknown> | null;
}

export interface MineRecord extends Stamp {
  k: "mine";
  id: string;
  /** {function: data}, or null: removed */
  v: Record<string, unknown> | null;
}

export interface SessionRecord {
  k: "sess";
  id: string;
  /** when the key was created (ms since the epoch, origin's clock): its age decides its expiry everywhere */
  t: number;
  key: string;
}

/** a job's load and expected minions, from a peer's job cache (bulk sync only) */
export interface JobRecord {
  k: "job";
  jid: string;
  /** the load as the peer stored it */
  v: Record<string, unknown>;
  /** expected minions */
  m?: string[];
}

/** one minion's return to a job, from a peer's job cache (bulk sync only) */
export interface RetRecord {
  k: "ret";
  jid: string;
  id: string;
  /** the stored return record ({return, retcode, success, …}) */
  v: Record<string, unknown>;
}

/** request nonces a peer's masters accepted (packed, src/shared/nonce-set.ts; bulk sync only) */
export interface NonceRecord {
  k: "nonce";
  b: Uint8Array;
}

/** a minion that signed in with protocol v3 (a v2 request in its name is refused) */
export interface V3MarkRecord {
  k: "v3";
  id: string;
  /** when the mark was made (ms since the epoch, origin's clock) */
  t: number;
}

/** an eauth token: its data when made, null once revoked (a tombstone, kept until `x`) */
export interface TokenRecord {
  k: "tok";
  token: string;
  /** when it was written (ms since the epoch, origin's clock): the token's start, or its revocation */
  t: number;
  /** when the token expires (seconds since the epoch, Salt's `expire`) */
  x: number;
  v: TokenData | null;
}

export type SyncRecord = DataRecord | MineRecord | SessionRecord | JobRecord | RetRecord | NonceRecord | TokenRecord | V3MarkRecord;

/** packed nonces one record holds at most, bytes */
export const nonceRecordBytesMax = 1024 * 1024;

/** expected minions one job record may list, count */
export const jobMinionsMax = 1_000_000;

/** records one batch may hold (a peer sending more is refused) */
export const syncRecordsPerBatchMax = 10_000;
/** how far in the future a peer's stamp may be before the record is refused (a broken clock would pin it), ms */
export const stampFutureMsMax = 24 * 3600 * 1000;
/** longest origin (master id) accepted, characters */
const originCharsMax = 256;
/** a Crypticle key string: base64 of 56 bytes */
const SESSION_KEY_RE = /^[A-Za-z0-9+/]{75}=$/;
/** a token as brine's masters make them: 32 random bytes, hex */
const TOKEN_HEX_RE = /^[0-9a-f]{64}$/;
/** an eauth backend's name */
const EAUTH_NAME_RE = /^[A-Za-z0-9_.-]{1,64}$/;
/** longest user name in a token, characters (a backend is handed at most 4096 bytes) */
const tokenNameCharsMax = 4096;
/** groups one token may list, count, and the longest name, characters */
const tokenGroupsMax = 4096;
const tokenGroupCharsMax = 1024;
/** a token's data encoded (groups and the auth list kept with keep_acl_in_token included), bytes */
export const tokenDataBytesMax = 256 * 1024;

export const syncCbor = cbor;

/** a newer than b: later time, then the larger origin (the same answer on every master) */
export function newerStamp(a: Stamp, b: Stamp | undefined): boolean {
  if (!b) return true;
  return a.t !== b.t ? a.t > b.t : a.o > b.o;
}

function isPlainMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** The record if it is well-formed, else a reason to refuse it. */
export function checkRecord(x: unknown, nowMs: number): SyncRecord | string {
  if (!isPlainMap(x)) return "not a map";
  if (x.k === "job" || x.k === "ret") return checkJobRecord(x);
  if (x.k === "nonce") return x.b instanceof Uint8Array && x.b.byteLength % 8 === 0 && x.b.byteLength <= nonceRecordBytesMax ? { k: "nonce", b: x.b } : "bad nonces";
  if (x.k === "tok") return checkTokenRecord(x, nowMs);
  if (!validId(x.id)) return "bad minion id";
  if (typeof x.t !== "number" || !Number.isSafeInteger(x.t) || x.t < 0) return "bad time";
  if (x.t > nowMs + stampFutureMsMax) return "time too far in the future";
  switch (x.k) {
    case "data":
    case "mine":
      if (typeof x.o !== "string" || x.o.length === 0 || x.o.length > originCharsMax) return "bad origin";
      if (x.v !== null && !isPlainMap(x.v)) return "bad value";
      if (x.k === "data" && x.v !== null && ((x.v.grains !== undefined && !isPlainMap(x.v.grains)) || (x.v.pillar !== undefined && !isPlainMap(x.v.pillar)))) return "bad grains or pillar";
      return { k: x.k, id: x.id, t: x.t, o: x.o, v: x.v as Record<string, unknown> | null };
    case "sess":
      if (typeof x.key !== "string" || !SESSION_KEY_RE.test(x.key)) return "bad session key";
      return { k: "sess", id: x.id, t: x.t, key: x.key };
    case "v3":
      return { k: "v3", id: x.id, t: x.t };
    default:
      return "unknown kind";
  }
}

function checkJobRecord(x: Record<string, unknown>): JobRecord | RetRecord | string {
  if (!validJid(x.jid)) return "bad jid";
  if (!isPlainMap(x.v)) return "bad value";
  if (x.k === "ret") {
    if (!validId(x.id)) return "bad minion id";
    if (!("return" in x.v)) return "return record without a return";
    return { k: "ret", jid: x.jid, id: x.id, v: x.v };
  }
  if (x.m !== undefined && (!Array.isArray(x.m) || x.m.length > jobMinionsMax || !x.m.every(validId))) return "bad minion list";
  return { k: "job", jid: x.jid, v: x.v, ...(x.m !== undefined ? { m: x.m as string[] } : {}) };
}

function checkTokenRecord(x: Record<string, unknown>, nowMs: number): TokenRecord | string {
  // reasons never quote the token: they are logged
  if (typeof x.token !== "string" || !TOKEN_HEX_RE.test(x.token)) return "bad token";
  if (typeof x.t !== "number" || !Number.isSafeInteger(x.t) || x.t < 0) return "bad time";
  if (x.t > nowMs + stampFutureMsMax) return "time too far in the future";
  const expiry = x.x;
  if (typeof expiry !== "number" || !Number.isFinite(expiry) || expiry <= 0 || expiry > (nowMs + stampFutureMsMax) / 1000 + tokenExpireSMax) return "bad token expiry";
  if (x.v === null) return { k: "tok", token: x.token, t: x.t, x: expiry, v: null };
  const v = x.v;
  if (!isPlainMap(v)) return "bad token data";
  if (v.token !== x.token) return "token data for another token";
  const { start, expire, name, eauth, groups, auth_list } = v;
  if (typeof start !== "number" || !Number.isFinite(start) || start < 0 || x.t !== Math.floor(start * 1000)) return "bad token start";
  if (expire !== expiry || expire <= start || expire - start > tokenExpireSMax + 1) return "bad token expire";
  if (typeof name !== "string" || name.length === 0 || name.length > tokenNameCharsMax || name.includes("\0")) return "bad token user";
  if (typeof eauth !== "string" || !EAUTH_NAME_RE.test(eauth)) return "bad token eauth";
  if (groups !== undefined && !(Array.isArray(groups) && groups.length <= tokenGroupsMax && groups.every((g) => typeof g === "string" && g.length <= tokenGroupCharsMax))) return "bad token groups";
  if (auth_list !== undefined && !Array.isArray(auth_list)) return "bad token auth list";
  // only the fields a master writes are kept
  const data: TokenData = { token: x.token, start, expire, name, eauth };
  if (groups !== undefined) data.groups = groups as string[];
  if (auth_list !== undefined) data.auth_list = auth_list;
  try {
    if ((syncCbor.encode(data) as Uint8Array).byteLength > tokenDataBytesMax) return "token data too large";
  } catch {
    return "token data unencodable";
  }
  return { k: "tok", token: x.token, t: x.t, x: expiry, v: data };
}

/** what is held for a token: its data, a tombstone, or nothing */
export type HeldToken = "live" | "revoked" | undefined;

/**
 * What a token record does to what is held for its token (see the header): "put" its data, "revoke" (drop the
 * data, keep a tombstone until `r.x`), or undefined (nothing changes). `nowS`: seconds since the epoch.
 */
export function tokenRecordEffect(held: HeldToken, r: TokenRecord, nowS: number): "put" | "revoke" | undefined {
  if (held === "revoked") return undefined;
  if (r.v === null) return held === "live" || r.x > nowS ? "revoke" : undefined;
  return held === undefined && r.x > nowS ? "put" : undefined;
}

/** One batch of records as bytes (encoded where the records are made: a worker thread, never the main thread). */
export function encodeRecords(records: readonly SyncRecord[]): Uint8Array {
  return syncCbor.encode(records) as Uint8Array;
}

/** Decodes and checks a batch: the good records, and how many were refused with the first reason. */
export function decodeRecords(bytes: Uint8Array, nowMs: number): { records: SyncRecord[]; refused: number; reason?: string } {
  let raw: unknown;
  try {
    raw = syncCbor.decode(bytes);
  } catch (e) {
    return { records: [], refused: 1, reason: `undecodable: ${(e as Error).message}` };
  }
  if (!Array.isArray(raw)) return { records: [], refused: 1, reason: "not a list" };
  if (raw.length > syncRecordsPerBatchMax) return { records: [], refused: raw.length, reason: `${raw.length} records in one batch` };
  const records: SyncRecord[] = [];
  let refused = 0;
  let reason: string | undefined;
  for (const x of raw) {
    const r = checkRecord(x, nowMs);
    if (typeof r === "string") {
      refused++;
      reason ??= r;
    } else records.push(r);
  }
  return { records, refused, ...(reason ? { reason } : {}) };
}
