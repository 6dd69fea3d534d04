/**
 * A request worker (Piscina). Owns: a MasterContext (cached KeyObjects, session keys, LMDB handles).
 * Receives batches of raw request bodies, answers each with exactly one reply body. All frames of a
 * batch run concurrently so their job-cache writes share LMDB transactions (group commit); replies
 * are only produced after their writes are durable. Each reply leaves as soon as the callback that made it ready is done
 * (batch-replies.ts): with the batch's result when the whole batch is ready then, else in a BatchPart on the
 * lane's BroadcastChannel, so a slow frame holds none of the others.
 */
import { move, transferableSymbol, valueSymbol, workerData } from "piscina";
import { BroadcastChannel, threadId, type MessagePort } from "node:worker_threads";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { configureLogging, getLogger } from "../../shared/log.js";
import { STALE_REPLY } from "./replies.js";
import { MasterContext, newEffects, type Effects, type SharedBuffers } from "./context.js";
import { handleRequest, lastAnsweredAtOnce, lastCmdLater, lastCmdSlot, lastMemo, lastOverBudget, type Memo } from "./request.js";
import { MEMO_NONE } from "../../shared/nonce-replies.js";
import { installSubsystems } from "./subsystems.js";
import type { AttachResult, BatchPart, BatchResult, BatchTask, CleanupResult, DirectReply, Lane, MaintenanceTask, PresenceResult, ReadyResult, ReplyMemo } from "./task.js";
import { BatchReplies } from "./batch-replies.js";
import { batchHoldMsMax } from "./limits.js";
import { installSyncOutbox } from "../../shared/sync-outbox.js";
import { isClustered } from "../../shared/shared-fs.js";
import { NonceAppender } from "../../shared/nonce-journal.js";
import { packNonces } from "../../shared/nonce-set.js";
import { lmdbDir } from "../../lib/store/lmdb-env.js";
import { purgeKeylessMinions } from "./keyless-purge.js";
import { pruneSaltJobFiles, saltJobFilesOn } from "../../lib/store/salt-job-files.js";
import { answerHeapProbes } from "../../shared/heap-probe.js";
import { nameThisThread } from "../../shared/thread-kit.js";
import { LogBudget } from "../../shared/log-budget.js";
import { ConnBoard } from "../../shared/conn-board.js";
import { getPriority, setPriority } from "node:os";

interface WorkerInit {
  cfg: MasterConfig;
  shared: SharedBuffers;
  log: { level: string; file: string | null; fileLevel: string | null };
  /** the lane's BroadcastChannel name, for the replies that go before their batch's result (BatchPart) */
  partChannel: string;
  /** the lane this worker serves (its refusals are counted under it) */
  lane: Lane;
}

const init = workerData as WorkerInit;
const log = getLogger("brine.worker");
/** stale sign-in batches: one line per 10 s and a count of the rest (a sign-in storm queues hundreds of batches a second) */
const staleLog = new LogBudget(1, 10_000, (line) => log.warning(line), "stale sign-in batches");
/** sign-ins whose connection had closed: one line per 10 s (a 3007.x minion closes one at every timed-out try) */
const goneLog = new LogBudget(1, 10_000, (line) => log.info(line), "sign-in batches with closed connections");
configureLogging(init.log);
lowerThisThread(init.cfg.brine_worker_nice);
answerHeapProbes("request");
nameThisThread("request");
const ctx = new MasterContext(init.cfg, init.shared);
/** the request port's closed connections (native transport): a clear-lane frame from one is not worked on */
const connBoard = init.shared.conns ? new ConnBoard(init.shared.conns) : undefined;
await installSubsystems(ctx);
/** clustered: this thread's data cache, mine and session key writes, for the peers (BatchResult.sync) */
const syncOutbox = installSyncOutbox(ctx);
/** the replay nonce journal (src/shared/nonce-journal.ts): this thread appends what its batches accepted */
const nonceAppender = new NonceAppender(lmdbDir(ctx.cfg), ctx.nonces);
const clustered = isClustered(ctx.cfg);
/** this lane's channel for replies that go in parts; posting only (unref: it never keeps the thread alive) */
const partChannel = new BroadcastChannel(init.partChannel);
partChannel.unref();

