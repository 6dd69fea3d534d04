/**
 * The one way brine starts a thread and a thread starts up (issue 14's worker kit).
 *
 * - `spawnThread` (on the thread's host, the main thread): names the thread, hands it its init data, logs an
 *   uncaught error with the thread's name, and calls the host's policy for errors and unexpected exits. The
 *   policies differ per thread on purpose; docs/ARCHITECTURE.md ("When a thread fails") lists them.
 * - `threadInit` (first line of a thread's entry): reads its init data and sets up logging from the `log`
 *   settings the host passed, so every thread logs in the master's format to the master's files.
 * - `endThread` (on the host): ends a thread that may hold zeromq.js sockets by asking it to close them first;
 *   a thread ended while one waits for a reply aborts the whole process (zeromq.js#411).
 *
 * The request workers are Piscina's: it spawns and replaces them, and their entry sets up logging from
 * Piscina's own workerData (src/workers/req-handler/worker.ts).
 */
import { writeFileSync } from "node:fs";
import { Worker, workerData, type ResourceLimits, type Transferable } from "node:worker_threads";
import { configureLogging, getLogger, loggingConfig, type LogConfig } from "./log.js";
import { answerHeapProbes } from "./heap-probe.js";

const log = getLogger("brine.threads");

/** After terminate(), how long a host waits for the thread's exit before it goes on without it, ms (endThread). */
export const threadExitWaitMs = 5_000;

/**
 * Threads a host ended and then stopped waiting for, by what they ran ("runner block.fifo (thread 7)"):
 * `terminate()` cannot end a thread blocked outside JavaScript, and Node's process.exit() waits for every thread to
 * end, so a process that must exit with one of these still there ends itself by SIGKILL instead
 * (`exitEvenWithThreadsLeft`). A thread that ends after all is taken off.
 */
export const threadsLeftRunning = new Set<string>();

export interface ThreadSpec {
  /** shown in logs and in the thread's name (`brine-<name>`) */
  name: string;
  /** the compiled entry, `new URL("…/thread.js", import.meta.url)` */
  url: URL;
  workerData: unknown;
  transferList?: readonly Transferable[];
  /** the thread's V8 heap bounds (node's Worker resourceLimits); a thread that reaches them ends with ERR_WORKER_OUT_OF_MEMORY (onError) */
  resourceLimits?: ResourceLimits;
  /** the host's policy for an uncaught error in the thread (after the kit logged it, unless `hostLogs`) */
  onError?: (e: Error) => void;
  /** the host logs the thread's error itself (one line with what it does about it), so the kit does not */
  hostLogs?: boolean;
  /** the host's policy for an exit; `expected` is what the host said through `stopping()` */
  onExit?: (code: number) => void;
}

export function spawnThread(spec: ThreadSpec): Worker {
  const w = new Worker(spec.url, {
    workerData: spec.workerData,
    name: `brine-${spec.name}`,
    ...(spec.transferList ? { transferList: spec.transferList as Transferable[] } : {}),
    ...(spec.resourceLimits ? { resourceLimits: spec.resourceLimits } : {}),
  });
  w.on("error", (e) => {
    if (!spec.hostLogs) log.error(`${spec.name} thread failed: ${e.stack ?? e.message}`);
    spec.onError?.(e);
  });
  if (spec.onExit) w.on("exit", spec.onExit);
  return w;
}

/**
 * A thread's init data, with logging set up from its `log` settings (absent: the defaults); with `name`, the
 * thread also answers heap probes under that name (src/shared/heap-probe.ts, `salt-run brine.memory`).
 */
export function threadInit<T extends { log?: LogConfig | null }>(name?: string): T {
  const init = workerData as T;
  if (init?.log) configureLogging(init.log);
  if (name) {
    answerHeapProbes(name);
    nameThisThread(name);
  }
  return init;
}

/** Linux's limit on a thread's name (`comm`), bytes without the NUL */
const THREAD_NAME_BYTES_MAX = 15;

/**
 * Gives the calling thread its OS name, `brine-<name>` cut to THREAD_NAME_BYTES_MAX bytes (Linux:
 * /proc/thread-self/comm), so that `top -H`, `perf` and /proc show which thread is which: otherwise every
 * worker, libuv's pool and V8's helpers are all `node`. Elsewhere (or if /proc refuses) the name stays.
 */
export function nameThisThread(name: string): void {
  try {
    writeFileSync("/proc/thread-self/comm", Buffer.from(`brine-${name}`).subarray(0, THREAD_NAME_BYTES_MAX));
  } catch {
    // no /proc/thread-self (not Linux): the thread keeps its name
  }
}

