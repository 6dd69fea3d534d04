/**
 * The minion data cache (grains + pillar per minion, for targeting) and mine data.
 *
 * Clustered, every master keeps a full copy (Salt shared `cachedir/minions/<id>/` through a shared cachedir;
 * LMDB never sits on a network filesystem, so brine shares through the cluster, src/workers/state-sync/):
 * each write is stamped (time, origin master) in `minions/stamps` and reported through `track()`, and a
 * peer's record is kept only when its stamp is newer (`applyPeer`, last writer wins). A removal keeps its
 * stamp (a tombstone) so an older copy arriving later cannot bring the data back.
 *
 * With a bank placed on a ring (`grains` or `mine` routed, src/workers/raft/minion-placement.ts), a write is
 * not reported to the peers: it puts the record's key in the hand-off outbox (`jobs/handoff`, `~d/<id>` or
 * `~m/<id>`, written first, in the same commit), and the Raft worker gives the record to the id's owners.
 */
import type { Database } from "lmdb";
import type { Store } from "./lmdb-env.js";
import { newerStamp, type DataRecord, type MineRecord, type Stamp } from "../../shared/sync-records.js";
import { minionOutboxKey, type MinionBank } from "../../shared/minion-placement.js";
import { handoffStamp } from "./job-cache.js";

export interface MinionData {
  grains?: Record<string, unknown>;
  pillar?: Record<string, unknown>;
}

type Bank = MinionBank;
/** `minions/stamps` keys: `d/<id>` (data), `m/<id>` (mine) */
const STAMP_PREFIX: Record<Bank, string> = { data: "d/", mine: "m/" };

export class MinionCache {
  private readonly stamps: Database<[number, string], string>;
  /** the environment it reads (presence.ts reads the job cache's return keys beside it) */
  readonly store: Store;
  private tracking: { origin: string; onChange: (r: DataRecord | MineRecord) => void; placed: (bank: Bank) => boolean } | undefined;

  constructor(
    private readonly s: Store,
    private readonly now: () => number = Date.now,
  ) {
    this.store = s;
    this.stamps = s.stamps;
  }

  /**
   * Stamp every write with `origin` and report it (clustered: the peers get it), unless `placed(bank)`: then
   * the write goes to the hand-off outbox for the id's owners instead.
   */
  track(origin: string, onChange: (r: DataRecord | MineRecord) => void, placed: (bank: Bank) => boolean = () => false): void {
    this.tracking = { origin, onChange, placed };
  }

  get(id: string): MinionData | undefined {
    return this.s.minionData.get(id) as MinionData | undefined;
  }

  async put(id: string, data: MinionData): Promise<void> {
    await this.write("data", id, data as Record<string, unknown>);
  }

  async remove(id: string): Promise<void> {
    await Promise.all([this.write("data", id, null), this.write("mine", id, null)]);
  }

  /** Removes one bank of `id` (stamped like any write: a tombstone the peers keep), for the cache.clear_* runners. */
  async removeBank(bank: Bank, id: string): Promise<void> {
    await this.write(bank, id, null);
  }

  mine(id: string): Record<string, unknown> | undefined {
    return this.s.mine.get(id);
  }

  async setMine(id: string, data: Record<string, unknown>): Promise<void> {
    await this.write("mine", id, data);
  }

  private db(bank: Bank): Database<Record<string, unknown>, string> {
    return (bank === "data" ? this.s.minionData : this.s.mine) as Database<Record<string, unknown>, string>;
  }

  private async write(bank: Bank, id: string, v: Record<string, unknown> | null): Promise<void> {
    if (!this.tracking) {
      await (v === null ? this.db(bank).remove(id) : this.db(bank).put(id, v));
      return;
    }
    const stamp: Stamp = { t: this.now(), o: this.tracking.origin };
    const placed = this.tracking.placed(bank);
    // the outbox key first: lmdb-js commits these puts in order, in one transaction
    const outbox = placed ? [this.s.handoff.put(minionOutboxKey(bank, id), handoffStamp())] : [];
    await Promise.all([...outbox, v === null ? this.db(bank).remove(id) : this.db(bank).put(id, v), this.stamps.put(STAMP_PREFIX[bank] + id, [stamp.t, stamp.o])]);
    if (!placed) this.tracking.onChange({ k: bank, id, t: stamp.t, o: stamp.o, v });
  }

  /** `id`'s record in `bank` with its stamp (a tombstone when only the stamp is left), undefined when there is neither. */
  record(bank: Bank, id: string): DataRecord | MineRecord | undefined {
    const v = (this.db(bank).get(id) as Record<string, unknown> | undefined) ?? null;
    const stamp = this.stampOf(bank, id);
    if (v === null && !stamp) return undefined;
    const { t, o } = stamp ?? { t: 0, o: "" };
    return bank === "data" ? { k: "data", id, t, o, v } : { k: "mine", id, t, o, v };
  }