export default async function run(task: BatchTask | MaintenanceTask): Promise<BatchResult | CleanupResult | PresenceResult | ReadyResult | AttachResult> {
  // this module's top level (the context, the subsystems) has run: the thread serves
  if (task.kind === "ready") return { thread: threadId };
  if (task.kind === "attach") return { thread: threadId, attached: attachDirect(task.port) };
  if (task.kind === "presence") {
    return { present: await ctx.presentHere() };
  }
  if (task.kind === "cleanup") {
    // the cutoff first, then deletes carried by return writes or short passes of its own (job-cache.ts)
    const pruned = await ctx.jobs.prune(ctx.cfg.keep_jobs_seconds, task.nowMs);
    let removed = pruned.removed + pruned.alongside;
    removed += await purgeKeylessMinions(ctx);
    removed += await ctx.auth().tokens.sweep(); // expired eauth tokens (Salt removes them only when presented)
    if (saltJobFilesOn(ctx.cfg)) removed += pruneSaltJobFiles(ctx.cfg.cachedir, ctx.cfg.keep_jobs_seconds, task.nowMs);
    return { removed };
  }
  const { result, ab } = await runBatch(task);
  // Piscina's movable value: the worker posts the result with its one buffer in the transfer list
  return ab ? (move({ [transferableSymbol]: ab, [valueSymbol]: result }) as unknown as BatchResult) : result;
}

/** The lane's direct port to this worker (direct-ports.ts), once the main thread attached one. */
let direct: MessagePort | undefined;

/**
 * Batches that come on `port` (the main thread's direct port to this worker, src/main-thread/direct-ports.ts) are
 * run as those that come through Piscina, and their results go back on it, their one buffer transferred. One port
 * a worker: false when this one has one already (the main thread closes the spare).
 */
function attachDirect(port: MessagePort): boolean {
  if (direct) {
    port.close();
    return false;
  }
  direct = port;
  port.on("message", (task: BatchTask) => {
    runBatch(task).then(
      ({ result, ab }) => port.postMessage({ result } satisfies DirectReply, ab ? [ab] : []),
      (e: Error) => port.postMessage({ error: e.message } satisfies DirectReply),
    );
  });
  // a port that waits for messages keeps no thread alive (Piscina's own port does)
  port.unref();
  return true;
}

