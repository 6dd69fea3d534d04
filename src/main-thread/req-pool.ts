/**
 * The main thread's side of request handling: two Piscina pools (lanes), so that a flood of returns
 * cannot starve `_auth` and an auth storm cannot starve returns. Frames are classified by a fixed byte
 * pattern (a clear envelope starts `enc: "clear"`), not by decoding, batched per lane on the next turn
 * of the event loop, and bounded: beyond `queueLenMax` frames waiting in a lane, a frame gets an
 * immediate "retry later" reply instead of waiting. A reply that is ready before the rest of its batch comes
 * in a part on the lane's BroadcastChannel (worker.ts, batch-replies.ts), so one slow request holds no others.
 */
import os from "node:os";
import { fileURLToPath } from "node:url";
import { BroadcastChannel } from "node:worker_threads";
import { Piscina } from "piscina";
import type { MasterConfig } from "../shared/config/defaults.js";
import { readOption } from "../shared/config/options.js";
import { getLogger } from "../shared/log.js";
import type { SharedBuffers } from "../workers/req-handler/context.js";
import { encodeWire } from "../shared/protocol/msgpack.js";
import type { BatchPart, BatchResult, CleanupResult, Lane, PresenceResult, ReadyResult, ReplyMemo } from "../workers/req-handler/task.js";
import { MEMO_FRESH, NONCE_HEX, NonceReplies, type Answered } from "../shared/nonce-replies.js";
import { LogBudget } from "../shared/log-budget.js";
import { OpenBatches } from "./open-batches.js";
import { replyOwedMsMax, requestWorkerHeapMb } from "../workers/req-handler/limits.js";
import { MetricsBoard } from "../shared/metrics/board.js";
import type { BatchOutput } from "./batch-result.js";
import { threadLogSettings } from "../shared/thread-kit.js";
import { DirectPorts } from "./direct-ports.js";

const log = getLogger("brine.pool");
/** refused copies of requests (replays), logged at most 20 a minute */
const replayLog = new LogBudget(20, 60_000, (line) => log.warning(line), "replayed requests refused");

/**
 * Who waits for a first's reply: a copy of a request that came here (where its answer goes, what it was, its
 * refusal if no reply comes), or a peer master asking for a copy that reached it (`answer`: the reply, or none).
 */
type CopyOf<T> = { tag: T; what: string; refusal: Buffer; answer?: undefined } | { answer: (reply: Uint8Array | undefined) => void };

/**
 * Clustered: asks the other masters for the reply to a request (`key`: nonce and tag) this master has a copy of and
 * remembers nothing for (src/main-thread/cluster/resend-replies.ts); resolves to the reply, or undefined.
 */
export type AskPeersForReply = (key: string) => Promise<Uint8Array | undefined>;
/** Most frames in one task: Piscina's per-task cost (~20-80 µs) is paid once per batch. */
export const batchFramesMax = 64;
/**
 * Batches each worker runs at once. A batch of returns waits for its LMDB transaction to be on disk, so a
 * worker overlaps several; more in flight leaves it idle less often during a slow fsync but keeps more
 * requests alive across each young-generation GC: in alternated runs on this project's box, 64 cost
 * 5–20 µs more thread CPU per return than 16 and lost 5–30 % of the returns/s (bench/RESULTS.md).
 */
export const concurrentTasksPerWorker = 16;
/**
 * Batches each worker of a lane runs at once. A sign-in is synchronous RSA work, so a second batch posted to a
 * busy clear-lane worker would only wait in its port: the clear lane posts one batch per worker, and the sign-ins
 * that come while its workers are busy wait here and go together in the next batch, one hop (a task each way,
 * the worker's batch set-up, the result's application) for several sign-ins. A clear request that waits (a
 * publish's durable write, an eauth lookup) gives its worker's slot back after batchHoldMsMax.
 */
export const tasksPerWorker: Record<Lane, number> = { clear: 1, req: concurrentTasksPerWorker };

/** `{"enc":"clear"` as a minion or CLI packs it: fixstr "enc", fixstr "clear". */
const CLEAR_MARK = Buffer.from([0xa3, 0x65, 0x6e, 0x63, 0xa5, 0x63, 0x6c, 0x65, 0x61, 0x72]);
const classifyWindowBytes = 32;

export function classify(frame: Buffer): Lane {
  const head = frame.subarray(0, classifyWindowBytes + CLEAR_MARK.length);
  return head.indexOf(CLEAR_MARK) >= 0 ? "clear" : "req";
}

