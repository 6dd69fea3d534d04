/**
 * The request worker's side of cache sync: what this thread's writes to the minion data cache, the mine, the
 * session keys, the protocol v3 marks and the eauth tokens (made, revoked) were, collected as records and handed to the main thread
 * with each batch's result (BatchResult.sync), already encoded, so the main thread only sends bytes to the
 * peers (sync-service.ts). Only with `cluster_id`.
 */
import { getLogger } from "./log.js";
import type { MasterContext } from "../workers/req-handler/context.js";
import { clusterNodeIdOf } from "./node-ids.js";
import { isClustered } from "./shared-fs.js";
import { encodeRecords, type SyncRecord } from "./sync-records.js";
import { LogBudget } from "./log-budget.js";

const log = getLogger("brine.cluster.sync");
/** one line per 10 s for this flood, then a count of what was held back */
const dropLog = new LogBudget(1, 10_000, (line) => log.warning(line), "cache-sync outbox");

/** records one worker holds between two batch results before it drops more (a stalled main thread), count */
export const outboxRecordsMax = 100_000;
/** records per encoded batch (a batch is one peer-channel message), count */
export const outboxBatchRecords = 64;
/** an encoded batch above this is split (the peer channel's frame is 8 MiB), bytes */
export const outboxBatchBytesMax = 4 * 1024 * 1024;

export class SyncOutbox {
  private pending: SyncRecord[] = [];
  dropped = 0;

  push(r: SyncRecord): void {
    if (this.pending.length >= outboxRecordsMax) {
      this.dropped++;
      dropLog.line(`cache-sync outbox full: ${this.dropped} record(s) not sent to the peers`);
      return;
    }
    this.pending.push(r);
  }

  /** The encoded batches of everything collected since the last call (undefined: nothing). */
  drain(): Uint8Array[] | undefined {
    if (this.pending.length === 0) return undefined;
    const all = this.pending;
    this.pending = [];
    const out: Uint8Array[] = [];
    for (let i = 0; i < all.length; i += outboxBatchRecords) encodeSplit(all.slice(i, i + outboxBatchRecords), out);
    return out;
  }
}

function encodeSplit(records: SyncRecord[], out: Uint8Array[]): void {
  const b = encodeRecords(records);
  if (b.byteLength <= outboxBatchBytesMax || records.length === 1) {
    out.push(b);
    return;
  }
  const half = Math.ceil(records.length / 2);
  encodeSplit(records.slice(0, half), out);
  encodeSplit(records.slice(half), out);
}

/** Clustered: an outbox collecting this worker context's data cache, mine, session key, v3 mark and token writes. */
export function installSyncOutbox(ctx: MasterContext): SyncOutbox | undefined {
  if (!isClustered(ctx.cfg)) return undefined;
  const outbox = new SyncOutbox();
  // a bank placed on a ring goes to its owners through the hand-off outbox instead (minion-cache.ts)
  ctx.minionCache.track(clusterNodeIdOf(ctx.cfg), (r) => outbox.push(r), (bank) => ctx.clusterMinions?.placed(bank) ?? false);
  ctx.sessions.track((c) => outbox.push({ k: "sess", ...c }));
  ctx.v3Marks.track((id, t) => outbox.push({ k: "v3", id, t }));
  ctx.auth().tokens.track((r) => outbox.push(r));
  return outbox;
}
