/**
 * The syndic's forward queue: every minion return heard on the lower master's bus waits here, on disk, until a
 * master of masters acknowledged it (its `_syndic_return` reply leaves only once the returns are durable there),
 * so returns survive a lost connection and a syndic restart (Salt keeps them in memory and in a zmq buffer:
 * issues #65516, #60251). An entry is removed only after the acknowledgement; one sent twice is harmless (the
 * master of masters stores and fires a (jid, minion) once, quietly).
 *
 * Bounded: past `max` entries the oldest are dropped, counted and logged once per second, never silently.
 * Its own LMDB environment (`<cachedir>/syndic-queue`), separate from the lower master's.
 */
import { mkdirSync } from "node:fs";
import { open, type RootDatabase } from "lmdb";
import { getLogger } from "../shared/log.js";
import { LMDB_CBOR } from "../lib/store/lmdb-env.js";

const log = getLogger("brine.syndic.queue");

/** One minion's return as it goes up. */
export interface QueuedReturn {
  /** the `master_id` of the publish (which master of masters it goes back to), or null */
  master: string | null;
  jid: string;
  id: string;
  fun: unknown;
  /** `{return, retcode, success, fun_args}` as Salt's syndic forwards them */
  ret: Record<string, unknown>;
  /** the lower master's job load, when known (sent up once per jid) */
  load?: Record<string, unknown>;
}

export class ForwardQueue {
  private readonly root: RootDatabase<QueuedReturn, number>;
  private next: number;
  private count: number;
  private dropped = 0;
  private lastDropLog = 0;

  constructor(
    dir: string,
    private readonly max: number,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.root = open<QueuedReturn, number>({ path: dir, encoding: LMDB_CBOR, mapSize: 2 ** 32, compression: false });
    let last = 0;
    for (const k of this.root.getKeys({ reverse: true, limit: 1 })) last = k;
    this.next = last + 1;
    this.count = this.root.getCount();
  }

  get size(): number {
    return this.count;
  }

  /** Appends (committed asynchronously, in order); drops the oldest past the bound. */
  push(r: QueuedReturn): Promise<unknown> {
    const key = this.next++;
    this.count++;
    const w = this.root.put(key, r);
    if (this.count > this.max) {
      const over = this.count - this.max;
      for (const k of this.root.getKeys({ limit: over })) void this.root.remove(k);
      this.count -= over;
      this.dropped += over;
      const now = Date.now();
      if (now - this.lastDropLog >= 1000) {
        log.warning(`syndic forward queue full (brine_syndic_queue_max ${this.max}): ${this.dropped} oldest return(s) dropped without reaching a master of masters`);
        this.dropped = 0;
        this.lastDropLog = now;
      }
    }
    return w;
  }

  /** The oldest `limit` entries, with their keys. */
  peek(limit: number, skip: ReadonlySet<number> = new Set()): { key: number; value: QueuedReturn }[] {
    const out: { key: number; value: QueuedReturn }[] = [];
    for (const { key, value } of this.root.getRange({})) {
      if (skip.has(key)) continue;
      out.push({ key, value });
      if (out.length >= limit) break;
    }
    return out;
  }

  /** Forgets acknowledged entries. */
  async remove(keys: readonly number[]): Promise<void> {
    let removed = 0;
    await this.root.transaction(() => {
      for (const k of keys) if (this.root.removeSync(k)) removed++;
    });
    this.count -= removed;
  }

  close(): Promise<void> {
    return this.root.close();
  }
}