/** The batch's request sources, only when one of its frames has one (the request port's frames never do). */
function sourcesOf(batch: { source?: string }[]): { sources?: (string | null)[] } {
  return batch.some((p) => p.source !== undefined) ? { sources: batch.map((p) => p.source ?? null) } : {};
}

/** The batch's connections on the conn board, only when one of its frames has one (-1: none; the API's never do). */
function connsOf(batch: { conn?: number }[]): { conns?: number[] } {
  return batch.some((p) => p.conn !== undefined) ? { conns: batch.map((p) => p.conn ?? -1) } : {};
}

export interface Pending<T> {
  frame: Buffer;
  tag: T;
  arrival: number;
  /** where the request came from, when the main thread knows (the HTTP API's client address) */
  source?: string;
  /** the request port's connection it came on (native transport: its routing id, on the conn board) */
  conn?: number;
}

export interface LaneOutput<T> {
  tag: T;
  reply: Buffer;
}

/** Receives every lane result and every part of one (the main thread applies it: batch-result.ts). */
export type BatchSink<T> = (out: BatchOutput<T>) => void;

export { QUEUE_FULL_REPLY, SHUTDOWN_REPLY, STALE_REPLY } from "../workers/req-handler/replies.js";
import { SHUTDOWN_REPLY } from "../workers/req-handler/replies.js";

/** One of a batch's messages once it goes in parts (a BatchPart, or a result with `seq`), as the lane applies it. */
interface Message {
  indices: number[];
  replies: Uint8Array[];
  fx: Omit<BatchResult, "replies" | "streamed" | "seq" | "indices">;
}

/** What a lane asks of its pool: Piscina's `run` (a test gives a pool of its own). */
export type LanePool = Pick<Piscina, "run">;

/** One lane: its queue of frames, its batches in flight and their replies (exported for its tests). */
export class LaneQueue<T> {
  private buf: Pending<T>[] = [];
  private scheduled = false;
  inFlight = 0;
  /** tasks (batches) running in the lane's workers; at most `tasksMax`, the rest of the frames wait in `buf` */
  private tasks = 0;
  private batchSeq = 0;
  /** batches with replies still owed, and which request each reply answers (open-batches.ts) */
  private readonly open = new OpenBatches<T>();
  private sweepTimer: NodeJS.Timeout | undefined;
  /** req lane: the replies of accepted requests, for their copies (src/shared/nonce-replies.ts) */
  private readonly memory = new NonceReplies<CopyOf<T>>();

  constructor(
    readonly name: Lane,
    readonly pool: LanePool,
    private readonly queueLenMax: number,
    private readonly staleMs: number,
    private readonly sink: BatchSink<T>,
    private readonly partChannel: BroadcastChannel,
    /** batches in the lane's workers at once (threads × tasksPerWorker) */
    private readonly tasksMax: number,
  ) {
    partChannel.onmessage = (m: unknown) => this.onPart((m as { data: BatchPart }).data);
  }

  get waiting(): number {
    return this.buf.length + this.inFlight;
  }

  /** callers of whenIdle(), resolved when nothing waits or runs */
  private idleWaiters: (() => void)[] = [];

  private settle(frames: number): void {
    this.inFlight -= frames;
    if (this.waiting === 0) for (const f of this.idleWaiters.splice(0)) f();
  }

