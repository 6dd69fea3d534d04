/**
 * The master's local control socket (`sock_dir/brine_ctl.ipc`, mode 0600, main thread). Through it
 * `salt-run` runs runners inside the master — each call in its own runner thread, which sees the
 * master's shared state — and `salt-key` reports key changes so the master fires `salt/key`.
 *
 * Requests: {op: "run", fun, arg, kwarg, timeout?} (timeout: salt-run's -t) → {type: "jid", jid} (the call's job id),
 * a stream of {type: "print", text}, then one {type: "return", ret} or {type: "error", message};
 * {op: "fire", tag, data} → {type: "return"}. A caller that leaves before the return ends the runner, whose job is
 * recorded as failed (as Salt's runner ends with its salt-run).
 *
 * Nothing a client sends and nothing a runner returns takes the master down: a request that fails is answered
 * with an error; a runner that throws, dies or returns what msgpack cannot carry is answered with an error; a
 * runner's result is encoded in its own thread and only copied here (runners/messages.ts).
 */
import net from "node:net";
import { chmodSync, rmSync } from "node:fs";
import path from "node:path";
import type { Worker } from "node:worker_threads";
import type { MasterConfig } from "../shared/config/defaults.js";
import { getLogger } from "../shared/log.js";
import type { EventBusServer } from "./bus-server.js";
import { FrameReader, frame, frameOfPieces } from "../shared/length-framing.js";
import { encodeWithEncodedEntry, headOfEncodedEntry, isMap } from "../shared/protocol/msgpack.js";
import { packEventEncoded, stamp } from "../shared/event-frame.js";
import { keptWarm, type MainToRunner, type RunnerCall, type RunnerInit, type RunnerMessage, type RunnerSync, type SpareRunnerData } from "../runners/messages.js";
import type { RunnerClusterLink } from "./cluster/cluster-node.js";
import type { MetricsBoard } from "../shared/metrics/board.js";

import { CONTROL_SOCKET } from "../shared/socket-names.js";
import { endThread, spawnThread, threadExitWaitMs, threadLogSettings } from "../shared/thread-kit.js";

const log = getLogger("brine.control");

/** Runner threads at once; more calls are refused with a clear error. */
export const runnerThreadsMax = 16;
/** How long a stopping master waits for runner threads to finish before ending them, ms. */
export const runnerStopWaitMs = 5_000;
/** How long a runner thread asked to end has to close its zeromq sockets before it is ended anyway, ms (endRunner). */
const runnerSocketsCloseWaitMs = 2_000;
const RUNNER_THREAD = new URL("../runners/runner-thread.js", import.meta.url);

/**
 * How long a read-only jobs.* call waits for the thread of such a call that has answered and is writing its job
 * record (a few ms: one LMDB commit) before it takes the spare instead, ms. Back-to-back calls (a dashboard polling
 * through salt-api, a script's loop) otherwise each took the spare and made the next one start: a thread's start
 * (~70 ms of CPU) per call where the call itself costs ~2 ms.
 */
export const warmHandoffWaitMs = 250;

/** Tags salt-key may ask the master to fire. */
const FIREABLE = /^salt\/key$/;

export class ControlServer {
  private server: net.Server | undefined;
  /** open client connections: ended by stop(), whose server.close() would otherwise wait for each client to leave */
  private readonly conns = new Set<net.Socket>();
  private running = 0;
  /** Runner calls not over yet (a call is over once its job record is committed and its `ret` fired): benches read it. */
  get callsRunning(): number {
    return this.running;
  }
  /** live runner threads and the call each runs (its latest): a stopping master waits for them (runnerStopWaitMs), then ends the rest */
  private readonly threads = new Map<Worker, string>();
  /** runner threads started (spares included), count: tests and benches read it */
  threadsStarted = 0;
  /** read-only jobs.* calls answered whose thread is writing its job record: each will be kept warm or handed on */
  private warmSoon = 0;
  /** read-only jobs.* calls waiting for one of those threads (warmHandoffWaitMs), oldest first */
  private readonly warmWaiters: ((w: Worker | undefined) => void)[] = [];
  /** the reactor.* / schedule.* runners' requests, when the automation thread runs (src/main-thread/automation-host.ts) */
  automation: ((req: unknown) => Promise<unknown>) | undefined;
  readonly path: string;
  /** the metrics board: handed to each runner thread (brine.stats reads it), counts the events fired here */
  metricsBoard: MetricsBoard | undefined;

