/**
 * eauth tokens (Salt's `salt/tokens/localfs.py`, kept in brine's LMDB instead of `token_dir` files):
 * `mk_token` stores one record per token, `get_token` reads it back and drops it once expired, logout
 * revokes it, and the cleanup pass sweeps expired ones. Stored in the master's LMDB environment
 * (`auth/tokens`), so tokens survive a restart and every request thread sees the same set.
 *
 * A token is 64 hex characters from 32 random bytes (Salt: a hash_type digest of 512 random bytes,
 * hex); its record holds Salt's token data: {token, start, expire, name, eauth, groups?, auth_list?}.
 *
 * Clustered (`track`), every master holds every token (src/shared/sync-records.ts): a token made or
 * revoked here is reported as a record for the peers, and a peer's records are applied with `applyPeer`. A
 * revocation then leaves a tombstone under `x/<token>` ({expire, revoked}) until the token's expiry, so an older
 * copy of the token (a peer's bulk sync) cannot bring it back; the sweep removes it with the expired tokens.
 * Without `track` (a single master) nothing but the tokens themselves is written.
 */
import { randomBytes } from "node:crypto";
import type { Database } from "lmdb";
import type { Store } from "../store/lmdb-env.js";
import { tokenRecordEffect, type TokenRecord } from "../../shared/sync-records.js";

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

/** a revoked token's tombstone (clustered only), kept under `x/<token>` until the token would have expired */
interface Revoked {
  /** the token's expire, seconds since the epoch */
  expire: number;
  /** when it was revoked, ms since the epoch (origin's clock) */
  revoked: number;
}

const REVOKED_PREFIX = "x/";

export class TokenStore {
  private readonly db: Database<TokenData, string>;
  private readonly store: Store;
  private onChange: ((r: TokenRecord) => void) | undefined;

  constructor(store: Store, private readonly nowMs: () => number = Date.now) {
    this.store = store;
    this.db = store.tokens as Database<TokenData, string>;
  }

  /** Report every token made or revoked here (clustered: the peers get them) and keep tombstones. */
  track(onChange: (r: TokenRecord) => void): void {
    this.onChange = onChange;
  }

  async create(data: Omit<TokenData, "token">): Promise<TokenData> {
    const token = randomBytes(32).toString("hex");
    const rec = { ...data, token } as TokenData;
    await this.db.put(token, rec);
    this.onChange?.({ k: "tok", token, t: Math.floor(rec.start * 1000), x: rec.expire, v: rec });
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
    const onChange = this.onChange;
    if (!onChange) return this.db.remove(token);
    const t = this.nowMs();
    const expire = await this.store.root.transaction(() => {
      const rec = this.db.get(token);
      if (!rec || typeof rec !== "object") return undefined;
      const x = typeof rec.expire === "number" && Number.isFinite(rec.expire) ? rec.expire : 0;
      this.db.removeSync(token);
      this.revokedDb.putSync(REVOKED_PREFIX + token, { expire: x, revoked: t });
      return x;
    });
    if (expire === undefined) return false;
    onChange({ k: "tok", token, t, x: expire, v: null });
    return true;
  }

  private get revokedDb(): Database<Revoked, string> {
    return this.db as unknown as Database<Revoked, string>;
  }

  /** Stores a peer's token record by records.ts's rule (check and write in one transaction). True when stored. */
  async applyPeer(r: TokenRecord): Promise<boolean> {
    const nowS = this.nowMs() / 1000;
    return this.store.root.transaction(() => {
      const held = this.db.get(REVOKED_PREFIX + r.token) !== undefined ? "revoked" : this.db.get(r.token) !== undefined ? "live" : undefined;
      const effect = tokenRecordEffect(held, r, nowS);
      if (effect === undefined) return false;
      if (effect === "put") this.db.putSync(r.token, r.v!);
      else {
        this.db.removeSync(r.token);
        this.revokedDb.putSync(REVOKED_PREFIX + r.token, { expire: r.x, revoked: r.t });
      }
      return true;
    });
  }

  /**
   * Token records for keys after `after` (at most `max` keys): one chunk of a bulk sync. Live tokens made and
   * tombstones written at or after `sinceMs`, expired ones left out. `next` is the cursor (undefined at the end).
   */
  dump(after: string | undefined, max: number, sinceMs: number): { records: TokenRecord[]; next: string | undefined } {
    const nowS = this.nowMs() / 1000;
    const records: TokenRecord[] = [];
    let last: string | undefined;
    let n = 0;
    for (const { key, value } of this.db.getRange({ ...(after !== undefined ? { start: after } : {}) })) {
      if (key === after) continue;
      if (n++ === max) return { records, next: last };
      last = key;
      if (!value || typeof value !== "object" || !(typeof value.expire === "number" && value.expire > nowS)) continue;
      if (key.startsWith(REVOKED_PREFIX)) {
        const v = value as unknown as Revoked;
        if (typeof v.revoked === "number" && v.revoked >= sinceMs) records.push({ k: "tok", token: key.slice(REVOKED_PREFIX.length), t: v.revoked, x: v.expire, v: null });
      } else if (typeof value.start === "number" && value.start * 1000 >= sinceMs) {
        records.push({ k: "tok", token: key, t: Math.floor(value.start * 1000), x: value.expire, v: value });
      }
    }
    return { records, next: undefined };
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

  /** the live tokens (not the tombstones) */
  list(): TokenData[] {
    return [...this.db.getRange()].filter((e) => !e.key.startsWith(REVOKED_PREFIX)).map((e) => e.value);
  }
}
