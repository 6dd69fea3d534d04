/**
 * The main thread's handle on the two threads that store and move what peers share (one each per clustered master):
 *
 * - the **mirror thread** (src/workers/state-sync/worker.ts): stores what peers send (their job events, minion data
 *   cache, mine and session key records, presence reports) and reads this master's copy back for a peer's bulk sync.
 *   It decodes what it is sent whole, and a forwarded job event may be 64 MiB (frameBytesMax), so its heap is sized for
 *   that (mirrorHeapLimits). The main thread only moves bytes to and from it, in the one port-call style (ToMirror calls
 *   with an id, answered by FromMirror `res`/`err`; src/shared/port-calls.ts). Bounded: what waits in the thread
 *   unconfirmed is at most mirrorBacklogBytesMax; beyond it, one-way pushes are dropped (counted, logged with a budget)
 *   and requests rejected, never buffered elsewhere.
 * - the **state-sync thread** (src/workers/state-sync/engine-worker.ts, with a state-sync port): the state-sync
 *   channels (keys, roots, job-cache banks), whose transfers are bounded by design (pages, chunks, requests in flight),
 *   under a small heap bound (stateSyncHeapLimits) that keeps its memory flat whatever a pull's length.
 *
 * Restarted: a thread that ends unasked (its heap bound reached, ERR_WORKER_OUT_OF_MEMORY, or any other death) is
 * started again after restartDelayMs, doubled at each death up to restartDelayMaxMs (back to the first delay once one
 * has lived restartStableMs), with one log line per death; each thread on its own. The mirror's calls in flight fail
 * (THREAD_GONE) and so do calls while it is down (STATE_SYNC_RESTARTING; pushes are dropped and counted). Each new
 * state-sync thread gets a new state-sync port (`stateSync()`, the link's StateSyncLink.attach), whose calls in flight
 * failed with STATE_SYNC_RESTARTING. What a transfer installed stays (each item renamed into place, each fetched batch
 * recorded in the manifest in one commit, and what was renamed and not yet recorded found by the next scan), so a
 * transfer asked again (the join retries; the key channels are pulled again from every peer that is up) fetches only
 * the rest.
 */
import { type MessagePort, type ResourceLimits, type Worker } from "node:worker_threads";
import type { MasterConfig } from "../shared/config/defaults.js";
import { getLogger } from "../shared/log.js";
import type { SyncCursor } from "../workers/state-sync/sync-store.js";
import type { FromMirror, JobMirrorInit, ToMirror } from "../workers/state-sync/worker.js";
import type { StateSyncInit } from "../workers/state-sync/engine-worker.js";
import { BrineError } from "../shared/errors.js";
import { revivePortError } from "../shared/port-calls.js";
import { LogBudget } from "../shared/log-budget.js";
import { spawnThread, threadLogSettings } from "../shared/thread-kit.js";

const log = getLogger("brine.cluster.forward");
/** one line per 10 s for this flood, then a count of what was held back */
const dropLog = new LogBudget(1, 10_000, (line) => log.warning(line), "mirror backlog");

/** How long a stopping master waits for either thread to close its LMDB handles and exit, ms. */
const closeWaitMs = 5000;

/** bytes of peers' data the mirror thread may hold unconfirmed before more are dropped */
export const mirrorBacklogBytesMax = 256 * 1024 * 1024;

/**
 * The mirror thread's V8 heap bounds (node's Worker resourceLimits), MiB: it decodes each forwarded job event whole (a
 * frame may be 64 MiB, frameBytesMax; a 32 MiB return needs more than a 32 MiB old generation) and each peer's record
 * batch (the peer channel's frame, 8 MiB), so its old generation is far above what it retains (~10 MiB) and above the
 * backlog's bound (those bytes are ArrayBuffers, outside V8's heap): reaching it means a leak. Young generation 3 MiB:
 * semi-spaces of 1 MiB, scavenged often (what it decodes dies young once LMDB has encoded it).
 */
export const mirrorHeapLimits = { maxYoungGenerationSizeMb: 3, maxOldGenerationSizeMb: 512 } as const;

/**
 * The state-sync thread's old generation, MiB: about 2.5× what it retains (~8.5 MiB after a collection, its code,
 * modules and LMDB handles). Shown safe by test/state-sync/large-pull-bounded: pages of the longest paths (cut at
 * pagePathCharsMax), and at once, both ways, a bank of records just under bankItemBytesMax of small maps (what expands
 * most once decoded) and two such roots pulls; 16 and 18 MiB end the thread on that last one. What it leaves of a
 * pull's garbage: V8 collects the old generation about halfway between what is live and the bound, so a long pull's
 * heap plateaus at ~16 MiB where a 1k pull's peaks at ~12 (bench/RESULTS.md, session 12).
 */