  /**
   * Inside a write transaction: drops `id`'s record in `bank` and its stamp, if its stamp is still `sent`'s (the
   * hand-off gave that record to its owners; a newer write stays). True when dropped.
   */
  dropSync(bank: Bank, id: string, sent: Stamp): boolean {
    const now = this.stampOf(bank, id);
    if (now ? now.t !== sent.t || now.o !== sent.o : sent.t !== 0) return false;
    this.db(bank).removeSync(id);
    this.stamps.removeSync(STAMP_PREFIX[bank] + id);
    return true;
  }

  /** The stamp of `id`'s record in `bank` (undefined: never stamped, e.g. written before clustering). */
  stampOf(bank: Bank, id: string): Stamp | undefined {
    const s = this.stamps.get(STAMP_PREFIX[bank] + id);
    return Array.isArray(s) && typeof s[0] === "number" && typeof s[1] === "string" ? { t: s[0], o: s[1] } : undefined;
  }

  /**
   * The stamps of `bank`'s records for ids after `after` (at most `max`), tombstones included: one page of a pull
   * (minion-placement.ts `stamps`). A record never stamped (written before clustering) is listed as (0, `origin`).
   */
  stampsPage(bank: Bank, after: string | undefined, max: number, origin: string): { entries: [string, number, string][]; next: string | undefined } {
    const prefix = STAMP_PREFIX[bank];
    const ids = new Set<string>();
    for (const id of this.db(bank).getKeys({ ...(after !== undefined ? { start: after } : {}), limit: max + 1 })) if (id !== after) ids.add(id);
    for (const k of this.stamps.getKeys({ start: prefix + (after ?? ""), end: `${prefix}\uffff`, limit: max + 1 })) {
      const id = k.slice(prefix.length);
      if (id !== after) ids.add(id);
    }
    const chunk = [...ids].sort().slice(0, max);
    return { entries: chunk.map((id) => this.stampEntry(bank, id, origin)!), next: chunk.length === max ? chunk[chunk.length - 1] : undefined };
  }

  /** The stamps of `ids` in `bank` this master holds a record of (tombstones included), as stampsPage lists them. */
  stampsOf(bank: Bank, ids: readonly string[], origin: string): [string, number, string][] {
    const out: [string, number, string][] = [];
    for (const id of ids) {
      const e = this.stampEntry(bank, id, origin);
      if (e) out.push(e);
    }
    return out;
  }

  private stampEntry(bank: Bank, id: string, origin: string): [string, number, string] | undefined {
    const s = this.stampOf(bank, id);
    if (s) return [id, s.t, s.o];
    return this.db(bank).doesExist(id) ? [id, 0, origin] : undefined;
  }

  /** Stores a peer's record if it is newer than ours (one write transaction: check and write together). True when stored. */
  async applyPeer(r: DataRecord | MineRecord): Promise<boolean> {
    const key = STAMP_PREFIX[r.k] + r.id;
    const db = this.db(r.k);
    return this.s.root.transaction(() => {
      if (!newerStamp(r, this.stampOf(r.k, r.id))) return false;
      if (r.v === null) db.removeSync(r.id);
      else db.putSync(r.id, r.v);
      this.stamps.putSync(key, [r.t, r.o]);
      return true;
    });
  }

  /**
   * Records of `bank` for ids after `after` (at most `max` ids), stamped at or after
   * `sinceMs`: one chunk of a bulk sync. Tombstones are included; a record never stamped (written before
   * clustering) goes out as (0, `origin`), older than any stamped write. `next` is the cursor (undefined at the end).
   */
  dump(bank: Bank, after: string | undefined, max: number, sinceMs: number, origin: string): { records: (DataRecord | MineRecord)[]; next: string | undefined } {
    const prefix = STAMP_PREFIX[bank];
    const records: (DataRecord | MineRecord)[] = [];
    const ids = new Set<string>();
    // every id with data, and every stamped id (tombstones have no data)
    for (const id of this.db(bank).getKeys({ ...(after !== undefined ? { start: after } : {}), limit: max + 1 })) {
      if (id !== after) ids.add(id);
    }
    for (const k of this.stamps.getKeys({ start: prefix + (after ?? ""), end: `${prefix}\uffff`, limit: max + 1 })) {
      const id = k.slice(prefix.length);
      if (id !== after) ids.add(id);
    }
    const chunk = [...ids].sort().slice(0, max);
    for (const id of chunk) {
      const stamp = this.stampOf(bank, id) ?? { t: 0, o: origin };
      if (stamp.t < sinceMs) continue;
      const v = (this.db(bank).get(id) as Record<string, unknown> | undefined) ?? null;
      records.push({ k: bank, id, t: stamp.t, o: stamp.o, v });
    }
    return { records, next: chunk.length === max ? chunk[chunk.length - 1] : undefined };
  }
}