  /** Resolves once no frame waits in this lane or is worked on. */
  whenIdle(): Promise<void> {
    return this.waiting === 0 ? Promise.resolve() : new Promise((r) => this.idleWaiters.push(r));
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

  /** A task ended (its result came, or it failed): the frames that waited for its slot go. */
  private taskEnded(): void {
    this.tasks--;
    if (this.buf.length) this.flush();
  }

  flush(): void {
    this.scheduled = false;
    while (this.buf.length && this.tasks < this.tasksMax) {
      const batch = this.buf.splice(0, batchFramesMax);
      const batchNo = ++this.batchSeq;
      this.inFlight += batch.length;
      this.tasks++;
      this.open.add(batchNo, batch.map((p) => p.tag));
      let ended = false;
      const end = () => {
        if (ended) return;
        ended = true;
        this.taskEnded();
      };
      this.pool
        .run({ kind: "batch", batch: batchNo, frames: batch.map((p) => p.frame), arrivals: batch.map((p) => p.arrival), staleMs: this.staleMs, ...sourcesOf(batch), ...(this.staleMs > 0 ? connsOf(batch) : {}) })
        .then((r: BatchResult) => {
          end();
          if (r.seq !== undefined) {
            // one of the batch's messages in parts: applied in order with them (two channels, no order between them)
            if (r.streamed && this.open.release(batchNo, Date.now())) this.sweepSoon();
            this.inOrder(batchNo, r.seq, { indices: r.indices ?? [], replies: r.replies, fx: r });
            return;
          }
          const tags: (T | undefined)[] = this.open.complete(batchNo);
          const replies = r.replies.map((x) => Buffer.from(x.buffer, x.byteOffset, x.byteLength));
          const late = r.memo ? this.memoize(tags, replies, r.memo) : undefined;
          const out: LaneOutput<T>[] = [];
          tags.forEach((tag, i) => tag !== undefined && out.push({ tag, reply: replies[i]! }));
          this.settle(out.length);
          this.sink({ replies: out, events: r.events, publishes: r.publishes, sync: r.sync, runs: r.runs, verified: r.verified, nonces: r.nonces });
          this.answerCopies(late);
        })
        .catch((e: Error) => {
          // A worker died or the pool was destroyed: every frame of the batch not answered yet still gets a reply.
          log.error(`${this.name} lane batch failed: ${e.message}`);
          end();
          const tags = this.open.fail(batchNo);
          this.settle(tags.length);
          this.sink({ replies: tags.map((tag) => ({ tag, reply: encodeWire("Some exception handling minion payload") })), events: [], publishes: [] });
          this.answerCopies(undefined);
        });
    }
  }

  /** Replies of a batch that went before the whole batch was ready (worker.ts), with the effects fired since its last message. */
  private onPart(m: BatchPart): void {
    this.inOrder(m.batch, m.seq, { indices: m.indices, replies: m.replies, fx: m });
  }

  /** Applies message `seq` of `batch` and every one held behind it, in their order (open-batches.ts). */
  private inOrder(batch: number, seq: number, msg: Message): void {
    for (const x of this.open.inOrder(batch, seq, msg)) this.apply(batch, x);
  }

  /** Replies to the frames a message names, and the effects that came with them. */
  private apply(batch: number, { indices, replies, fx }: Message): void {
    const tags = this.open.answer(batch, indices);
    const bytes = replies.map((x) => Buffer.from(x.buffer, x.byteOffset, x.byteLength));
    const late = fx.memo ? this.memoize(tags, bytes, fx.memo) : undefined;
    // (a frame no longer owed was answered with an error already; the effects still go out)
    const out: LaneOutput<T>[] = [];
    tags.forEach((tag, i) => tag !== undefined && out.push({ tag, reply: bytes[i]! }));
    this.settle(out.length);
    this.sink({ replies: out, events: fx.events, publishes: fx.publishes, sync: fx.sync, runs: fx.runs, verified: fx.verified, nonces: fx.nonces });
    this.answerCopies(late);
  }

  /**
   * The reply memory's part in one message (src/shared/nonce-replies.ts): the replies of accepted requests are
   * remembered, and a copy of one gets its reply in place of the worker's placeholder, or is refused as a replay,
   * or (nothing remembered yet: its first may still be in flight) waits, its tag taken out of `tags`. Returns the
   * copies waiting elsewhere that these replies answer: they go after this message's own effects and replies.
   */
  private memoize(tags: (T | undefined)[], replies: Buffer[], memo: ReplyMemo): Answered<CopyOf<T>>[] {
    const now = Date.now();
    let late: Answered<CopyOf<T>>[] = [];
    for (let j = 0; j < memo.at.length; j++) {
      const at = memo.at[j]!;
      const key = memo.keys[j]!;
      if (memo.kinds[j] === MEMO_FRESH) {
        const r = replies[at]!;
        // kept as it is when its buffer holds it alone, else a copy of its own (one small reply keeps no larger buffer alive)
        const own = r.byteOffset === 0 && r.buffer.byteLength === r.byteLength ? r : new Uint8Array(r);
        const answered = this.memory.remember(key, own, now);
        if (answered.length) late = late.concat(answered);
        continue;
      }
      const tag = tags[at];
      if (tag === undefined) continue;
      const what = memo.what[j] ?? "";
      const r = this.memory.recall(key, now);
      if (r.k === "reply") {
        log.debug(`A resent request answered with its first reply, not acted on again: ${what} (nonce ${key.slice(0, NONCE_HEX)})`);
        replies[at] = Buffer.from(r.reply.buffer, r.reply.byteOffset, r.reply.byteLength);
      } else if (r.k === "other") {
        replayLog.line(`Replayed request refused: ${what} reused nonce ${key.slice(0, NONCE_HEX)} in other bytes`);
      } else {
        // this lane's newest batch: the copy's first, if it is in flight here, is in it or an earlier one
        this.memory.wait(key, { tag, what, refusal: replies[at]! }, this.batchSeq);
        tags[at] = undefined;
      }
    }
    return late;
  }

  /**
   * Answers the copies `answered` names, then those no batch left here may hold the first of: clustered, the other
   * masters are asked for their reply (askPeers); else they are refused. A peer's ask gets the reply, or nothing.
   */
  private answerCopies(answered: Answered<CopyOf<T>>[] | undefined): void {
    if (this.memory.waitingCopies === 0 && !answered?.length) return;
    const all = (answered ?? []).concat(this.memory.settleUnknown(this.open.oldest()));
    if (!all.length) return;
    const out: LaneOutput<T>[] = [];
    for (const a of all) {
      const who = a.who;
      if (who.answer) who.answer(a.reply);
      else if (a.reply) out.push({ tag: who.tag, reply: Buffer.from(a.reply.buffer, a.reply.byteOffset, a.reply.byteLength) });
      else if (a.why === "unknown" && this.askPeers) this.fromPeers(a.key, who, this.askPeers);
      else {
        replayLog.line(`Replayed request refused: ${who.what} reused nonce ${a.key.slice(0, NONCE_HEX)} ${a.why === "other" ? "in other bytes" : "that this master remembers no reply for (answered long ago, or before a restart)"}`);
        out.push({ tag: who.tag, reply: who.refusal });
      }
    }
    if (!out.length) return;
    this.settle(out.length);
    this.sink({ replies: out, events: [], publishes: [] });
  }

  /** Clustered: the other masters are asked for a copy's reply; it goes to the copy, or the refusal when none has it. */
  private fromPeers(key: string, who: { tag: T; what: string; refusal: Buffer }, ask: AskPeersForReply): void {
    const done = (reply: Uint8Array | undefined) => {
      if (reply) log.debug(`A resent request answered with the reply another master gave its first, not acted on again: ${who.what} (nonce ${key.slice(0, NONCE_HEX)})`);
      else replayLog.line(`Replayed request refused: ${who.what} reused nonce ${key.slice(0, NONCE_HEX)} that no master of the cluster remembers a reply for (answered long ago, or before a restart)`);
      this.settle(1);
      this.sink({ replies: [{ tag: who.tag, reply: reply ? Buffer.from(reply.buffer, reply.byteOffset, reply.byteLength) : who.refusal }], events: [], publishes: [] });
    };
    ask(key).then(done, () => done(undefined));
  }

  /** Clustered: a peer has a copy of request `key`: the reply this master gave it, waited for while it may be in flight here. */
  recallForPeer(key: string): Promise<Uint8Array | undefined> {
    const r = this.memory.recall(key, Date.now());
    if (r.k === "reply") return Promise.resolve(r.reply);
    if (r.k === "other" || this.open.oldest() === undefined) return Promise.resolve(undefined);
    return new Promise((answer) => this.memory.wait(key, { answer }, this.batchSeq));
  }

  /** Clustered: how this lane asks the other masters for a reply it does not remember (set once the cluster runs). */
  askPeers: AskPeersForReply | undefined;

  /** Replies never heard of (their worker died after their batch's task ended) get an error after replyOwedMsMax. */
  private sweepSoon(): void {
    if (this.sweepTimer) return;
    this.sweepTimer = setTimeout(() => {
      this.sweepTimer = undefined;
      this.answerOwed(encodeWire("Some exception handling minion payload"), Date.now() - replyOwedMsMax);
      if (this.open.released) this.sweepSoon();
    }, 60_000);
    this.sweepTimer.unref();
  }

  /**
   * Answer with `reply` every frame still owed by a batch whose task ended at or before `before` (all of them at
   * shutdown); with no `reply`, forget them unanswered (a stopping master's AES requests: a Salt minion's
   * Crypticle cannot read a clear map, and fails the request at once, where silence makes it send the request
   * again after its timeout, as request-port.ts does with AES requests that arrive while the master stops).
   */
  answerOwed(reply: Buffer | undefined, before = Infinity): void {
    const tags = this.open.expire(before);
    if (before === Infinity) {
      // the master stops: frames still waiting for a task slot are answered too (counted in flight from here)
      const unsent = this.buf.splice(0);
      this.inFlight += unsent.length;
      for (const p of unsent) tags.push(p.tag);
      // copies waiting for a first: the master stops (a peer's ask gets nothing)
      for (const a of this.memory.abandon()) {
        if (a.who.answer) a.who.answer(undefined);
        else tags.push(a.who.tag);
      }
    }
    else this.answerCopies(undefined);
    if (!tags.length) return;
    this.settle(tags.length);
    if (!reply) {
      log.warning(`${this.name} lane: ${tags.length} request(s) left unanswered as the master stops (their minions send them again after their timeout)`);
      return;
    }
    log.warning(`${this.name} lane: ${tags.length} repl${tags.length === 1 ? "y" : "ies"} answered without their request's result`);
    this.sink({ replies: tags.map((tag) => ({ tag, reply })), events: [], publishes: [] });
  }

  close(): void {
    clearTimeout(this.sweepTimer);
    this.partChannel.close();
  }
}

let lanesMade = 0;

/**
 * `worker_threads` is Salt's number of request workers in all (MWorkers, default 5); brine splits it
 * between its two lanes, at least one thread each: sign-ins get half (rounded down), requests the rest.
 */
export function laneThreads(workerThreads: number): Record<Lane, number> {
  const total = Math.max(2, Math.floor(workerThreads));
  const clear = Math.max(1, Math.floor(total / 2));
  return { clear, req: total - clear };
}

export class RequestLanes<T> {
  private readonly lanes: Record<Lane, LaneQueue<T>>;
  private readonly pools: Record<Lane, Piscina>;