  constructor(
    private readonly cfg: MasterConfig,
    private readonly bus: EventBusServer,
    private readonly waiting: () => number,
    private readonly fire: (tag: string, data: unknown) => void,
    private readonly rotate: () => void,
    /** with clustering on: the ring buffer and a fresh Raft worker port for each runner thread */
    private readonly clusterLink: () => RunnerClusterLink | undefined = () => undefined,
    /** runner jobs: a jid for each call and this master's own bus, for `salt/run/<jid>/new|ret` */
    /** clustered: where a runner's cache-sync records go (the peers) */
    private readonly runnerEvents?: { nextJid: () => string; fireLocal: (tag: string, data: unknown) => void; forwardSync?: (batches: Uint8Array[]) => void },
  ) {
    this.path = path.join(cfg.sock_dir, CONTROL_SOCKET);
  }

  async start(): Promise<void> {
    rmSync(this.path, { force: true });
    this.server = net.createServer((s) => this.serve(s));
    await new Promise<void>((resolve, reject) => {
      this.server!.once("error", reject);
      this.server!.listen(this.path, () => resolve());
    });
    chmodSync(this.path, 0o600);
  }

  private serve(s: net.Socket): void {
    const reader = new FrameReader();
    this.conns.add(s);
    s.once("close", () => this.conns.delete(s));
    s.on("error", () => s.destroy());
    s.on("data", (chunk) => {
      let msgs: unknown[];
      try {
        msgs = reader.push(chunk);
      } catch (e) {
        log.warning(`control socket: ${(e as Error).message}`);
        s.destroy();
        return;
      }
      for (const m of msgs) {
        try {
          this.handle(s, isMap(m) ? m : {});
        } catch (e) {
          // nothing a client sends takes the master down: the request fails, the master serves on
          log.error(`control request failed: ${(e as Error).stack ?? String(e)}`);
          this.send(s, { type: "error", message: `control request failed: ${(e as Error).message}` });
        }
      }
    });
  }

  /**
   * Writes one reply frame. A value that cannot be encoded (over controlFrameBytesMax, a type msgpack has no
   * form for) is answered with an error in its place: never a throw out of a socket or worker callback.
   */
  private send(s: net.Socket, v: unknown): void {
    if (s.destroyed) return;
    let f: Buffer;
    try {
      f = frame(v);
    } catch (e) {
      log.error(`control reply could not be encoded: ${(e as Error).message}`);
      f = frame({ type: "error", message: `the result could not be sent: ${(e as Error).message}` });
    }
    s.write(f);
  }

  /**
   * Writes the reply `{type: "return", ret}` whose `ret` is already encoded (a runner's bytes), as a head and
   * those bytes, never joined; one over controlFrameBytesMax is answered with an error.
   */
  private sendEncodedReturn(s: net.Socket, ret: Uint8Array): void {
    if (s.destroyed) return;
    let pieces: [Buffer, Uint8Array];
    try {
      pieces = frameOfPieces(headOfEncodedEntry({ type: "return" }, "ret"), ret);
    } catch (e) {
      log.error(`control reply could not be sent: ${(e as Error).message}`);
      this.send(s, { type: "error", message: `the result could not be sent: ${(e as Error).message}` });
      return;
    }
    s.cork();
    s.write(pieces[0]);
    s.write(pieces[1]);
    s.uncork();
  }

