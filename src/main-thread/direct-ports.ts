/**
 * The clear lane's batches on a MessagePort of each worker's own, past Piscina's task machinery. Piscina stays the
 * pool: it starts the workers, replaces one that dies, and runs every other task (ready, maintenance); a worker
 * is handed its port in an `attach` task (worker.ts) and its batches then come on it, one at a time (the clear
 * lane posts one batch per worker: req-pool.ts tasksPerWorker), their results back on it with their one buffer
 * transferred. Why: a sign-in is RSA work in one thread and the hop to it is paid per batch; Piscina's run (a task
 * record and async resource per task, its balancer's look at every worker, the port's ref and unref, an atomics
 * notify) and its worker side cost 40–60 µs of CPU a round trip more than a bare port (bench/RESULTS.md, session 14).
 *
 * A batch finds no free port (none attached yet, or its worker died and the new one has none yet): it goes through
 * Piscina as before. A port that closes (its worker ended) fails the batch on it, as Piscina fails a dead worker's
 * task, and a new worker (Piscina's `workerCreate`) gets a port at once.
 */
import { MessageChannel, type MessagePort } from "node:worker_threads";
import type { Piscina } from "piscina";
import { getLogger } from "../shared/log.js";
import type { AttachResult, BatchResult, BatchTask, DirectReply } from "../workers/req-handler/task.js";

const log = getLogger("brine.pool");

/** What the lane needs of Piscina: its `run`, and its worker events (a test gives a pool of its own). */
export type PortPool = Pick<Piscina, "run" | "on">;

interface Waiter {
  resolve: (r: BatchResult) => void;
  reject: (e: Error) => void;
}

export class DirectPorts {
  /** ports with no batch on them */
  private readonly free: MessagePort[] = [];
  /** ports with a batch on them, and who waits for its result */
  private readonly busy = new Map<MessagePort, Waiter>();
  private closed = false;
  /** the attach rounds under way, if any (every caller waits for the same) */
  private attaching: Promise<void> | undefined;

  constructor(
    private readonly pool: PortPool,
    /** the lane's threads: this many ports at most */
    private readonly threads: number,
  ) {
    // a worker Piscina starts in place of one that ended gets its port; the first ones get theirs in ready()
    // (req-pool.ts), once each has loaded: attach tasks queued before would hold a loading worker's turn
    pool.on("workerCreate", () => void (this.started && this.attach()));
  }

  /** set by the first attach(): from then on a new worker gets a port as it comes */
  private started = false;

  /** Batches sent on a port (not through the pool), for tests and counts. */
  batchesOnPorts = 0;

  /** Ports attached to live workers. */
  get size(): number {
    return this.free.length + this.busy.size;
  }

  /** Runs a batch on a free port, else through Piscina; every other task through Piscina. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- as Piscina's own run: the task decides the result
  run(task: unknown): Promise<any> {
    const port = (task as { kind?: string }).kind === "batch" ? this.free.pop() : undefined;
    if (!port) return this.pool.run(task);
    this.batchesOnPorts++;
    return new Promise<BatchResult>((resolve, reject) => {
      this.busy.set(port, { resolve, reject });
      // a batch on it keeps the process alive until its result, as Piscina's port does while a task runs
      port.ref();
      port.postMessage(task as BatchTask);
    });
  }

  /**
   * Hands each worker without a port one, through Piscina `attach` tasks (one per thread at once: the clear lane's
   * workers take one task each, so they reach distinct workers; a worker that has one says so and the spare is
   * closed). Rounds until every thread has one or a round attaches none (the next `workerCreate` tries again).
   */
  attach(): Promise<void> {
    this.started = true;
    this.attaching ??= this.attachRounds().finally(() => (this.attaching = undefined));
    return this.attaching;
  }

  private async attachRounds(): Promise<void> {
    while (!this.closed && this.size < this.threads) {
      // one ask per thread, so every idle worker gets one (the balancer gives an idle worker the first it sees)
      const asks = Array.from({ length: this.threads }, () => this.attachOne());
      const took = (await Promise.all(asks)).filter(Boolean).length;
      if (took === 0) break;
    }
  }

  private async attachOne(): Promise<boolean> {
    const { port1, port2 } = new MessageChannel();
    let r: AttachResult;
    try {
      r = (await this.pool.run({ kind: "attach", port: port2 }, { transferList: [port2] as never })) as AttachResult;
    } catch (e) {
      port1.close();
      log.warning(`clear lane: a worker's direct port was not attached (its batches go through the pool): ${(e as Error).message}`);
      return false;
    }
    if (!r.attached || this.closed) {
      port1.close();
      return false;
    }
    port1.on("message", (m: DirectReply) => this.onReply(port1, m));
    port1.on("close", () => this.onClose(port1));
    // a free port keeps no process alive (run() refs it while a batch is on it)
    port1.unref();
    this.free.push(port1);
    return true;
  }

  private onReply(port: MessagePort, m: DirectReply): void {
    const w = this.busy.get(port);
    if (!w) return;
    this.busy.delete(port);
    port.unref();
    // free before the waiter runs: its continuation posts the next batch
    this.free.push(port);
    if (m.error !== undefined) w.reject(new Error(m.error));
    else w.resolve(m.result);
  }

  /** The worker behind `port` ended: its batch fails (every frame still gets a reply), and it is forgotten. */
  private onClose(port: MessagePort): void {
    const i = this.free.indexOf(port);
    if (i >= 0) this.free.splice(i, 1);
    const w = this.busy.get(port);
    this.busy.delete(port);
    w?.reject(new Error("request worker ended with a batch on its direct port"));
  }

  /** Closes every port (the pool is being destroyed); batches on them fail. */
  close(): void {
    this.closed = true;
    for (const p of [...this.free, ...this.busy.keys()]) p.close();
  }
}