  constructor(cfg: MasterConfig, shared: SharedBuffers, sink: BatchSink<T>) {
    const threads = laneThreads(Number(cfg.worker_threads) || os.availableParallelism());
    const filename = fileURLToPath(new URL("../workers/req-handler/worker.js", import.meta.url));
    const workerData = { cfg, shared, log: threadLogSettings() };
    // per lane, the channel its workers post parts of batches on (worker.ts; a name unique in this process)
    const channelName = (name: Lane) => `brine-parts-${process.pid}-${++lanesMade}-${name}`;
    const channels = { clear: new BroadcastChannel(channelName("clear")), req: new BroadcastChannel(channelName("req")) };
    channels.clear.unref();
    channels.req.unref();
    const mk = (name: Lane) => {
      const pool = new Piscina({
        filename,
        workerData: { ...workerData, partChannel: channels[name].name, lane: name },
        // named, not V8's host-dependent default: what a worker's decode budget is sized against (decode-budget.ts)
        resourceLimits: { maxOldGenerationSizeMb: requestWorkerHeapMb },
        minThreads: threads[name],
        maxThreads: threads[name],
        concurrentTasksPerWorker: tasksPerWorker[name],
        idleTimeout: Infinity,
        atomics: "disabled",
        // no run/wait-time histograms: nothing reads them, and each task paid a clock read and two records on the main thread
        recordTiming: false,
      });
      // a worker that fails while it holds no task (at its start, or idle) is an 'error' event on the pool:
      // unheard, it would end the master; Piscina starts a new worker in its place
      pool.on("error", (e: Error) => log.error(`${name} lane worker failed: ${e.stack ?? e.message}`));
      return pool;
    };
    // checked here too for configurations built in code (a NaN bound would make the lane unbounded)
    const max = readOption(cfg, "brine_queue_len_max");
    const authStale = readOption(cfg, "brine_auth_stale_ms");
    this.pools = { clear: mk("clear"), req: mk("req") };
    // the clear lane's batches on each worker's own port (direct-ports.ts), attached in ready()
    this.direct = new DirectPorts(this.pools.clear, threads.clear);
    this.lanes = {
      clear: new LaneQueue("clear", this.direct, max, authStale, sink, channels.clear, threads.clear * tasksPerWorker.clear),
      req: new LaneQueue("req", this.pools.req, max, 0, sink, channels.req, threads.req * tasksPerWorker.req),
    };
    this.threads = threads;
    this.board = new MetricsBoard(shared.metrics);
  }