  private handle(s: net.Socket, m: Record<string, unknown>): void {
    const reply = (v: unknown) => this.send(s, v);
    if (m.op === "fire" && typeof m.tag === "string" && FIREABLE.test(m.tag)) {
      this.fire(m.tag, m.data ?? {});
      reply({ type: "return", ret: true });
      return;
    }
    if (m.op === "rotate") {
      this.rotate();
      reply({ type: "return", ret: true });
      return;
    }
    if (m.op === "automation") {
      if (!this.automation) return reply({ type: "error", message: "automation is not running" });
      this.automation(m.req).then(
        (ret) => reply({ type: "return", ret }),
        (e: Error) => reply({ type: "error", message: e.message }),
      );
      return;
    }
    if (m.op === "status") {
      reply({ type: "return", ret: { id: this.cfg.id, waiting: this.waiting(), runners: this.running } });
      return;
    }
    if (m.op !== "run" || typeof m.fun !== "string") {
      reply({ type: "error", message: "unknown control request" });
      return;
    }
    // salt-run's -t: the call's timeout option (cfg.timeout), as Salt's salt-run sets opts["timeout"]
    const timeoutS = typeof m.timeout === "number" && Number.isFinite(m.timeout) && m.timeout > 0 ? m.timeout : undefined;
    const call = { fun: m.fun, arg: Array.isArray(m.arg) ? m.arg : [], kwarg: isMap(m.kwarg) ? m.kwarg : {}, user: this.cfg.user, ...(timeoutS !== undefined ? { timeoutS } : {}) };
    if (m.async === true) {
      // salt-run --async (Salt's RunnerClient.asynchronous): the caller gets the jid once the runner is found and
      // leaves; the runner runs on, records its job and fires salt/run/<jid>/ret as any call; its prints go nowhere,
      // as a daemonized Salt runner's do, and the caller's leaving never stops it
      let answered = false;
      const asyncCall = this.startRunner({ ...call, async: true }, (msg) => {
        if (answered || msg.type === "print") return;
        answered = true;
        if (msg.type === "started") reply({ type: "return", ret: asyncCall?.jid ?? null });
        else if (msg.type === "error") reply(msg);
        else reply({ type: "error", message: `runner ${call.fun} answered before it was reported started` });
      });
      return;
    }
    const started = this.startRunner(
      call,
      // a return's bytes as the runner thread encoded them: copied into the reply, never decoded here
      (msg) => (msg.type === "return" ? this.sendEncodedReturn(s, msg.packed) : reply(msg)),
    );
    if (!started) return;
    // the call's jid, for the caller's log
    if (started.jid) reply({ type: "jid", jid: started.jid });
    s.on("close", () => started.abandon());
  }

