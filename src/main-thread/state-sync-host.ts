/**
 * The main thread's handle on the mirror thread (job-mirror-worker.ts), which stores what peers send (their
 * job events, minion data cache, mine and session key records, presence reports) and reads this master's copy
 * back for a peer's bulk sync. The main thread only moves bytes to and from it.
 *
 * Bounded: what waits in the thread unconfirmed is at most MIRROR_BACKLOG_BYTES_MAX; beyond it, one-way
 * pushes are dropped (counted, logged with a budget) and requests rejected, never buffered elsewhere.
 */
import type { MessagePort, Worker } from "node:worker_threads";
import type { MasterConfig } from "../shared/config/defaults.js";
import { getLogger } from "../shared/log.js";
import type { SyncCursor } from "../workers/state-sync/sync-store.js";
import type { JobMirrorInit, MirrorMessage, MirrorReply } from "../workers/state-sync/worker.js";
import { LogBudget } from "../shared/log-budget.js";
import { spawnThread, threadLogSettings } from "../shared/thread-kit.js";

const log = getLogger("brine.cluster.forward");
/** one line per 10 s for this flood, then a count of what was held back */
const dropLog = new LogBudget(1, 10_000, (line) => log.warning(line), "mirror backlog");

/** bytes of peers' data the mirror thread may hold unconfirmed before more are dropped */
export const MIRROR_BACKLOG_BYTES_MAX = 256 * 1024 * 1024;

type Body = MirrorMessage extends infer M ? (M extends { seq: number } ? Omit<M, "seq"> : never) : never;

export class MirrorThread {
  private readonly worker: Worker;
  private seq = 0;
  private readonly inFlight = new Map<number, { bytes: number; done?: (r: MirrorReply) => void }>();
  /** callers of flushed(), resolved when nothing is in flight */
  private readonly idleWaiters: (() => void)[] = [];
  private backlogBytes = 0;
  dropped = 0;

  /**
   * `stateSync`: the state-sync channels' port (src/main-thread/cluster/state-sync-link.ts holds the other end);
   * `ring`: the shared ring buffer (with `jobs` routed to a ring, peers' job records are not stored here)
   */
  constructor(cfg: MasterConfig, nonces?: SharedArrayBuffer, stateSync?: MessagePort, ring?: SharedArrayBuffer) {
    const init: JobMirrorInit = { cfg, log: threadLogSettings(), ...(nonces ? { nonces } : {}), ...(stateSync ? { stateSync } : {}), ...(ring ? { ring } : {}) };
    // policy: logged (by the kit); in-flight work fails back to its callers (state-sync calls: the link's port closes)
    this.worker = spawnThread({ name: "state-sync", url: new URL("../workers/state-sync/worker.js", import.meta.url), workerData: init, ...(stateSync ? { transferList: [stateSync] } : {}), onError: () => this.failInFlight() });
    this.worker.on("message", (m: MirrorReply) => {
      const f = this.inFlight.get(m.done);
      if (!f) return;
      this.backlogBytes -= f.bytes;
      this.inFlight.delete(m.done);
      if (this.inFlight.size === 0) for (const r of this.idleWaiters.splice(0)) r();
      f.done?.(m);
    });
  }

  private failInFlight(): void {
    for (const [seq, f] of this.inFlight) f.done?.({ done: seq, error: "the mirror thread failed" });
    this.inFlight.clear();
    for (const r of this.idleWaiters.splice(0)) r();
  }

  private post(body: Body, bytes: number, done?: (r: MirrorReply) => void): boolean {
    if (this.backlogBytes + bytes > MIRROR_BACKLOG_BYTES_MAX) {
      this.dropped++;
      dropLog.line(`mirror backlog full: ${this.dropped} batches of peer data not stored`);
      return false;
    }
    const seq = ++this.seq;
    this.inFlight.set(seq, { bytes, ...(done ? { done } : {}) });
    this.backlogBytes += bytes;
    this.worker.postMessage({ seq, ...body } as MirrorMessage);
    return true;
  }

  private ask(body: Body, bytes: number): Promise<MirrorReply> {
    return new Promise((resolve, reject) => {
      if (!this.post(body, bytes, resolve)) reject(new Error("mirror backlog full"));
    });
  }

  /** forwarded job event frames, to mirror into the job cache */
  push(frames: Uint8Array[]): void {
    this.post({ frames }, frames.reduce((n, f) => n + f.byteLength, 0));
  }

  /** a peer's live cache-sync record batches */
  apply(from: string, records: Uint8Array[]): void {
    this.post({ from, records }, records.reduce((n, f) => n + f.byteLength, 0));
  }

  /** a peer's presence report part */
  presence(from: string, bytes: Uint8Array): void {
    this.post({ presence: { from, at: Date.now(), bytes } }, bytes.byteLength);
  }

  /** the reply bytes to a peer's bulk-sync pull request */
  async serve(request: Uint8Array): Promise<Uint8Array> {
    const r = await this.ask({ serve: request }, request.byteLength);
    if (!r.bytes) throw new Error(r.error ?? "no reply from the mirror thread");
    return r.bytes;
  }

  /** stores a pull reply from `from`; the cursor of the next chunk (null: done) */
  async applyChunk(from: string, chunk: Uint8Array): Promise<SyncCursor | null> {
    const r = await this.ask({ from, chunk }, chunk.byteLength);
    if (r.error !== undefined || r.next === undefined) throw new Error(r.error ?? "no cursor from the mirror thread");
    return r.next;
  }

  /** When the newest job in this master's cache was created (ms; undefined: none, or the thread failed). */
  async newestJobMs(): Promise<number | undefined> {
    try {
      return (await this.ask({ newestJob: true }, 0)).ms;
    } catch {
      return undefined;
    }
  }

  /** Resolves when everything pushed so far is stored. */
  async flushed(timeoutMs = 10_000): Promise<void> {
    if (this.inFlight.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise<void>((r) => this.idleWaiters.push(r)), new Promise<void>((r) => (timer = setTimeout(r, timeoutMs)))]);
    clearTimeout(timer);
  }

  async stop(): Promise<void> {
    await this.flushed(2000);
    await this.worker.terminate();
  }
}
