/**
 * A runner thread: runs one runner call inside the master process (so it can see shared state such as
 * the ring SharedArrayBuffer) and streams prints and the return value to the control server.
 */
import { parentPort, workerData } from "node:worker_threads";
import { lmdbDir, openStore, type Store } from "../lib/store/lmdb-env.js";
import { JobCache } from "../lib/store/job-cache.js";
import { MinionCache } from "../lib/store/minion-cache.js";
import { dataTypeOf } from "../shared/minion-placement.js";
import { keyStoreFor } from "../lib/pki/key-store.js";
import { LocalClient, clientSocketsSettled, closeClientSockets } from "../lib/client/local-client.js";
import { busEventOf, type BusEvent } from "../shared/event-frame.js";
import { encodeWire } from "../shared/protocol/msgpack.js";
import { keptWarm, type MainToRunner, type RunnerInit, type RunnerToMain, type SpareRunnerData } from "./messages.js";
import { EncodedReturn, type RunnerContext } from "./context.js";
import { findRunner } from "./registry.js";
import { checkResult } from "./orchestrate/chunk-runner.js";
import { storeMasterJob } from "./job-record.js";
import { jobsFor } from "./cluster-jobs.js";
import { RingReader } from "../shared/sab-ring/reader.js";
import { RaftClient } from "../workers/raft/client.js";
import { isClustered } from "../shared/shared-fs.js";
import { SyncOutbox } from "../shared/sync-outbox.js";
import { clusterNodeIdOf } from "../shared/node-ids.js";
import { threadInit } from "../shared/thread-kit.js";
import { getLogger } from "../shared/log.js";

const log = getLogger("brine.runner");

/**
 * The call: in workerData, or, for a spare thread the control server started ahead of its call (so the modules
 * above are loaded before anyone waits), the first message. Events come after it, to the listener below.
 */
async function callOf(): Promise<RunnerInit> {
  if (!(workerData && typeof workerData === "object" && "spare" in workerData)) return threadInit<RunnerInit>("runner");
  const spare = threadInit<SpareRunnerData>("runner");
  // what every call needs, made while nobody waits: the job cache handle, and the jobs.* runners' module
  lastCfg = spare.cfg;
  opened = { dir: lmdbDir(spare.cfg), store: openStore(spare.cfg) };
  let called = false;
  const call = nextCall().then((init) => ((called = true), init));
  await findRunner("jobs.lookup_jid");
  // the jobs.* reads once over the newest jobs, so the call's are not this thread's first (cold: several ms);
  // it stops when the call comes, and a failure in it is only logged
  const { warmJobReads } = await import("./jobs.js");
  await warmJobReads({ cfg: spare.cfg, jobs: new JobCache(opened.store) }, () => called).catch((e: unknown) => log.warning(`a spare runner thread's warm-up failed: ${(e as Error).message}`));
  if (!called) parentPort!.postMessage({ k: "loaded" } satisfies RunnerToMain);
  return call;
}

/**
 * Calls that came while none was awaited (a kept-warm thread is handed its next call as soon as it reports its
 * record, and may still be waiting for libzmq then: clientSocketsSettled), and the one awaiting the next.
 */
const calls: RunnerInit[] = [];
let callWaiter: ((init: RunnerInit) => void) | undefined;
/** The configuration this thread was last given (a call without one runs with it: messages.ts RunnerCall). */
let lastCfg: RunnerInit["cfg"] | undefined;
parentPort!.on("message", (m: MainToRunner) => {
  if (m.k !== "init") return;
  const cfg = m.init.cfg ?? lastCfg;
  if (!cfg) {
    log.error(`runner ${m.init.fun}: its call came without a configuration and this thread has none; the call is refused`);
    post({ k: "error", message: `runner ${m.init.fun}: the runner thread has no configuration for the call` });
    return;
  }
  lastCfg = cfg;
  const init: RunnerInit = { ...m.init, cfg };
  if (callWaiter) {
    const take = callWaiter;
    callWaiter = undefined;
    take(init);
  } else calls.push(init);
});

/** The next `{k: "init"}` message's call (a spare's first call, or a kept-warm thread's next one). */
function nextCall(): Promise<RunnerInit> {
  const queued = calls.shift();
  return queued ? Promise.resolve(queued) : new Promise<RunnerInit>((resolve) => (callWaiter = resolve));
}

