/**
 * The main thread's handle on the mirror thread (src/workers/state-sync/worker.ts), which stores what peers send (their
 * job events, minion data cache, mine and session key records, presence reports) and reads this master's copy
 * back for a peer's bulk sync. The main thread only moves bytes to and from it, in the one port-call style
 * (ToMirror calls with an id, answered by FromMirror `res`/`err`; src/shared/port-calls.ts).
 *
 * Bounded: what waits in the thread unconfirmed is at most mirrorBacklogBytesMax; beyond it, one-way
 * pushes are dropped (counted, logged with a budget) and requests rejected, never buffered elsewhere.
 *
 * Restarted: a thread that ends unasked (its heap bound reached, ERR_WORKER_OUT_OF_MEMORY, or any other death) is
 * started again after restartDelayMs, doubled at each death up to restartDelayMaxMs (back to the first delay once one
 * has lived restartStableMs), with one log line per death. Its calls in flight fail (THREAD_GONE) and so do calls
 * while it is down (STATE_SYNC_RESTARTING; pushes are dropped and counted); each new thread gets a new state-sync port
 * (`stateSync()`, the link's StateSyncLink.attach), whose calls in flight failed with STATE_SYNC_RESTARTING. What a
 * transfer installed stays (each item renamed into place, each fetched batch recorded in the manifest in one commit, and
 * what was renamed and not yet recorded found by the next scan), so a transfer asked again (the join retries; the key
 * channels are pulled again from every peer that is up) fetches only the rest.
 */
import { type MessagePort, type ResourceLimits, type Worker } from "node:worker_threads";
import type { MasterConfig } from "../shared/config/defaults.js";
import { getLogger } from "../shared/log.js";
import type { SyncCursor } from "../workers/state-sync/sync-store.js";
import type { FromMirror, JobMirrorInit, ToMirror } from "../workers/state-sync/worker.js";
import { BrineError } from "../shared/errors.js";
import { revivePortError } from "../shared/port-calls.js";
import { LogBudget } from "../shared/log-budget.js";
import { spawnThread, terminateThread, threadLogSettings } from "../shared/thread-kit.js";

const log = getLogger("brine.cluster.forward");
/** one line per 10 s for this flood, then a count of what was held back */
const dropLog = new LogBudget(1, 10_000, (line) => log.warning(line), "mirror backlog");

/** How long a stopping master waits for the state-sync thread to close its manifests and exit, ms. */
const closeWaitMs = 5000;

/** bytes of peers' data the mirror thread may hold unconfirmed before more are dropped */
export const mirrorBacklogBytesMax = 256 * 1024 * 1024;

/**
 * The state-sync thread's V8 heap bounds (node's Worker resourceLimits), MiB. Under V8's defaults its RSS grew with the
 * length of a pull (a 100k-item pull: 3× a 1k one) though what it retains does not (about 12 MiB after a forced
 * collection, at 1k as at 10k items: bench/state-sync.ts): the growth was garbage, mostly in the young generation,
 * whose semi-spaces V8 grows from 1 to 16 MiB under a long run of short-lived allocations (the promises, strings and
 * small buffers of each item).
 * - young generation 3 MiB (semi-spaces of 1 MiB, V8's starting size, never grown): this thread's per-item garbage
 *   dies young, so a small young generation is scavenged often and cheaply (a larger bound changes nothing measurable:
 *   V8 grows the semi-spaces only when much survives, and little does);
 * - old generation 512 MiB: far above what the thread retains (~12 MiB) and above the mirror's backlog bound
 *   (mirrorBacklogBytesMax; those bytes are ArrayBuffers, outside V8's heap), so reaching it means a leak; with a
 *   bound this size V8 also grows the old generation by a factor of about 1.4 between collections instead of 4.
 * What still follows a pull's length is the old generation's garbage up to V8's next mark-compact, which V8 starts at
 * about what is live plus 8 MiB (its minimum growing step; only a bound near the live size moves it, halfway to the
 * bound): the objects of each page and batch in flight live across scavenges and are promoted (~350 B an item, V8's
 * allocation sampling of what survived the young generation, 10k pull), so a pull of 10k items or more reaches that
 * plateau and a 1k pull does not. A bound of ~20 MiB would cap it, but the mirror decodes each forwarded job event
 * whole in this heap: under 24 MiB the thread ends on a single 16 MiB return (8 MiB passes), under 32 MiB on a 32 MiB
 * one, and a frame may be 64 MiB (frameBytesMax). bench/RESULTS.md, session 11. The mirror moved to a thread of its own
 * (512 MiB) and this one bounded at 24 MiB (the least shown safe for the worst pages and bank records at once) was tried
 * in session 12: this thread's heap peaked ~16 MiB at 10k items against ~12 at 1k (no flatter than under 512 MiB at that
 * size) and the process's RssAnon peaked ~20 MiB higher at 1k and 10k (a second isolate, and malloc arenas that grew
 * ~10 MiB during a pull): not kept.
 * Reaching the old generation's bound ends the thread (ERR_WORKER_OUT_OF_MEMORY): MirrorThread restarts it with backoff
 * (docs/ARCHITECTURE.md "When a thread fails"), the rest of the master keeps serving.
 */
