/**
 * The swarm's workers, seen from the parent: N minions split into `procs` contiguous slices, each slice
 * run by a forked worker process (or, with one slice, by a SwarmWorker inside this process). Events from
 * every worker go into one Collector.
 */
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { BrineError } from "../../src/shared/errors.js";
import { Collector } from "./collector.js";
import { minionId, type FromWorker, type MinionSettings, type ToWorker, type WorkerUsage } from "./events.js";
import { SwarmWorker } from "./worker.js";

interface Handle {
  send(m: ToWorker): void;
  indices: number[];
  kill(): void;
  /** the worker's process id (this process for an in-process slice) */
  pid: number;
}

export interface FleetOptions {
  settings: MinionSettings;
  minions: number;
  procs: number;
  /** run the single slice inside this process (default when procs = 1) */
  inProcess?: boolean;
  ioThreads?: number;
  /** ms to wait for each worker to load its minions; default 120000 */
  initTimeoutMs?: number;
}

export function slices(n: number, procs: number): number[][] {
  const out: number[][] = [];
  const per = Math.ceil(n / procs);
  for (let k = 0; k < procs; k++) {
    const lo = k * per;
    const hi = Math.min(n, lo + per);
    if (lo >= hi) break;
    out.push(Array.from({ length: hi - lo }, (_, j) => lo + j));
  }
  return out;
}

export class Fleet {
  readonly collector: Collector;
  private handles: Handle[] = [];
  private readyWaiters = new Map<Handle, (v: { loaded: number; fds: number } | Error) => void>();
  private byeWaiters = new Map<Handle, (u: WorkerUsage | undefined) => void>();
  readonly workerErrors: string[] = [];
  readonly initFds: number[] = [];
  private ownerOf: Handle[] = [];
  private doneWaiters = new Map<Handle, () => void>();

  constructor(private readonly opts: FleetOptions) {
    this.collector = new Collector(opts.minions, (i) => minionId(opts.settings, i));
  }

  private onMessage(h: Handle, m: FromWorker): void {
    switch (m.t) {
      case "ready":
        this.initFds.push(m.fds);
        this.readyWaiters.get(h)?.({ loaded: m.loaded, fds: m.fds });
        return;
      case "events":
        this.collector.ingest(m.batch);
        return;
      case "error":
        this.workerErrors.push(`${m.code}: ${m.detail}`);
        this.collector.error(null, "worker", `${m.code}: ${m.detail}`, Date.now());
        this.readyWaiters.get(h)?.(new BrineError("SWARM_WORKER", m.detail));
        return;
      case "bye":
        this.byeWaiters.get(h)?.(m.usage);
        return;
      case "done":
        this.doneWaiters.get(h)?.();
        return;
    }
  }

  private local(indices: number[]): Handle {
    // eslint-disable-next-line prefer-const
    let h: Handle;
    const w = new SwarmWorker((m) => queueMicrotask(() => this.onMessage(h, m)));
    h = { send: (m) => void w.handle(m), indices, kill: () => void w.handle({ t: "shutdown" }), pid: process.pid };
    return h;
  }

  private forked(indices: number[]): Handle {
    const entry = fileURLToPath(new URL("./worker-main.js", import.meta.url));
    const child: ChildProcess = fork(entry, [], { execArgv: [], stdio: ["ignore", "inherit", "inherit", "ipc"] });
    const h: Handle = {
      send: (m) => {
        if (child.connected) child.send(m);
      },
      indices,
      kill: () => {
        if (child.exitCode === null) child.kill("SIGKILL");
      },
      pid: child.pid!,
    };
    child.on("message", (m: FromWorker) => this.onMessage(h, m));
    child.on("exit", (code, sig) => {
      if (this.byeWaiters.has(h)) this.byeWaiters.get(h)!(undefined);
      const w = this.readyWaiters.get(h);
      if (w) w(new BrineError("SWARM_WORKER", `worker exited (${code ?? sig}) before it was ready`));
      if (code !== 0 && code !== null) this.workerErrors.push(`worker ${child.pid} exited with ${code}`);
    });
    return h;
  }