export const stateSyncOldGenerationMb = 24;
/**
 * The state-sync thread's V8 heap bounds, MiB. Its transfers are bounded by design (manifest pages of pageItemsMax
 * entries, fetch replies of chunkBytesMax, an inflated reply of at most 8 MiB, requestsInFlightMax requests in flight,
 * pages of at most pagePathCharsMax of paths, a bank item of at most bankItemBytesMax), and nothing of the mirror's
 * (whole job events, record batches) runs there.
 * Under a large bound its heap followed a pull's length though what it retains does not (~11 MiB after a collection at
 * 1k as at 100k items while the mirror ran in it): each page and batch in flight lives across scavenges and is promoted
 * (~350 B an item), and V8
 * starts a mark-compact only at about the live size plus 8 MiB (its minimum growing step), so a pull of 20k items or
 * more reached that plateau and a 1k pull did not (bench/RESULTS.md, sessions 11 and 12). With the old generation
 * bounded near the live size, V8 collects it halfway to the bound instead, at every pull length.
 * - young generation 3 MiB (semi-spaces of 1 MiB, never grown): this thread's per-item garbage dies young;
 * - old generation stateSyncOldGenerationMb (above).
 * Reaching the bound ends the thread (ERR_WORKER_OUT_OF_MEMORY): MirrorThread restarts it with backoff
 * (docs/ARCHITECTURE.md "When a thread fails"), the rest of the master keeps serving.
 */
export const stateSyncHeapLimits = { maxYoungGenerationSizeMb: 3, maxOldGenerationSizeMb: stateSyncOldGenerationMb } as const;

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
  /** the state-sync thread's V8 heap bounds instead of stateSyncHeapLimits (tests scale them down) */
  resourceLimits?: ResourceLimits;
  /** the mirror thread's V8 heap bounds instead of mirrorHeapLimits */
  mirrorResourceLimits?: ResourceLimits;
  /** test hook: the first state-sync thread's engine fills its heap to its bound after installing this many items (StateSyncInit.testOomAfterItems) */
  testOomAfterItems?: number;
}

/** What a HostedThread starts each time: its init data (and what to transfer with it). */
interface Spawn {
  workerData: unknown;
  transferList?: MessagePort[];
}

/**
 * One thread restarted with backoff when it ends unasked, and asked to close (then ended, bounded) when the master
 * stops. `onMessage`/`onGone` are its host's: the answers it posts, and its in-flight work failed back when it ends.
 */
class HostedThread {
  worker: Worker;
  /** the current thread has exited (restarting, or stopped) */
  exited = false;
  private stopping = false;
  private restartTimer: NodeJS.Timeout | undefined;
  /** the current thread's start, the last error it reported */
  private startedAt = 0;
  private lastError: Error | undefined;
  /** the wait the last death got (0: none yet) */
  private delayMs = 0;
  /** threads started after one ended unasked */
  restarts = 0;

  constructor(
    private readonly name: string,
    private readonly url: URL,
    private readonly limits: ResourceLimits,
    private readonly init: (restarts: number) => Spawn,
    private readonly onMessage: (m: unknown) => void,
    private readonly onGone: () => void,
  ) {
    this.worker = this.spawn();
  }

  private spawn(): Worker {
    const s = this.init(this.restarts);
    // policy (docs/ARCHITECTURE.md "When a thread fails"): in-flight work fails back to its callers, the thread is
    // restarted with backoff (onExit); one log line per death, there
    const w = spawnThread({ resourceLimits: this.limits, name: this.name, url: this.url, workerData: s.workerData, ...(s.transferList ? { transferList: s.transferList } : {}), hostLogs: true, onError: (e) => (this.lastError = e), onExit: (code) => this.onExit(w, code) });
    this.exited = false;
    this.startedAt = Date.now();
    this.lastError = undefined;
    w.on("message", (m: unknown) => this.onMessage(m));
    return w;
  }

  private onExit(w: Worker, code: number): void {
    if (w !== this.worker) return;
    this.exited = true;
    this.onGone();
    if (this.stopping) return;
    const lived = Date.now() - this.startedAt;
    this.delayMs = restartWaitMs(this.delayMs, lived);
    const e = this.lastError as (Error & { code?: string }) | undefined;
    const why = e?.code === "ERR_WORKER_OUT_OF_MEMORY" ? `it reached its V8 heap bound (old generation ${this.limits.maxOldGenerationSizeMb ?? "default"} MiB, young ${this.limits.maxYoungGenerationSizeMb ?? "default"} MiB)` : e ? `it failed: ${e.message}` : `it exited with code ${code}`;
    log.error(`the ${this.name} thread ended after ${(lived / 1000).toFixed(1)} s (${why}); its calls in flight failed; restarting it in ${this.delayMs} ms (restart ${this.restarts + 1})`);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (this.stopping) return;
      this.restarts++;
      this.worker = this.spawn();
    }, this.delayMs);
    this.restartTimer.unref();
  }

  /**
   * Asks the thread to close and waits for it to exit by itself (≤ closeWaitMs): terminated from outside, the thread
   * could be stopped inside an LMDB transaction's callback, and lmdb's native side then aborts the whole process
   * (FATAL ERROR: napi_throw). Only a thread that has not exited by then is terminated (logged: that is the risk this
   * avoids). Says which happened ("gone": it had ended before).
   */
  async stop(): Promise<"closed" | "terminated" | "gone"> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    if (this.exited) return "gone";
    const exited = new Promise<void>((r) => this.worker.once("exit", () => r()));
    this.worker.postMessage({ k: "close" });
    let timer: NodeJS.Timeout | undefined;
    const gone = await Promise.race([exited.then(() => true), new Promise<boolean>((r) => (timer = setTimeout(() => r(false), closeWaitMs)))]);
    clearTimeout(timer);
    if (gone) return "closed";
    log.warning(`the ${this.name} thread did not close within ${closeWaitMs} ms; terminating it`);
    await this.worker.terminate();
    return "terminated";
  }
}