export const stateSyncHeapLimits = { maxYoungGenerationSizeMb: 3, maxOldGenerationSizeMb: 512 } as const;

/** The first restart of a thread that ended unasked waits this long, ms. */
export const restartDelayMs = 1000;
/** Each further death doubles the wait, up to this, ms. */
export const restartDelayMaxMs = 60_000;
/** A thread that lived this long before it ended is restarted after restartDelayMs again, ms. */
export const restartStableMs = 5 * 60_000;

/**
 * The restart policy (pure): how long to wait before starting a thread that ended after living `livedMs`, given the
 * wait the last death got (`last`; 0: none yet): restartDelayMs for a first death or after a thread that lived
 * restartStableMs, else twice the last wait, at most restartDelayMaxMs.
 */
export function restartWaitMs(last: number, livedMs: number): number {
  if (last <= 0 || livedMs >= restartStableMs) return restartDelayMs;
  return Math.min(last * 2, restartDelayMaxMs);
}

export interface MirrorThreadOptions {
  /** the thread's V8 heap bounds instead of stateSyncHeapLimits (tests scale them down) */
  resourceLimits?: ResourceLimits;
  /** test hook: the first thread's engine fills its heap to its bound after installing this many items (JobMirrorInit.testOomAfterItems) */
  testOomAfterItems?: number;
}

/** A call as posted, without its id. */
type Call = ToMirror extends infer M ? (M extends { id: number } ? Omit<M, "id"> : never) : never;
type Answer = Extract<FromMirror, { k: "res" }>["v"];

interface InFlight {
  bytes: number;
  resolve?: (v: Answer) => void;
  reject?: (e: Error) => void;
}

export class MirrorThread {
  private worker: Worker;
  private nextId = 0;
  private readonly inFlight = new Map<number, InFlight>();
  /** callers of flushed(), resolved when nothing is in flight */
  private readonly idleWaiters: (() => void)[] = [];
  private backlogBytes = 0;
  /** the current thread has exited (restarting, or stopped) */
  private exited = false;
  private stopping = false;
  private restartTimer: NodeJS.Timeout | undefined;
  /** the current thread's start, the last error it reported, the wait before the next restart */
  private startedAt = 0;
  private lastError: Error | undefined;
  /** the wait the last death got (0: none yet) */
  private delayMs = 0;
  dropped = 0;
  /** threads started after one ended unasked */
  restarts = 0;

  /**
   * `stateSync`: a new state-sync port for each thread started (src/main-thread/cluster/state-sync-link.ts attach holds
   * the other end); `ring`: the shared ring buffer (with `jobs` routed to a ring, peers' job records are not stored here)
   */
  constructor(
    private readonly cfg: MasterConfig,
    private readonly nonces?: SharedArrayBuffer,
    private readonly stateSync?: () => MessagePort,
    private readonly ring?: SharedArrayBuffer,
    private readonly opts: MirrorThreadOptions = {},
  ) {
    this.worker = this.spawn();
  }

  private spawn(): Worker {
    const port = this.stateSync?.();
    const test = this.restarts === 0 && this.opts.testOomAfterItems !== undefined ? { testOomAfterItems: this.opts.testOomAfterItems } : {};
    const init: JobMirrorInit = { cfg: this.cfg, log: threadLogSettings(), ...(this.nonces ? { nonces: this.nonces } : {}), ...(port ? { stateSync: port } : {}), ...(this.ring ? { ring: this.ring } : {}), ...test };
    // policy (docs/ARCHITECTURE.md "When a thread fails"): in-flight work fails back to its callers, the thread is
    // restarted with backoff (onExit); one log line per death, there
    const w = spawnThread({ resourceLimits: this.opts.resourceLimits ?? stateSyncHeapLimits, name: "state-sync", url: new URL("../workers/state-sync/worker.js", import.meta.url), workerData: init, ...(port ? { transferList: [port] } : {}), hostLogs: true, onError: (e) => (this.lastError = e), onExit: (code) => this.onExit(w, code) });
    this.exited = false;
    this.startedAt = Date.now();
    this.lastError = undefined;
    w.on("message", (m: FromMirror) => {
      const f = this.settle(m.id);
      if (m.k === "res") f?.resolve?.(m.v);
      else f?.reject?.(revivePortError(m, "THREAD_CALL"));
    });
    return w;
  }

