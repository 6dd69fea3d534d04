/**
 * The main thread's side of request handling: two Piscina pools (lanes), so that a flood of returns
 * cannot starve `_auth` and an auth storm cannot starve returns. Frames are classified by a fixed byte
 * pattern (a clear envelope starts `enc: "clear"`), not by decoding, batched per lane on the next turn
 * of the event loop, and bounded: beyond `queueLenMax` frames waiting in a lane, a frame gets an
 * immediate "retry later" reply instead of waiting.
 */
import os from "node:os";
import { fileURLToPath } from "node:url";
import { Piscina } from "piscina";
import type { MasterConfig } from "../../config/defaults.js";
import { getLogger, loggingConfig } from "../../log.js";
import type { RunnerLaunch, SharedBuffers } from "../../master/context.js";
import { encodeWire } from "../../protocol/msgpack.js";
import type { BatchResult, CleanupResult, Lane, PresenceResult } from "./task.js";

const log = getLogger("brine.pool");

/** Most frames in one task: Piscina's per-task cost (~20-80 µs) is paid once per batch. */
export const batchFramesMax = 64;
/**
 * Batches each worker runs at once. A batch of returns waits for its LMDB transaction to be on disk, so a
 * worker overlaps several; more in flight leaves it idle less often during a slow fsync but keeps more
 * requests alive across each young-generation GC: in alternated runs on this project's box, 64 cost
 * 5–20 µs more thread CPU per return than 16 and lost 5–30 % of the returns/s (bench/RESULTS.md).
 */
export const concurrentTasksPerWorker = 16;

/** `{"enc":"clear"` as a minion or CLI packs it: fixstr "enc", fixstr "clear". */
const CLEAR_MARK = Buffer.from([0xa3, 0x65, 0x6e, 0x63, 0xa5, 0x63, 0x6c, 0x65, 0x61, 0x72]);
const classifyWindowBytes = 32;

export function classify(frame: Buffer): Lane {
  const head = frame.subarray(0, classifyWindowBytes + CLEAR_MARK.length);
  return head.indexOf(CLEAR_MARK) >= 0 ? "auth" : "req";
}

/** The batch's request sources, only when one of its frames has one (the request port's frames never do). */
function sourcesOf(batch: { source?: string }[]): { sources?: (string | null)[] } {
  return batch.some((p) => p.source !== undefined) ? { sources: batch.map((p) => p.source ?? null) } : {};
}

export interface Pending<T> {
  frame: Buffer;
  tag: T;
  arrival: number;
  /** where the request came from, when the main thread knows (the HTTP API's client address) */
  source?: string;
}

export interface LaneOutput<T> {
  tag: T;
  reply: Buffer;
}

export type BatchSink<T> = (replies: LaneOutput<T>[], events: Uint8Array[], publishes: Record<string, unknown>[], sync?: Uint8Array[], runs?: RunnerLaunch[], verified?: number[], nonces?: Uint8Array) => void;

export { QUEUE_FULL_REPLY, SHUTDOWN_REPLY, STALE_REPLY } from "./replies.js";

class LaneQueue<T> {
  private buf: Pending<T>[] = [];
  private scheduled = false;
  inFlight = 0;

  constructor(
    readonly name: Lane,
    readonly pool: Piscina,
    private readonly queueLenMax: number,
    private readonly staleMs: number,
    private readonly sink: BatchSink<T>,
  ) {}

  get waiting(): number {
    return this.buf.length + this.inFlight;
  }

  push(p: Pending<T>): boolean {
    if (this.waiting >= this.queueLenMax) return false;
    this.buf.push(p);
    if (this.buf.length >= batchFramesMax) this.flush();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
    return true;
  }

  flush(): void {
    this.scheduled = false;
    while (this.buf.length) {
      const batch = this.buf.splice(0, batchFramesMax);
      this.inFlight += batch.length;
      this.pool
        .run({ kind: "batch", frames: batch.map((p) => p.frame), arrivals: batch.map((p) => p.arrival), staleMs: this.staleMs, ...sourcesOf(batch) })
        .then((r: BatchResult) => {
          this.sink(
            batch.map((p, i) => ({ tag: p.tag, reply: Buffer.from(r.replies[i]!.buffer, r.replies[i]!.byteOffset, r.replies[i]!.byteLength) })),
            r.events,
            r.publishes,
            r.sync,
            r.runs,
            r.verified,
            r.nonces,
          );
        })
        .catch((e: Error) => {
          // A worker died or the pool was destroyed: every frame of the batch still gets a reply.
          log.error(`${this.name} lane batch failed: ${e.message}`);
          this.sink(batch.map((p) => ({ tag: p.tag, reply: encodeWire("Some exception handling minion payload") })), [], []);
        })
        .finally(() => {
          this.inFlight -= batch.length;
        });
    }
  }
}

export class RequestLanes<T> {
  private readonly lanes: Record<Lane, LaneQueue<T>>;

  constructor(cfg: MasterConfig, shared: SharedBuffers, sink: BatchSink<T>) {
    const threads = Math.max(1, Number(cfg.worker_threads) || os.availableParallelism());
    const filename = fileURLToPath(new URL("./worker.js", import.meta.url));
    const lc = loggingConfig();
    const workerData = { cfg, shared, log: { level: lc.level, file: lc.file ?? null, fileLevel: lc.fileLevel ?? null } };
    const mk = (name: Lane) =>
      new Piscina({
        filename,
        workerData,
        minThreads: threads,
        maxThreads: threads,
        concurrentTasksPerWorker,
        idleTimeout: Infinity,
        atomics: "disabled",
      });
    const max = Number(cfg.brine_queue_len_max);
    const authStale = Number(cfg.brine_auth_stale_ms);
    this.lanes = { auth: new LaneQueue("auth", mk("auth"), max, authStale, sink), req: new LaneQueue("req", mk("req"), max, 0, sink) };
  }

  /** False when the lane is full; the caller replies QUEUE_FULL_REPLY at once. */
  submit(frame: Buffer, tag: T, source?: string): boolean {
    return this.lanes[classify(frame)].push(source === undefined ? { frame, tag, arrival: Date.now() } : { frame, tag, arrival: Date.now(), source });
  }

  waiting(): number {
    return this.lanes.auth.waiting + this.lanes.req.waiting;
  }

  async cleanup(nowMs: number): Promise<number> {
    const r = (await this.lanes.req.pool.run({ kind: "cleanup", nowMs })) as CleanupResult;
    return r.removed;
  }

  /** Accepted minions with an established publish connection (a request worker reads the data cache). */
  async presentIds(): Promise<string[]> {
    const r = (await this.lanes.req.pool.run({ kind: "presence" })) as PresenceResult;
    return r.present;
  }

  async drain(deadlineMs: number): Promise<void> {
    while (this.waiting() > 0 && Date.now() < deadlineMs) await new Promise((r) => setTimeout(r, 20));
  }

  async destroy(): Promise<void> {
    await Promise.all([this.lanes.auth.pool.destroy(), this.lanes.req.pool.destroy()]);
  }
}
