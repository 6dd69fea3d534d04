/**
 * The state-sync thread's status file (`<cachedir>/<STATUS_DIR>/<STATUS_FILE>`): for each channel and peer the last
 * transfer, running totals and since when this master is behind that peer. `salt-run cluster.health` and the
 * readiness file read it (src/shared/cluster-health.ts); only the state-sync thread writes it, replaced whole
 * (temporary file, then rename), so a reader never sees half a file. A file that cannot be read starts empty.
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../../shared/log.js";
import type { StateSyncEntry } from "../../shared/cluster-health.js";
import { STATUS_DIR, STATUS_FILE, type PeerReport } from "./messages.js";
import type { Channel } from "./manifest.js";

const log = getLogger("brine.cluster.state-sync");

/** One channel from one peer in the status file (StateSyncEntry), as this thread writes it. */
type StatusEntry = StateSyncEntry & { at: string; errors: number };

export class SyncStatusFile {
  private readonly dir: string;
  private readonly status: Record<string, Record<string, StatusEntry>>;

  constructor(cachedir: string, private readonly now: () => number) {
    this.dir = path.join(cachedir, STATUS_DIR);
    this.status = this.read();
  }

  private read(): Record<string, Record<string, StatusEntry>> {
    try {
      const v = JSON.parse(readFileSync(path.join(this.dir, STATUS_FILE), "utf8")) as unknown;
      return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, Record<string, StatusEntry>>) : {};
    } catch {
      return {};
    }
  }

  /** A transfer of `ch` from `peer` ended with `r`. */
  record(ch: Channel, peer: string, r: PeerReport): void {
    const was = this.status[ch]?.[peer];
    const sum = (k: "items_total" | "bytes_total" | "transfers", add: number) => (typeof was?.[k] === "number" ? was[k]! : 0) + add;
    (this.status[ch] ??= {})[peer] = {
      at: new Date(this.now()).toISOString(),
      items: r.items,
      bytes: r.bytes,
      deleted: r.deleted,
      errors: r.errors.length,
      ...(r.shared ? { shared: true } : {}),
      items_total: sum("items_total", r.items),
      bytes_total: sum("bytes_total", r.bytes),
      transfers: sum("transfers", 1),
      ...(was?.behind_since ? { behind_since: was.behind_since } : {}),
    };
    this.write();
  }

  /** A peer announced key content not here (behind), or a pull from it succeeded (not behind); written when it changes. */
  markBehind(ch: Channel, peer: string, behind: boolean): void {
    const e = this.status[ch]?.[peer];
    if (behind) {
      if (e?.behind_since) return;
      const at = new Date(this.now()).toISOString();
      (this.status[ch] ??= {})[peer] = e ? { ...e, behind_since: at } : { at, items: 0, bytes: 0, deleted: 0, errors: 0, items_total: 0, bytes_total: 0, transfers: 0, behind_since: at };
    } else {
      if (!e?.behind_since) return;
      delete e.behind_since;
    }
    this.write();
  }

  private write(): void {
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      const file = path.join(this.dir, STATUS_FILE);
      const tmp = `${file}.${randomBytes(4).toString("hex")}.tmp`;
      writeFileSync(tmp, JSON.stringify(this.status, null, 1));
      renameSync(tmp, file);
    } catch (e) {
      log.warning(`state-sync: writing ${STATUS_FILE} failed: ${(e as Error).message}`);
    }
  }
}