  /** the clear lane's direct ports to its workers */
  private readonly direct: DirectPorts;

  /** queue-full refusals are counted here (metrics/board.ts) */
  private readonly board: MetricsBoard;

  /** False when the lane is full; the caller replies QUEUE_FULL_REPLY at once. `conn`: the request port's connection (conn-board.ts). */
  submit(frame: Buffer, tag: T, source?: string, conn?: number): boolean {
    const lane = classify(frame);
    const p: Pending<T> = { frame, tag, arrival: Date.now() };
    if (source !== undefined) p.source = source;
    if (conn !== undefined) p.conn = conn;
    if (this.lanes[lane].push(p)) return true;
    this.board.laneRefused(lane === "clear" ? 0 : 1, 0);
    return false;
  }

  /** Clustered: the reply this master gave the request `key` names (nonce and tag), for a peer that has a copy of it. */
  recallReply(key: string): Promise<Uint8Array | undefined> {
    return this.lanes.req.recallForPeer(key);
  }

  /** Clustered: how this master asks the others for the reply to a copy it remembers nothing for. */
  set askPeersForReply(ask: AskPeersForReply | undefined) {
    this.lanes.req.askPeers = ask;
  }

  /** Frames waiting in or worked on by each lane: clear, req (metrics/labels.ts LANES). */
  depths(): [number, number] {
    return [this.lanes.clear.waiting, this.lanes.req.waiting];
  }