/** A result up to this size goes to the caller before its job record's writes are issued (a copy of it), bytes. */
const answerFirstBytesMax = 1024 * 1024;

/** The store a spare thread opened before its call (used when the call's configuration names the same directory). */
let opened: { dir: string; store: Store } | undefined;
const post = (m: RunnerToMain) => parentPort!.postMessage(m);

/** While a call runs: records it as failed because its caller left (a `stop` with `abandoned`); later records are skipped. */
let recordAbandoned: ((message: string) => Promise<void>) | undefined;

const queue: BusEvent[] = [];
let wake: (() => void) | undefined;
parentPort!.on("message", (m: MainToRunner) => {
  if (m.k === "stop") {
    // the host ends this thread next: no zeromq socket may be open then (messages.ts); a call whose caller left is
    // recorded as failed first
    const recorded = m.abandoned !== undefined && recordAbandoned ? recordAbandoned(m.abandoned) : Promise.resolve();
    closeClientSockets();
    // and libzmq must have let go of what the closed sockets still held before the thread may end (zmq-settle.ts)
    void Promise.allSettled([recorded, clientSocketsSettled()]).finally(() => post({ k: "stopped" }));
    return;
  }
  if (m.k !== "ev") return;
  // an event this thread cannot read is skipped, never the end of the runner (state.event reads every tag)
  const ev = busEventOf(m.frame);
  if (ev) {
    queue.push(ev);
    wake?.();
  }
});

async function* events(): AsyncIterable<BusEvent> {
  for (;;) {
    while (queue.length) yield queue.shift()!;
    await new Promise<void>((r) => (wake = r));
    wake = undefined;
  }
}

/** Clustered: the cache writes this runner makes (cache.clear_*), stamped and encoded for the peers (cache.ts). */
function trackSync(init: RunnerInit, ctx: RunnerContext): (() => void) | undefined {
  if (!isClustered(init.cfg)) return undefined;
  const outbox = new SyncOutbox();
  // a bank placed on a ring goes to its owners through the hand-off outbox instead (minion-cache.ts)
  const ring = ctx.cluster?.ring;
  ctx.minions.track(clusterNodeIdOf(init.cfg), (r) => outbox.push(r), (bank) => ring?.route(dataTypeOf(bank)) != null);
  return () => {
    const batches = outbox.drain();
    if (batches) post({ k: "sync", batches });
  };
}

/**
 * Runs one call; resolves true once it posted `recorded` (its caller answered, its job record committed): a thread
 * whose call was a read-only jobs.* call then waits for its next call (keptWarm), any other ends (the control server
 * terminates it).
 */