/** One batch: its replies, effects and the reply memory's part; `ab`: the one buffer they are views into, if any. */
function runBatch(task: BatchTask): Promise<InOneBuffer> {
  const fx = newEffects();
  const now = Date.now();
  let stale = 0;
  let gone = 0;
  /** frames refused for this thread's decode budget (decode-budget.ts) */
  let overBudget = 0;
  /** frames whose reply was not ready when handleRequest returned (none: no hold timer, the next tick ends the batch) */
  let waiting = 0;
  const n = task.frames.length;
  const conns = connBoard && task.conns;
  const replies: Uint8Array[] = new Array(n);
  // when each reply leaves: batch-replies.ts decides, this shell schedules, posts and resolves
  const br = new BatchReplies(n);
  let finish!: (r: InOneBuffer) => void;
  const result = new Promise<InOneBuffer>((r) => (finish = r));
  let hold: NodeJS.Timeout | undefined;
  /** the next message's number once the batch goes in parts (parts and results: the main thread applies them in this order) */
  let seq = 0;
  /** per frame, what the reply memory does with its reply (request.ts lastMemo; its kind read once the reply is ready) */
  let memos: (Memo | undefined)[] | undefined;
  /** the memo of the replies of frames `indices` (null: the whole batch, in order); {} when none of them has one */
  const memoOf = (indices: number[] | null): { memo?: ReplyMemo } => {
    if (!memos) return {};
    let m: ReplyMemo | undefined;
    const count = indices ? indices.length : n;
    for (let j = 0; j < count; j++) {
      const x = memos[indices ? indices[j]! : j];
      if (!x || x.kind === MEMO_NONE) continue;
      m ??= { at: [], kinds: [], keys: [], what: [] };
      m.at.push(j);
      m.kinds.push(x.kind);
      m.keys.push(x.key);
      m.what.push(x.what);
    }
    return m ? { memo: m } : {};
  };
  const flush = () => {
    const f = br.flush();
    if (f.kind === "result") {
      clearTimeout(hold);
      finish(inOneBuffer({ replies, ...takeEffects(fx), ...memoOf(null) }));
      return;
    }
    const out = f.indices.map((i) => replies[i]!);
    for (const i of f.indices) replies[i] = SENT;
    if (f.kind === "final") {
      clearTimeout(hold);
      finish(inOneBuffer({ replies: out, seq: seq++, indices: f.indices, ...takeEffects(fx), ...memoOf(f.indices) }));
      return;
    }
    partChannel.postMessage({ batch: task.batch, seq: seq++, indices: f.indices, replies: out, ...takeEffects(fx), ...memoOf(f.indices) } satisfies BatchPart);
  };
  // per frame: its metrics command slot and start; one clock read per frame, a second for one that waits
  const cmds = new Uint8Array(n);
  const starts = new Float64Array(n);
  let mark = performance.now();
  const settle = (i: number, reply: Uint8Array) => {
    replies[i] = reply;
    // after the microtasks of this callback (a group commit settles its frames in one drain), before other I/O
    if (br.settle(i)) process.nextTick(flush);
  };
  for (let i = 0; i < n; i++) {
    if (task.staleMs > 0 && now - task.arrivals[i]! > task.staleMs) {
      stale++;
      settle(i, STALE_REPLY);
      continue;
    }
    if (conns && conns[i]! >= 0 && connBoard!.gone(conns[i]!)) {
      // its minion closed the connection (gave up on it): the reply would be dropped, so no work is done for it
      gone++;
      settle(i, STALE_REPLY);
      continue;
    }
    const f = task.frames[i]!;
    starts[i] = mark;
    const p = handleRequest(ctx, Buffer.from(f.buffer, f.byteOffset, f.byteLength), fx, task.sources?.[i] ?? undefined);
    mark = performance.now();
    cmds[i] = lastCmdSlot();
    if (lastOverBudget()) overBudget++;
    const memo = lastMemo();
    if (memo) (memos ??= [])[i] = memo;
    if (lastAnsweredAtOnce()) {
      ctx.metrics.request(cmds[i]!, ((mark - starts[i]!) * 1000) | 0);
      void p.then((r) => settle(i, r));
    } else {
      waiting++;
      // a request that waited for its minion's key is counted under the command it turned out to be
      const later = lastCmdLater();
      void p.then((r) => {
        ctx.metrics.request(later ? later.slot : cmds[i]!, ((performance.now() - starts[i]!) * 1000) | 0);
        settle(i, r);
      });
    }
  }
  if (overBudget) ctx.metrics.laneRefused(init.lane === "clear" ? 0 : 1, 3, overBudget); // reason decode_budget
  if (stale) ctx.metrics.laneRefused(0, 1, stale); // clear lane (the only one with staleMs), reason stale
  if (stale) staleLog.line(`${stale} sign-in request(s) waited over ${task.staleMs} ms; answered retry-later without work`);
  if (gone) {
    ctx.metrics.laneRefused(0, 2, gone); // clear lane, reason gone
    goneLog.line(`${gone} sign-in request(s) came on connections closed before their turn (their minions resent them); not worked on`);
  }
  // a frame that waits long (a runner call) gives its task slot back; its reply still goes in a part. The
  // effects fired so far go now, on the parts' channel (the order of parts is the order of effects): an
  // awaited runner call waits for its `runs` to reach the main thread.
  if (waiting === 0) return result; // every reply is ready: the flush scheduled on the next tick ends the task
  hold = setTimeout(() => {
    if (!br.hold()) return;
    // the effects so far go with it (an awaited runner call waits for its `runs`), in order with the parts
    finish({ result: { replies: [], seq: seq++, indices: [], streamed: true, ...takeEffects(fx) } });
  }, batchHoldMsMax);
  return result;
}