  waiting(): number {
    return this.lanes.clear.waiting + this.lanes.req.waiting;
  }

  /** Threads of each lane (`worker_threads` split between them: laneThreads). */
  readonly threads: Record<Lane, number>;

  /**
   * The maintenance tasks in the workers (cleanup, presence): drain() waits for them as for batches, since
   * destroy() ends the workers, and a worker ended inside an LMDB call (a cleanup's prune iterating the job
   * cache) aborts the whole process (lmdb's "FATAL ERROR: Error::ThrowAsJavaScriptException napi_throw").
   */
  private readonly tasks = new Set<Promise<unknown>>();

  private task<T>(run: Promise<unknown>): Promise<T> {
    const p = run as Promise<T>;
    this.tasks.add(p);
    const done = () => void this.tasks.delete(p);
    p.then(done, done);
    return p;
  }

  async cleanup(nowMs: number): Promise<number> {
    const r = await this.task<CleanupResult>(this.lanes.req.pool.run({ kind: "cleanup", nowMs }));
    return r.removed;
  }

  /**
   * Resolves once every worker of both lanes has loaded (built its context: keys parsed, LMDB databases
   * opened), so a master says it serves only when its threads do. Piscina marks its first workers ready before
   * their modules run; a `ready` task is answered only after. Concurrent tasks go to the least busy worker, so
   * one round usually reaches each; a worker not heard from is asked again, up to the deadline (then a warning:
   * the lane serves with the workers it has, the others join when loaded). A worker that fails to load rejects.
   */
  async ready(deadlineMs: number): Promise<void> {
    await Promise.all(
      (Object.keys(this.lanes) as Lane[]).map(async (name) => {
        const seen = new Set<number>();
        while (seen.size < this.threads[name]) {
          if (Date.now() > deadlineMs) {
            log.warning(`${name} lane: ${seen.size} of ${this.threads[name]} workers loaded at start; serving with them`);
            return;
          }
          const asks = Array.from({ length: this.threads[name] - seen.size }, () => this.lanes[name].pool.run({ kind: "ready" }) as Promise<ReadyResult>);
          for (const r of await Promise.all(asks)) seen.add(r.thread);
        }
      }),
    );
    await this.direct.attach();
  }

  /** Accepted minions with an established publish connection (a request worker reads the data cache). */
  async presentIds(): Promise<string[]> {
    const r = await this.task<PresenceResult>(this.lanes.req.pool.run({ kind: "presence" }));
    return r.present;
  }

  /** Resolves when both lanes are idle and no maintenance task runs, or at the deadline (a stopping master answers the rest at destroy). */
  async drain(deadlineMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<void>((r) => (timer = setTimeout(r, Math.max(0, deadlineMs - Date.now()))));
    await Promise.race([Promise.all([this.lanes.clear.whenIdle(), this.lanes.req.whenIdle(), Promise.allSettled([...this.tasks])]), deadline]);
    clearTimeout(timer);
  }

  async destroy(): Promise<void> {
    // clear requests get the stopping master's clear answer; AES ones none (answerOwed)
    this.lanes.clear.answerOwed(SHUTDOWN_REPLY);
    this.lanes.req.answerOwed(undefined);
    this.direct.close();
    await Promise.all([this.pools.clear.destroy(), this.pools.req.destroy()]);
    for (const lane of [this.lanes.clear, this.lanes.req]) lane.close();
  }
}