  private onExit(w: Worker, code: number): void {
    if (w !== this.worker) return;
    this.exited = true;
    this.failInFlight();
    if (this.stopping) return;
    const lived = Date.now() - this.startedAt;
    this.delayMs = restartWaitMs(this.delayMs, lived);
    const e = this.lastError as (Error & { code?: string }) | undefined;
    const limits = this.opts.resourceLimits ?? stateSyncHeapLimits;
    const why = e?.code === "ERR_WORKER_OUT_OF_MEMORY" ? `it reached its V8 heap bound (old generation ${limits.maxOldGenerationSizeMb ?? "default"} MiB, young ${limits.maxYoungGenerationSizeMb ?? "default"} MiB)` : e ? `it failed: ${e.message}` : `it exited with code ${code}`;
    log.error(`the state-sync thread ended after ${(lived / 1000).toFixed(1)} s (${why}); its calls in flight failed; restarting it in ${this.delayMs} ms (restart ${this.restarts + 1})`);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (this.stopping) return;
      this.restarts++;
      this.worker = this.spawn();
    }, this.delayMs);
    this.restartTimer.unref();
  }

  /** Call `id` is answered: its bytes leave the backlog. */
  private settle(id: number): InFlight | undefined {
    const f = this.inFlight.get(id);
    if (!f) return undefined;
    this.backlogBytes -= f.bytes;
    this.inFlight.delete(id);
    if (this.inFlight.size === 0) for (const r of this.idleWaiters.splice(0)) r();
    return f;
  }

  private failInFlight(): void {
    const e = new BrineError("THREAD_GONE", "the state-sync thread ended");
    for (const id of [...this.inFlight.keys()]) this.settle(id)?.reject?.(e);
  }

  /** Posts `call` unless the backlog is full (then false, counted and logged with a budget). */
  private post(call: Call, bytes: number, f: Omit<InFlight, "bytes"> = {}): boolean {
    if (this.exited) {
      this.dropped++;
      dropLog.line(`the state-sync thread is not running: ${this.dropped} batches of peer data not stored`);
      return false;
    }
    if (this.backlogBytes + bytes > mirrorBacklogBytesMax) {
      this.dropped++;
      dropLog.line(`mirror backlog full: ${this.dropped} batches of peer data not stored`);
      return false;
    }
    const id = ++this.nextId;
    this.inFlight.set(id, { bytes, ...f });
    this.backlogBytes += bytes;
    this.worker.postMessage({ ...call, id } as ToMirror);
    return true;
  }

  private ask(call: Call, bytes: number): Promise<Answer> {
    return new Promise((resolve, reject) => {
      if (!this.post(call, bytes, { resolve, reject })) reject(this.exited ? new BrineError("STATE_SYNC_RESTARTING") : new BrineError("MIRROR_BACKLOG_FULL"));
    });
  }

  /** forwarded job event frames, to mirror into the job cache */
  push(frames: Uint8Array[]): void {
    this.post({ k: "jobs", frames }, frames.reduce((n, f) => n + f.byteLength, 0));
  }

  /** a peer's live cache-sync record batches */
  apply(from: string, records: Uint8Array[]): void {
    this.post({ k: "records", from, records }, records.reduce((n, f) => n + f.byteLength, 0));
  }

  /** a peer's presence report part */
  presence(from: string, bytes: Uint8Array): void {
    this.post({ k: "presence", report: { from, at: Date.now(), bytes } }, bytes.byteLength);
  }

  /** the reply bytes to a peer's bulk-sync pull request */
  async serve(request: Uint8Array): Promise<Uint8Array> {
    const v = await this.ask({ k: "serve", request }, request.byteLength);
    if (!(v instanceof Uint8Array)) throw new BrineError("THREAD_CALL", "no reply bytes from the mirror thread");
    return v;
  }

  /** stores a pull reply from `from`; the cursor of the next chunk (null: done) */
  async applyChunk(from: string, chunk: Uint8Array): Promise<SyncCursor | null> {
    return (await this.ask({ k: "chunk", from, chunk }, chunk.byteLength)) as SyncCursor | null;
  }

  /** When the newest job in this master's cache was created (ms; undefined: none, or the thread failed). */
  async newestJobMs(): Promise<number | undefined> {
    try {
      const v = await this.ask({ k: "newestJob" }, 0);
      return typeof v === "number" ? v : undefined;
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

  /**
   * Stored what is in flight (≤ 2 s), then asks the thread to close and waits for it to exit by itself (≤ closeWaitMs):
   * terminated from outside, the thread could be stopped inside an LMDB transaction's callback, and lmdb's native
   * side then aborts the whole process (FATAL ERROR: napi_throw). Only a thread that has not exited by then is
   * terminated (logged: that is the risk this avoids). Says which happened ("gone": it had ended before).
   */
  async stop(): Promise<"closed" | "terminated" | "gone"> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    await this.flushed(2000);
    if (this.exited) return "gone";
    const exited = new Promise<void>((r) => this.worker.once("exit", () => r()));
    this.worker.postMessage({ k: "close" } satisfies ToMirror);
    let timer: NodeJS.Timeout | undefined;
    const gone = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), closeWaitMs)))]);
    clearTimeout(timer);
    if (gone) return "closed";
    log.warning(`the state-sync thread did not close within ${closeWaitMs} ms; terminating it`);
    await terminateThread(this.worker, "state-sync");
    return "terminated";
  }
}