  /**
   * Runs one runner call in its own thread: `salt/run/<jid>/new`, every message to `onMessage`, then
   * `salt/run/<jid>/ret`. Used by `salt-run` over this socket and by authorized clear `runner`
   * requests (those come with the jid their request worker gave them). Undefined when too many run.
   */
  startRunner(call: { fun: string; arg: unknown[]; kwarg: Record<string, unknown>; user: string; jid?: string; timeoutS?: number; async?: true }, onMessage: (m: RunnerMessage) => void): { jid: string | undefined; abandon(): void } | undefined {
    if (this.running >= runnerThreadsMax) {
      const message = `too many runners at once (runnerThreadsMax ${runnerThreadsMax})`;
      onMessage({ type: "error", message });
      // a clear runner request was already answered with its jid: its waiter learns of the refusal here
      if (call.jid) this.runnerEvents?.fireLocal(`salt/run/${call.jid}/ret`, { fun: `runner.${call.fun}`, jid: call.jid, user: call.user, return: message, success: false });
      return undefined;
    }
    const init: RunnerInit = {
      cfg: call.timeoutS === undefined ? this.cfg : { ...this.cfg, timeout: call.timeoutS },
      fun: call.fun,
      arg: call.arg,
      kwarg: call.kwarg,
      log: threadLogSettings(),
      ...(call.timeoutS === undefined ? {} : { timeoutS: call.timeoutS }),
      ...(call.async ? { async: true as const } : {}),
    };
    const link = this.clusterLink();
    if (link) init.cluster = link;
    if (this.metricsBoard) init.metrics = this.metricsBoard.sab;
    const jid = call.jid ?? this.runnerEvents?.nextJid();
    const job = { fun: `runner.${call.fun}`, fun_args: [...init.arg, ...(Object.keys(init.kwarg).length ? [init.kwarg] : [])], jid, user: call.user };
    if (jid) init.job = { jid, user: call.user };
    if (jid) this.runnerEvents?.fireLocal(`salt/run/${jid}/new`, job);
    const transferList = link ? [link.raftPort, ...(link.stateSyncPort ? [link.stateSyncPort] : [])] : [];
    /** the call's thread, once it has one */
    let w: Worker | undefined;
    let done = false;
    /** why the call was ended when its caller left before the return (what its job record and `salt/run/<jid>/ret` say) */
    let abandoned: string | undefined;
    let unsubscribe = () => {};
    const finish = () => {
      if (done) return;
      done = true;
      this.running--;
      unsubscribe();
      this.startSpare();
    };
    this.running++;
    /** the return the caller got, until the job record is committed and `salt/run/<jid>/ret` fired */
    let answered: { packed: Uint8Array; success: boolean } | undefined;
    /** this call counts in warmSoon (answered, its thread writing the record, to be kept warm) */
    let inWarmSoon = false;
    const leaveWarmSoon = () => {
      if (inWarmSoon) [inWarmSoon, this.warmSoon] = [false, this.warmSoon - 1];
    };
    const fireReturned = () => {
      if (done || !answered) return;
      // the call's thread has answered and is done with events (a next call starts with none queued): its own ret,
      // which carries the whole return, is not copied to it
      unsubscribe();
      // the event carries the same bytes (never decoded or encoded again on this thread)
      if (jid) this.metricsBoard?.eventFired("salt/run");
      if (jid) this.bus.publish([packEventEncoded(`salt/run/${jid}/ret`, encodeWithEncodedEntry({ ...job, success: answered.success, _stamp: stamp() }, "return", answered.packed))]);
      finish();
    };
    /** unavailable: there is no runner of that name (Salt's runner.py fires its ret with retcode 254 then) */
    const failed = (message: string, unavailable = false) => {
      leaveWarmSoon();
      // a thread that ends after its caller was answered (its record not confirmed) still ends its job
      if (answered) return fireReturned();
      onMessage(unavailable ? { type: "error", message, unavailable } : { type: "error", message });
      const retcode = abandoned ? 1 : unavailable ? 254 : undefined;
      if (jid) this.runnerEvents?.fireLocal(`salt/run/${jid}/ret`, { ...job, return: abandoned ?? message, success: false, ...(retcode !== undefined ? { retcode } : {}) });
      finish();
    };
    const launch = (reuse: Worker | undefined) => {
      // a read-only jobs.* call takes the thread the last such call left warm (registry.ts keptWarm); any other call
      // takes the spare thread started after the last call, its modules loaded (~0.25 s of a call's time); the next
      // spare starts once this call is over (its caller answered, its record committed), not beside it
      const spare = reuse ? undefined : this.spare;
      if (!reuse) {
        this.spare = undefined;
        this.spareLoaded = false;
      }
      let t: Worker;
      if (reuse || spare) {
        t = (reuse ?? spare)!;
        t.ref();
        // a thread that has this configuration object already is not sent it again (messages.ts RunnerCall)
        const { cfg, ...rest } = init;
        const sent: RunnerCall = this.threadCfg.get(t) === cfg ? rest : init;
        this.threadCfg.set(t, cfg);
        t.postMessage({ k: "init", init: sent } satisfies MainToRunner, transferList);
      } else {
        t = spawnThread({ name: `runner ${call.fun}`, url: RUNNER_THREAD, workerData: init, transferList });
        this.threadCfg.set(t, init.cfg);
        this.threadsStarted++;
      }
      w = t;
      if (!this.threads.has(t)) t.once("exit", () => this.threads.delete(t));
      this.threads.set(t, call.fun);
      unsubscribe = this.bus.subscribe((f) => t.postMessage({ k: "ev", frame: f } satisfies MainToRunner));
      const onMessage_ = (m: unknown) => {
        const kind = isMap(m) ? m.k : undefined;
        // a spare's note that it had loaded, handled after its call came: nothing to do
        if (kind === "loaded") return;
        if (kind === "sync" && Array.isArray((m as RunnerSync).batches)) return this.runnerEvents?.forwardSync?.((m as RunnerSync).batches);
        if (done) return;
        if (kind === "print") return onMessage({ type: "print", text: String((m as { text?: unknown }).text) });
        if (kind === "started") return onMessage({ type: "started" });
        // an orchestration's progress (Salt's fire_args): only its own salt/run/<jid>/args tag, never any other event
        if (kind === "fire") {
          const f = m as { tag?: unknown; data?: unknown };
          if (jid && f.tag === `salt/run/${jid}/args`) this.runnerEvents?.fireLocal(f.tag, f.data ?? {});
          return;
        }
        if (kind === "return" && (m as { packed?: unknown }).packed instanceof Uint8Array && !answered) {
          // the caller is answered now; the event waits for the job record (`recorded`)
          answered = { packed: (m as { packed: Uint8Array }).packed, success: (m as { success?: unknown }).success !== false };
          if (keptWarm(call.fun) && !this.stopping) [inWarmSoon, this.warmSoon] = [true, this.warmSoon + 1];
          onMessage({ type: "return", packed: answered.packed });
          return;
        }
        if (kind === "recorded" && answered) {
          leaveWarmSoon();
          fireReturned();
          // the thread goes to the next such call waiting for it, or waits for one (runner-thread.ts runs the same
          // keptWarm test)
          if (keptWarm(call.fun)) this.handOn(t, detach);
          else void this.endRunner(t);
          this.releaseWarmWaiters();
          return;
        }
        if (kind === "error") failed(String((m as { message?: unknown }).message), (m as { unavailable?: unknown }).unavailable === true);
        else failed(`runner ${call.fun} sent an unknown message`);
        this.releaseWarmWaiters();
        void this.endRunner(t);
      };
      // policy: the call's client gets the error (the kit has logged it); the thread is gone
      const onError = (e: Error) => {
        if (!done) failed(`runner ${call.fun} failed: ${e.message}`);
        this.releaseWarmWaiters();
      };
      const onExit = (code: number) => {
        if (!done) failed(`runner ${call.fun} stopped without a result (exit code ${code})`);
        this.releaseWarmWaiters();
      };
      const detach = () => {
        t.off("message", onMessage_);
        t.off("error", onError);
        t.off("exit", onExit);
      };
      t.on("message", onMessage_);
      t.on("error", onError);
      t.on("exit", onExit);
    };
    const reuse = keptWarm(call.fun) ? this.takeWarm() : undefined;
    if (reuse || !keptWarm(call.fun) || this.warmSoon <= this.warmWaiters.length) launch(reuse);
    else {
      // a read-only jobs.* call whose warm thread is still writing the last call's record: it waits for that
      // thread (a few ms) rather than take the spare and make a new one start (warmHandoffWaitMs)
      let waiting = true;
      const take = (t: Worker | undefined) => {
        if (!waiting) return;
        waiting = false;
        clearTimeout(timer);
        const at = this.warmWaiters.indexOf(take);
        if (at >= 0) this.warmWaiters.splice(at, 1);
        if (abandoned === undefined) return launch(t);
        // its caller left meanwhile: the thread goes back, and the call ends failed without one
        if (t) this.handOn(t, () => {});
        failed(abandoned);
      };
      const timer = setTimeout(() => take(undefined), warmHandoffWaitMs);
      this.warmWaiters.push(take);
    }
    return {
      jid,
      // a caller that leaves before its answer (salt-run's Ctrl-C or a signal, a closed terminal) ends the runner, and
      // its job is recorded as failed (retcode 1), as Salt's runner, run in salt-run's own process, ends with it
      // (salt/scripts.py's SIGINT handler raises SystemExit in the runner; salt/client/mixins.py stores it failed). One
      // that leaves once answered leaves the job record to finish
      abandon: () => {
        if (done || answered || abandoned !== undefined) return;
        abandoned = `Exception occurred in runner ${call.fun}: its caller left before the return (salt-run ended by Ctrl-C or a signal); the runner was stopped`;
        log.info(`the caller of runner ${call.fun}${jid ? ` (jid ${jid})` : ""} left before its return: the runner is stopped and its job recorded as failed`);
        // a call still waiting for a thread ends when it gets one, or at its wait's end (launch's waiter)
        if (w) void this.endRunner(w, abandoned);
      },
    };
  }