  /** Start the workers and have each load its minions (keys, sockets not yet open). */
  async init(): Promise<void> {
    const parts = slices(this.opts.minions, this.opts.procs);
    const inProcess = this.opts.inProcess ?? parts.length === 1;
    this.handles = parts.map((ix) => (inProcess ? this.local(ix) : this.forked(ix)));
    this.ownerOf = new Array(this.opts.minions);
    for (const h of this.handles) for (const i of h.indices) this.ownerOf[i] = h;
    const timeout = this.opts.initTimeoutMs ?? 120_000;
    await Promise.all(
      this.handles.map(
        (h) =>
          new Promise<void>((resolve, reject) => {
            const t = setTimeout(() => reject(new BrineError("SWARM_WORKER", `a worker did not load its minions within ${timeout} ms`)), timeout);
            this.readyWaiters.set(h, (v) => {
              clearTimeout(t);
              this.readyWaiters.delete(h);
              if (v instanceof Error) reject(v);
              else resolve();
            });
            h.send({ t: "init", init: { settings: this.opts.settings, indices: h.indices, ioThreads: this.opts.ioThreads ?? 1 } });
          }),
      ),
    );
  }

  /** Every minion starts now (the storm), or each after a random delay up to `startupDelayMs`. */
  startAll(startupDelayMs = 0): void {
    for (const h of this.handles) h.send({ t: "start", startupDelayMs });
  }

  /** Every minion starts, at most `inFlightPerWorker` starting at a time in each worker (a paced storm). */
  startPaced(inFlightPerWorker: number): void {
    for (const h of this.handles) h.send({ t: "start", inFlight: inFlightPerWorker });
  }

  /** Stop these minions and start them again after a random delay in [min, max] ms. */
  churn(indices: number[], minDelayMs: number, maxDelayMs: number): void {
    const per = new Map<Handle, number[]>();
    for (const i of indices) {
      const h = this.ownerOf[i];
      if (!h) continue;
      let l = per.get(h);
      if (!l) per.set(h, (l = []));
      l.push(i);
    }
    for (const [h, ix] of per) h.send({ t: "churn", indices: ix, minDelayMs, maxDelayMs });
  }

  /** The process ids of the workers (this process's own for an in-process slice). */
  pids(): number[] {
    return [...new Set(this.handles.map((h) => h.pid))];
  }

  /** Send `m` to every worker and resolve when each has answered "done" (a reauth or sendHeld round). */
  private round(m: ToWorker): Promise<void> {
    return Promise.all(
      this.handles.map(
        (h) =>
          new Promise<void>((resolve) => {
            this.doneWaiters.set(h, () => {
              this.doneWaiters.delete(h);
              resolve();
            });
            h.send(m);
          }),
      ),
    ).then(() => undefined);
  }

  /** Every up minion signs in again (`_auth` only), at most `inFlightPerWorker` at a time in each worker. */
  reauthAll(inFlightPerWorker: number): Promise<void> {
    return this.round({ t: "reauth", inFlight: inFlightPerWorker });
  }

  /** Minions hold (true) or send (false) the returns of the jobs they run. */
  holdReturns(on: boolean): void {
    for (const h of this.handles) h.send({ t: "holdReturns", on });
  }

  /** Every minion sends the returns it held, at most `inFlightPerWorker` minions at a time in each worker. */
  sendHeldReturns(inFlightPerWorker: number): Promise<void> {
    return this.round({ t: "sendHeld", inFlight: inFlightPerWorker });
  }

  /** Stop every minion and every worker; returns each worker's resource usage. */
  async shutdown(timeoutMs = 30_000): Promise<WorkerUsage[]> {
    const usages = await Promise.all(
      this.handles.map(
        (h) =>
          new Promise<WorkerUsage | undefined>((resolve) => {
            const t = setTimeout(() => {
              h.kill();
              resolve(undefined);
            }, timeoutMs);
            this.byeWaiters.set(h, (u) => {
              clearTimeout(t);
              this.byeWaiters.delete(h);
              resolve(u);
            });
            h.send({ t: "shutdown" });
          }),
      ),
    );
    return usages.filter((u): u is WorkerUsage => u !== undefined);
  }
}