/** The master's logging settings as a thread's init data carries them (structured-clone safe). */
export function threadLogSettings(): { level: string; file: string | null; fileLevel: string | null } {
  const lc = loggingConfig();
  return { level: lc.level, file: lc.file ?? null, fileLevel: lc.fileLevel ?? null };
}

/**
 * How a thread is asked to close its sockets before it is ended: a message it answers (`{k: answer}`) once its
 * sockets are closed, or a call that resolves once they are (the Raft worker's `close`).
 */
export type ThreadClose = { ask: { k: string; [field: string]: unknown }; answer: string } | { close: () => Promise<unknown> };

/**
 * The one way a host ends a thread that may hold zeromq.js sockets: asks it to close them (`how`), then
 * terminates it once it has, or after `waitMs` or a failed close (logged). A thread ended while one of its
 * sockets waits for a reply aborts the whole process ("terminate called after throwing an instance of
 * 'Napi::Error'", zeromq.js#411), so no host ends such a thread with a bare terminate(). A thread that exits by
 * itself meanwhile is not terminated. Resolves once the thread has exited.
 */
export function endThread(w: Worker, name: string, how: ThreadClose, waitMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (w.threadId < 0) return resolve(); // it has exited already
    let pending = true;
    const done = () => {
      pending = false;
      clearTimeout(timer);
      w.off("message", onMessage);
    };
    const end = (why?: string) => {
      if (!pending) return;
      done();
      if (why) log.warning(`${name} thread ${why}: ending it anyway`);
      void terminateThread(w, name).then(resolve);
    };
    const onMessage = (m: unknown) => {
      if ("answer" in how && (m as { k?: unknown } | null)?.k === how.answer) end();
    };
    const timer = setTimeout(() => end(`did not close its sockets within ${waitMs} ms`), waitMs);
    w.once("exit", () => {
      done();
      resolve();
    });
    if ("ask" in how) {
      w.on("message", onMessage);
      w.postMessage(how.ask);
    } else {
      how.close().then(
        () => end(),
        (e: Error) => end(`failed to close its sockets (${e.message})`),
      );
    }
  });
}

/**
 * Terminates `w` and resolves once it has exited, or after threadExitWaitMs: terminate() cannot end a thread
 * blocked outside JavaScript (a read of a FIFO, a hung disk's fsync), and its own promise would wait for it for
 * ever. Such a thread is logged and recorded in threadsLeftRunning (one entry per thread, `name (thread id)`;
 * taken off if it exits after all). For a thread that holds no zeromq.js socket (the publisher, state-sync), or
 * one whose sockets are closed (endThread).
 */
export function terminateThread(w: Worker, name: string): Promise<void> {
  return new Promise<void>((resolve) => {
    if (w.threadId < 0) return resolve(); // it has exited already
    const label = `${name} (thread ${w.threadId})`;
    const exitTimer = setTimeout(() => {
      log.error(`${name} thread still running ${threadExitWaitMs} ms after it was ended: blocked outside JavaScript; going on without it`);
      threadsLeftRunning.add(label);
      resolve();
    }, threadExitWaitMs);
    w.once("exit", () => {
      clearTimeout(exitTimer);
      threadsLeftRunning.delete(label);
      resolve();
    });
    void w.terminate();
  });
}

/**
 * process.exit(code), unless a thread was left running (threadsLeftRunning): then process.exit would wait for it
 * for ever (Node joins every worker thread at exit), so the process says which and kills itself (SIGKILL).
 */
export function exitEvenWithThreadsLeft(code: number): never {
  if (threadsLeftRunning.size > 0) {
    log.critical(`exiting by SIGKILL: ${[...threadsLeftRunning].join(", ")} still running, blocked outside JavaScript (an exit would wait for it for ever)`);
    process.kill(process.pid, "SIGKILL");
  }
  process.exit(code);
}

/**
 * A thread's own close, step by step: every step runs whatever the ones before did (a step that throws must not
 * leave the sockets of the steps after it open when the host then ends the thread: zeromq.js#411 above); each
 * failure is logged, and the first is thrown once all have run.
 */
export async function closeInOrder(name: string, steps: readonly (readonly [what: string, step: () => unknown])[]): Promise<void> {
  let failed = false;
  let first: unknown;
  for (const [what, step] of steps) {
    try {
      await step();
    } catch (e) {
      log.error(`${name}: closing ${what} failed: ${(e as Error)?.message ?? String(e)}`);
      if (!failed) [failed, first] = [true, e];
    }
  }
  if (failed) throw first;
}