  /**
   * A read-only jobs.* call's thread whose call is over: to the oldest call waiting for one, else kept warm (one at
   * most), else ended. `detach` takes the finished call's listeners off it.
   */
  private handOn(t: Worker, detach: () => void): void {
    const next = this.stopping ? undefined : this.warmWaiters.shift();
    if (next) {
      detach();
      next(t);
    } else if (!this.warm && !this.stopping) this.keepWarm(t, detach);
    else void this.endRunner(t);
  }

  /** Waiters beyond the threads still to come (one failed or was ended before its record) go on at once without one. */
  private releaseWarmWaiters(): void {
    while (this.warmWaiters.length > this.warmSoon) this.warmWaiters[this.warmWaiters.length - 1]!(undefined);
  }

  /**
   * The thread of the last read-only jobs.* call that ended well, waiting for the next such call (one at most): its
   * code compiled and its job cache open, it answers without a thread's start (registry.ts keptWarm).
   */
  private warm: Worker | undefined;
  /** The warm thread's idle listeners (removed when a call takes it). */
  private warmIdle: { exit: () => void; error: (e: Error) => void } | undefined;

  /** Keeps `w` (its call's listeners detached) as the warm thread; it ends on its own only by a fault. */
  private keepWarm(w: Worker, detach: () => void): void {
    detach();
    w.unref(); // an idle warm thread never keeps the process alive
    this.warm = w;
    const exit = () => {
      if (this.warm === w) [this.warm, this.warmIdle] = [undefined, undefined];
    };
    const error = (e: Error) => {
      log.warning(`the warm runner thread failed while idle: ${e.message}`);
      exit();
    };
    this.warmIdle = { exit, error };
    w.on("exit", exit);
    w.on("error", error);
  }