async function runCall(init: RunnerInit): Promise<boolean> {
  queue.length = 0;
  // a runner brine does not have may be a synced custom runner (custom.ts)
  const fn = (await findRunner(init.fun)) ?? (await import("./custom.js")).customRunner(init.cfg, init.fun);
  if (!fn) {
    post({ k: "error", message: `'${init.fun}' is not available.`, unavailable: true });
    return false;
  }
  // salt-run --async: its caller is answered now (Salt checks the function exists, then returns the jid)
  if (init.async) post({ k: "started" });
  if (opened?.dir !== lmdbDir(init.cfg)) opened = { dir: lmdbDir(init.cfg), store: openStore(init.cfg) };
  const store = opened.store;
  const ring = init.cluster ? new RingReader(init.cluster.ringBuffer) : undefined;
  const ctx: RunnerContext = {
    cfg: init.cfg,
    // with jobs routed to a ring, what this runner stores (its own job, migrate_jobs_to_cache) is handed off too
    jobs: new JobCache(store, ring ? () => ring.route("jobs") !== null : undefined),
    store,
    minions: new MinionCache(store),
    keys: keyStoreFor(init.cfg),
    client: new LocalClient(init.cfg),
    print: (text) => post({ k: "print", text }),
    events,
  };
  if (init.metrics) ctx.metrics = init.metrics;
  if (init.timeoutS !== undefined) ctx.timeoutS = init.timeoutS;
  if (init.job) {
    const jid = init.job.jid;
    ctx.jid = jid;
    ctx.user = init.job.user;
    ctx.fireArgs = (data) => post({ k: "fire", tag: `salt/run/${jid}/args`, data });
  }
  if (init.cluster) {
    ctx.cluster = { nodeId: init.cluster.nodeId, ring: ring!, raft: new RaftClient(init.cluster.raftPort) };
    if (init.cluster.health) ctx.cluster.health = init.cluster.health;
    if (init.cluster.stateSyncPort) ctx.cluster.stateSync = init.cluster.stateSyncPort;
  }
  const flush = trackSync(init, ctx);
  // the job lands in the job cache before its return is posted (and `salt/run/<jid>/ret` fired), as Salt stores it
  let left = false;
  const record = async (ret: unknown, success: boolean, packed?: Uint8Array, retcode?: number) => {
    if (left || !init.job || init.cfg.runner_returns === false) return;
    const fun_args = [...init.arg, ...(Object.keys(init.kwarg).length ? [init.kwarg] : [])];
    await storeMasterJob(ctx.jobs, init.cfg.id, { jid: init.job.jid, fun: `runner.${init.fun}`, fun_args, user: init.job.user }, { return: ret, success, ...(packed ? { packed } : {}), ...(retcode !== undefined ? { retcode } : {}) }).catch(() => undefined);
  };
  recordAbandoned = async (message) => {
    // record checks `left` before its first await: this write goes ahead, any the call makes after it does not
    const written = record(message, false, undefined, 1);
    left = true;
    await written;
  };
  const failed = async (e: unknown): Promise<false> => {
    const message = e instanceof Error ? e.message : String(e);
    // Salt's RunnerClient stores a runner that raised with retcode 1
    await record(message, false, undefined, 1);
    post({ k: "error", message });
    return false;
  };
  return Promise.resolve()
    // a jobs.* read sees the job wherever the ring placed it (cluster-jobs.ts); the job record stays local
    .then(async () => {
      const jobs = await jobsFor(ctx, init.fun, init.arg, init.kwarg);
      return fn(jobs === ctx.jobs ? ctx : { ...ctx, jobs }, init.arg, init.kwarg);
    })
    .finally(() => flush?.())
    .then(async (ret) => {
      let packed: Buffer;
      try {
        packed = ret instanceof EncodedReturn ? ret.bytes : encodeWire(ret);
      } catch (e) {
        // a value msgpack has no form for: the caller gets an error, not silence, and the master serves on
        post({ k: "error", message: `the runner's result could not be encoded: ${(e as Error).message}` });
        return false;
      }
      // Salt's RunnerClient: a return with `data` (orchestrate) succeeded when its state run did
      const success = ret !== null && typeof ret === "object" && !Array.isArray(ret) && "data" in ret ? checkResult((ret as { data: unknown }).data) : true;
      // stored as the bytes just made for the caller, not encoded a second time; the main thread answers the
      // caller at once and fires `salt/run/<jid>/ret` only on `recorded`, once the record is committed
      // (job-record.ts). A small result goes first, as a copy (issuing the record's writes took ~2-4 ms of a call
      // that reads nothing); a large one's bytes are copied into lmdb-js's write buffer first, then transferred.
      const small = packed.length <= answerFirstBytesMax;
      const recorded = small ? undefined : record(ret, success, packed);
      // a Buffer may be a view into a shared pool: copy into its own ArrayBuffer when it is one, then transfer
      const own = small || !((ret instanceof EncodedReturn && ret.soleOwner) || (packed.byteOffset === 0 && packed.byteLength === packed.buffer.byteLength)) ? new Uint8Array(packed) : packed;
      parentPort!.postMessage({ k: "return", packed: own, success } satisfies RunnerToMain, [own.buffer as ArrayBuffer]);
      await (recorded ?? record(ret, success, packed));
      post({ k: "recorded" });
      return true;
    }, failed)
    .then(
      (ok) => ok === true,
      () => false,
    )
    .finally(() => {
      recordAbandoned = undefined;
      // a kept-warm thread's next call brings its own ports: this call's are closed (a terminated thread's close with it)
      init.cluster?.raftPort.close();
      init.cluster?.stateSyncPort?.close();
    });
}

let init = await callOf();
lastCfg = init.cfg;
// a read-only jobs.* call's thread stays for the next such call when its call ended well (control-server.ts)
// the host ends this thread (or terminates it idle and warm) once its call is over: a request of the call that
// timed out may have left a frame in libzmq, which must have let go of it first (zmq-settle.ts)
while ((await runCall(init)) && keptWarm(init.fun)) {
  await clientSocketsSettled();
  init = await nextCall();
}
await clientSocketsSettled();