/**
 * `brine_worker_nice`: this thread (only it: Linux keeps a nice value per thread, `setpriority(PRIO_PROCESS, 0)` from
 * a thread sets that thread's) runs `steps` nicer than it started (the main thread's nice, inherited at its spawn).
 * Elsewhere the call would change the whole process: not done (the main thread warns at start).
 */
function lowerThisThread(steps: number): void {
  if (!steps || process.platform !== "linux") return;
  try {
    setPriority(0, Math.min(19, getPriority(0) + steps));
  } catch (e) {
    log.warning(`brine_worker_nice: this request thread keeps its priority: ${(e as Error).message}`);
  }
}

/**
 * A batch's result with its replies, events and sync batches copied into one ArrayBuffer of their exact size,
 * which Piscina transfers to the main thread instead of cloning: a structured clone copies each view's whole
 * backing store (a 2 KB reply made by Buffer.allocUnsafe is a slice of an 8 KiB pool chunk, copied whole), one
 * per distinct buffer. The main thread reads views into it (req-pool.ts). The result's fields are views then.
 */
interface InOneBuffer {
  result: BatchResult;
  /** the buffer the result's replies, events and sync batches are views into (none: no bytes) */
  ab?: ArrayBuffer;
}

function inOneBuffer(r: BatchResult): InOneBuffer {
  let bytes = 0;
  for (const a of r.replies) bytes += a.byteLength;
  for (const a of r.events) bytes += a.byteLength;
  if (r.sync) for (const a of r.sync) bytes += a.byteLength;
  if (bytes === 0) return { result: r };
  const ab = new ArrayBuffer(bytes);
  const all = new Uint8Array(ab);
  let pos = 0;
  const put = (a: Uint8Array): Uint8Array => {
    all.set(a, pos);
    const view = new Uint8Array(ab, pos, a.byteLength);
    pos += a.byteLength;
    return view;
  };
  r.replies = r.replies.map(put);
  r.events = r.events.map(put);
  if (r.sync) r.sync = r.sync.map(put);
  return { result: r, ab };
}

/** a reply that went in a part (the array is not kept holding its bytes) */
const SENT = new Uint8Array(0);

/**
 * The effects fired so far, moved out of `fx` (frames still running keep adding to it). The dispatched
 * requests' nonces go to the journal here: on disk before any reply they cover leaves, and to the peers.
 */
function takeEffects(fx: Effects): Omit<BatchResult, "replies" | "streamed" | "seq" | "indices"> {
  const sync = syncOutbox?.drain();
  const nonces = fx.nonces.length ? packNonces(fx.nonces) : undefined;
  if (nonces) nonceAppender.append(nonces);
  const out: Omit<BatchResult, "replies" | "streamed" | "seq" | "indices"> = {
    events: fx.events,
    publishes: fx.publishes,
    ...(sync ? { sync } : {}),
    ...(fx.runs.length ? { runs: fx.runs } : {}),
    ...(fx.verified.length ? { verified: fx.verified } : {}),
    ...(nonces && clustered ? { nonces } : {}),
  };
  fx.events = [];
  fx.publishes = [];
  fx.runs = [];
  fx.verified = [];
  fx.nonces = [];
  return out;
}