  /** The warm thread for a call (its idle listeners removed), or undefined when there is none. */
  private takeWarm(): Worker | undefined {
    const w = this.warm;
    if (w && this.warmIdle) {
      w.off("exit", this.warmIdle.exit);
      w.off("error", this.warmIdle.error);
    }
    [this.warm, this.warmIdle] = [undefined, undefined];
    return w;
  }

  /** The configuration object each runner thread was last given (its calls with the same one come without it). */
  private readonly threadCfg = new WeakMap<Worker, MasterConfig>();
  /** A runner thread loaded ahead of the next call (one at most; none before the first call, none once stopping). */
  private spare: Worker | undefined;
  /** Whether the spare has said it loaded and warmed up (`{k: "loaded"}`): a bench waits for it between calls. */
  spareLoaded = false;
  private stopping = false;

  private startSpare(): void {
    if (this.spare || this.stopping) return;
    this.threadsStarted++;
    const w = spawnThread({
      name: "runner (spare)",
      url: RUNNER_THREAD,
      workerData: { spare: true, log: threadLogSettings(), cfg: this.cfg } satisfies SpareRunnerData,
      onExit: () => {
        if (this.spare === w) this.spare = undefined;
      },
    });
    w.unref(); // an idle spare never keeps the process alive
    this.threadCfg.set(w, this.cfg);
    this.spare = w;
    this.spareLoaded = false;
    const loaded = (m: unknown) => {
      if (!isMap(m) || m.k !== "loaded") return;
      w.off("message", loaded);
      if (this.spare === w) this.spareLoaded = true;
    };
    w.on("message", loaded);
  }

  /**
   * Ends a runner thread: its zeromq sockets closed first (`stop` → `stopped`, src/runners/messages.ts), never a bare
   * terminate; with `abandoned`, the thread records its call's job as failed with that text first. Named in the logs
   * by its call; one blocked outside JavaScript is left after endThread's bound (threadsLeftRunning).
   */
  private endRunner(w: Worker, abandoned?: string): Promise<void> {
    return endThread(w, `runner ${this.threads.get(w) ?? "(between calls)"}`, { ask: { k: "stop", ...(abandoned !== undefined ? { abandoned } : {}) } satisfies MainToRunner, answer: "stopped" }, runnerSocketsCloseWaitMs);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    // calls waiting for a warm thread go on without one (they end with the rest, below)
    for (const take of [...this.warmWaiters]) take(undefined);
    // the spare and the warm thread are between calls: no request socket open, so terminate() is safe, and
    // awaited: a spare still loading would otherwise open the job cache after the master stopped
    const idle = [this.spare, this.takeWarm()].filter((w): w is Worker => w !== undefined).map((w) => w.terminate());
    this.spare = undefined;
    // runner threads still going (a scheduled or API runner) would write the job cache after the master stopped
    const exits = [...this.threads.keys()].map((w) => new Promise<void>((r) => w.once("exit", () => r())));
    let t: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([...exits, ...idle]), new Promise<void>((r) => (t = setTimeout(r, runnerStopWaitMs)))]);
    clearTimeout(t);
    // the rest are ended; one blocked outside JavaScript (a custom runner reading a FIFO, a hung network
    // filesystem) is left after endThread's bound, logged by its call
    await Promise.all([...this.threads.keys()].map((w) => this.endRunner(w)));
    // the spare and the warm thread (terminated above) run no call: bounded all the same
    let u: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(idle), new Promise<void>((r) => (u = setTimeout(r, threadExitWaitMs)))]);
    clearTimeout(u);
    // a client still connected (a CLI that connected and never asked, one stopped mid-call, an idle API client)
    // would hold close() forever: its connection ends here, and it reads "master closed the control connection"
    if (this.conns.size > 0) log.info(`control socket: closing ${this.conns.size} client connection(s) still open at shutdown`);
    for (const c of this.conns) c.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    rmSync(this.path, { force: true });
  }
}
