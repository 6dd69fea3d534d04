/**
 * Peers' presence reports (which minions each master sees connected), kept in this master's LMDB
 * (`minions/presence`) by the mirror thread so every thread can read them: `manage.present` and the CLI's
 * "[Not connected]" use this master's own set united with every peer's recent report.
 *
 * A report is sent in parts of at most presenceIdsPerPartMax ids (`{i, n, ids}`); each part is stored under
 * `<origin>/<i>` with the time it arrived (this master's clock, so the peers' clocks do not matter), and parts
 * at or beyond `n` are deleted (the peer sees fewer minions now). A report older than `maxAgeMs` is ignored:
 * a master that stopped reporting (dead, cut off) no longer vouches for its minions.
 */
import type { Database } from "lmdb";
import { validId } from "../../shared/protocol/ids.js";
import type { Store } from "./lmdb-env.js";
import { syncCbor } from "../../shared/sync-records.js";

/** ids in one presence message, count */
export const presenceIdsPerPartMax = 20_000;
/** parts of one master's report, count (presenceIdsPerPartMax × this bounds a report) */
export const presencePartsMax = 64;

/** What the main thread hands the mirror thread: a peer's message, undecoded. */
export interface PresenceReport {
  from: string;
  /** arrival, ms since the epoch (this master's clock) */
  at: number;
  bytes: Uint8Array;
}

interface StoredPart {
  at: number;
  ids: string[];
}

function openBoard(store: Store): Database<StoredPart, string> {
  return store.presence as Database<StoredPart, string>;
}

/** The parts of a master's connected set, as messages (encoded where the set is known: the main thread). */
export function encodePresence(ids: readonly string[]): Uint8Array[] {
  const n = Math.max(1, Math.min(presencePartsMax, Math.ceil(ids.length / presenceIdsPerPartMax)));
  const out: Uint8Array[] = [];
  for (let i = 0; i < n; i++) out.push(syncCbor.encode({ i, n, ids: ids.slice(i * presenceIdsPerPartMax, (i + 1) * presenceIdsPerPartMax) }) as Uint8Array);
  return out;
}

export class PresenceBoard {
  private readonly db: Database<StoredPart, string>;

  constructor(store: Store) {
    this.db = openBoard(store);
  }

  /** Stores one part of a peer's report; a malformed one is refused (false). */
  async store(r: PresenceReport): Promise<boolean> {
    let m: { i?: unknown; n?: unknown; ids?: unknown };
    try {
      m = syncCbor.decode(r.bytes) as typeof m;
    } catch {
      return false;
    }
    if (m === null || typeof m !== "object") return false;
    const { i, n, ids } = m;
    if (!Number.isSafeInteger(i) || !Number.isSafeInteger(n) || (n as number) < 1 || (n as number) > presencePartsMax || (i as number) < 0 || (i as number) >= (n as number)) return false;
    if (!Array.isArray(ids) || ids.length > presenceIdsPerPartMax) return false;
    const good = ids.filter(validId);
    await this.db.transaction(() => {
      this.db.putSync(`${r.from}/${i}`, { at: r.at, ids: good });
      for (let j = n as number; j < presencePartsMax; j++) this.db.removeSync(`${r.from}/${j}`);
    });
    return true;
  }
}

/** Every id some peer other than `self` reported within `maxAgeMs` of `nowMs`. */
export function peersPresent(store: Store, self: string, nowMs: number, maxAgeMs: number): Set<string> {
  const out = new Set<string>();
  for (const { key, value } of openBoard(store).getRange({})) {
    if (key.startsWith(`${self}/`) || !value || nowMs - value.at > maxAgeMs) continue;
    for (const id of value.ids) out.add(id);
  }
  return out;
}
