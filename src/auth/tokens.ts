/**
 * eauth tokens (Salt's `salt/tokens/localfs.py`, kept in brine's LMDB instead of `token_dir` files):
 * `mk_token` stores one record per token, `get_token` reads it back and drops it once expired, logout
 * revokes it, and the cleanup pass sweeps expired ones. Stored in the master's LMDB environment
 * (`auth/tokens`), so tokens survive a restart and every request thread sees the same set.
 *
 * A token is 64 hex characters from 32 random bytes (Salt: a hash_type digest of 512 random bytes,
 * hex); its record holds Salt's token data: {token, start, expire, name, eauth, groups?, auth_list?}.
 */
import { randomBytes } from "node:crypto";
import type { Database } from "lmdb";
import { LMDB_CBOR, type Store } from "../store/lmdb-env.js";

export interface TokenData {
  token: string;
  /** seconds since the epoch, as Salt's time.time() */
  start: number;
  expire: number;
  name: string;
  eauth: string;
  groups?: string[];
  auth_list?: unknown[];
  [k: string]: unknown;
}

/** A token as clients send it: hex only, bounded (anything else is refused before any lookup). */
export const TOKEN_RE = /^[0-9a-f]{16,128}$/;
/** Expired tokens removed per cleanup pass. */
export const tokenSweepMax = 10_000;

export class TokenStore {
  private readonly db: Database<TokenData, string>;

  constructor(store: Store, private readonly nowMs: () => number = Date.now) {
    this.db = store.root.openDB<TokenData, string>({ name: "auth/tokens", encoding: LMDB_CBOR });
  }

  async create(data: Omit<TokenData, "token">): Promise<TokenData> {
    const token = randomBytes(32).toString("hex");
    const rec = { ...data, token } as TokenData;
    await this.db.put(token, rec);
    return rec;
  }

  /** The token's data, or undefined when it is unknown, malformed or expired (an expired one is removed). */
  async get(token: unknown): Promise<TokenData | undefined> {
    if (typeof token !== "string" || !TOKEN_RE.test(token)) return undefined;
    const rec = this.db.get(token);
    if (!rec || typeof rec !== "object") return undefined;
    if (!(typeof rec.expire === "number" && rec.expire * 1000 > this.nowMs())) {
      await this.db.remove(token);
      return undefined;
    }
    return rec;
  }

  async remove(token: unknown): Promise<boolean> {
    if (typeof token !== "string" || !TOKEN_RE.test(token)) return false;
    return this.db.remove(token);
  }

  /** Removes expired tokens (at most tokenSweepMax per call); returns how many. */
  async sweep(): Promise<number> {
    const now = this.nowMs() / 1000;
    const dead: string[] = [];
    for (const { key, value } of this.db.getRange()) {
      if (!(typeof value?.expire === "number" && value.expire > now)) dead.push(key);
      if (dead.length >= tokenSweepMax) break;
    }
    for (const k of dead) await this.db.remove(k);
    return dead.length;
  }

  list(): TokenData[] {
    return [...this.db.getRange()].map((e) => e.value);
  }
}