/** A call as posted, without its id. */
type Call = ToMirror extends infer M ? (M extends { id: number } ? Omit<M, "id"> : never) : never;
type Answer = Extract<FromMirror, { k: "res" }>["v"];

interface InFlight {
  bytes: number;
  resolve?: (v: Answer) => void;
  reject?: (e: Error) => void;
}

/** The mirror thread and, with a state-sync port factory, the state-sync thread (the header above). */
export class MirrorThread {
  private readonly mirror: HostedThread;
  private readonly engine: HostedThread | undefined;
  private nextId = 0;
  private readonly inFlight = new Map<number, InFlight>();
  /** callers of flushed(), resolved when nothing is in flight */
  private readonly idleWaiters: (() => void)[] = [];
  private backlogBytes = 0;
  dropped = 0;

  /**
   * `stateSync`: a new state-sync port for each state-sync thread started (src/main-thread/cluster/state-sync-link.ts
   * attach holds the other end; without it no state-sync thread runs); `ring`: the shared ring buffer (with `jobs`
   * routed to a ring, peers' job records are not stored here)
   */
  constructor(
    cfg: MasterConfig,
    nonces?: SharedArrayBuffer,
    stateSync?: () => MessagePort,
    ring?: SharedArrayBuffer,
    opts: MirrorThreadOptions = {},
  ) {
    const mirrorInit = (): Spawn => ({ workerData: { cfg, log: threadLogSettings(), ...(nonces ? { nonces } : {}), ...(ring ? { ring } : {}) } satisfies JobMirrorInit });
    this.mirror = new HostedThread("mirror", new URL("../workers/state-sync/worker.js", import.meta.url), opts.mirrorResourceLimits ?? mirrorHeapLimits, mirrorInit, (m) => this.onAnswer(m as FromMirror), () => this.failInFlight());
    if (stateSync) {
      const engineInit = (restarts: number): Spawn => {
        const port = stateSync();
        const test = restarts === 0 && opts.testOomAfterItems !== undefined ? { testOomAfterItems: opts.testOomAfterItems } : {};
        return { workerData: { cfg, log: threadLogSettings(), stateSync: port, ...test } satisfies StateSyncInit, transferList: [port] };
      };
      // the engine answers on its own port (the link's): nothing comes on the thread's, nothing is in flight here
      this.engine = new HostedThread("state-sync", new URL("../workers/state-sync/engine-worker.js", import.meta.url), opts.resourceLimits ?? stateSyncHeapLimits, engineInit, () => undefined, () => undefined);
    }
  }

  /** threads started after one ended unasked (the mirror's and the state-sync thread's) */
  get restarts(): number {
    return this.mirror.restarts + (this.engine?.restarts ?? 0);
  }

  private onAnswer(m: FromMirror): void {
    const f = this.settle(m.id);
    if (m.k === "res") f?.resolve?.(m.v);
    else f?.reject?.(revivePortError(m, "THREAD_CALL"));
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
    const e = new BrineError("THREAD_GONE", "the mirror thread ended");
    for (const id of [...this.inFlight.keys()]) this.settle(id)?.reject?.(e);
  }

  /** Posts `call` unless the backlog is full (then false, counted and logged with a budget). */
  private post(call: Call, bytes: number, f: Omit<InFlight, "bytes"> = {}): boolean {
    if (this.mirror.exited) {
      this.dropped++;
      dropLog.line(`the mirror thread is not running: ${this.dropped} batches of peer data not stored`);
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
    this.mirror.worker.postMessage({ ...call, id } as ToMirror);
    return true;
  }

  private ask(call: Call, bytes: number): Promise<Answer> {
    return new Promise((resolve, reject) => {
      if (!this.post(call, bytes, { resolve, reject })) reject(this.mirror.exited ? new BrineError("STATE_SYNC_RESTARTING") : new BrineError("MIRROR_BACKLOG_FULL"));
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
   * Stores what is in flight (≤ 2 s), then closes both threads (HostedThread.stop: each exits by itself, outside any
   * LMDB transaction, or is terminated after closeWaitMs, logged). Says what happened to the state-sync thread when
   * there is one (the mirror's otherwise).
   */
  async stop(): Promise<"closed" | "terminated" | "gone"> {
    await this.flushed(2000);
    const [m, e] = await Promise.all([this.mirror.stop(), this.engine?.stop()]);
    return e ?? m;
  }
}
