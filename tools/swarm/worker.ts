/**
 * One swarm worker: a slice of the minions, run in this process with their own ZeroMQ context (its socket
 * limit raised to what the slice needs). The parent drives it with `ToWorker` messages; it reports
 * `SwarmEvent`s in batches. The same class runs in a forked child (worker-main.ts) or, with `--procs 1`,
 * inside the parent.
 */
import { readdirSync } from "node:fs";
import type * as zmq from "zeromq";
import { BrineError, isBrineError } from "../../src/shared/errors.js";
import { nowMs, sharedTimer } from "../../src/shared/coarse-timer.js";
import type { CmdRunStandIn } from "../../src/lib/minion/functions.js";
import { defaultCmdRun } from "../../src/lib/minion/functions.js";
import { syntheticGrains } from "../../src/lib/minion/grains.js";
import { loadKeySlot } from "../../src/lib/minion/keys.js";
import { TestMinion } from "../../src/lib/minion/test-minion.js";
import { createContext } from "../../src/lib/zmq-req-client.js";
import { minionId, sourceIpOf, type FromWorker, type SwarmEvent, type ToWorker, type WorkerInit, type WorkerUsage } from "./events.js";

/** ZeroMQ sockets per minion: REQ + SUB, and two more for the SUB's connection monitor. */
export function socketsPerMinion(pubMonitor: boolean): number {
  return pubMonitor ? 4 : 2;
}

export function openFds(): number {
  try {
    return readdirSync("/proc/self/fd").length;
  } catch {
    return -1;
  }
}

const flushEveryMs = 100;
const flushAtEvents = 500;

export class SwarmWorker {
  private minions = new Map<number, TestMinion>();
  private ctx: zmq.Context | undefined;
  private init_: WorkerInit | undefined;
  private batch: SwarmEvent[] = [];
  private flushArmed = false;

  constructor(private readonly send: (m: FromWorker) => void) {}

  private emit(e: SwarmEvent): void {
    this.batch.push(e);
    if (this.batch.length >= flushAtEvents) this.flush();
    else if (!this.flushArmed) {
      this.flushArmed = true;
      sharedTimer.after(flushEveryMs, () => this.flush());
    }
  }

  flush(): void {
    this.flushArmed = false;
    if (this.batch.length === 0) return;
    const batch = this.batch;
    this.batch = [];
    this.send({ t: "events", batch });
  }

  async handle(msg: ToWorker): Promise<void> {
    try {
      switch (msg.t) {
        case "init":
          return this.setup(msg.init);
        case "start":
          if (msg.inFlight) return void this.startPaced(msg.indices ?? [...this.minions.keys()], msg.inFlight);
          return this.startMany(msg.indices ?? [...this.minions.keys()], msg.startupDelayMs ?? 0);
        case "churn":
          return this.churn(msg.indices, msg.minDelayMs, msg.maxDelayMs);
        case "shutdown":
          return await this.shutdown();
        case "reauth":
          await this.eachUp(msg.inFlight, (m) => m.reauth("bench"));
          this.flush();
          return this.send({ t: "done", what: "reauth" });
        case "holdReturns":
          for (const m of this.minions.values()) m.holdReturns = msg.on;
          return;
        case "sendHeld":
          await this.eachUp(msg.inFlight, (m) => m.sendHeldReturns());
          this.flush();
          return this.send({ t: "done", what: "sendHeld" });
      }
    } catch (e) {
      this.send({ t: "error", code: isBrineError(e) ? e.code : "SWARM_WORKER", detail: (e as Error).message });
    }
  }

  private setup(init: WorkerInit): void {
    const t0 = nowMs();
    const s = init.settings;
    this.init_ = init;
    // twice the sockets the minions hold: a REQ socket closed after a timeout counts against the context until
    // libzmq's reaper has it, and its replacement is made at once (under a loaded master, thousands at a time)
    this.ctx = createContext(2 * init.indices.length * socketsPerMinion(s.pubMonitor) + 64, init.ioThreads);
    const cmdRun: CmdRunStandIn | undefined =
      s.cmdRunOutput === undefined ? undefined : (cmd, self) => {
        const r = defaultCmdRun(cmd, self);
        return r.retcode === 127 ? { stdout: s.cmdRunOutput! } : r;
      };
    for (const i of init.indices) {
      const id = minionId(s, i);
      const sourceIp = sourceIpOf(s, i);
      const version = s.protocol === "v3" ? "3007.8" : "3006.8";
      const keys = loadKeySlot(s.keyDir, s.keySlots ? i % s.keySlots : i);
      void keys.privateKey; // parse now, not during the storm
      const m = new TestMinion({
        id,
        master: s.master,
        retPort: s.retPort,
        publishPort: s.publishPort,
        protocol: s.protocol,
        keys,
        grains: syntheticGrains(id, { index: i, ip: sourceIp, saltversion: version }),
        sourceIp,
        acceptanceWaitMs: s.acceptanceWaitMs,
        acceptanceWaitMaxMs: s.acceptanceWaitMaxMs,
        authDeadlineMs: s.authDeadlineMs,
        authTimeoutMs: s.authTimeoutMs,
        authTries: s.authTries,
        requestTimeoutMs: s.requestTimeoutMs,
        requestTries: s.requestTries,
        randomReauthDelayMs: s.randomReauthDelayMs,
        reconDefaultMs: s.reconDefaultMs,
        reconMaxMs: s.reconMaxMs,
        pubMonitor: s.pubMonitor,
        cmdRun,
        context: this.ctx,
      });
      this.wire(m, i);
      this.minions.set(i, m);
    }
    this.send({ t: "ready", loaded: this.minions.size, ms: nowMs() - t0, fds: openFds() });
  }

  private wire(m: TestMinion, i: number): void {
    m.on("auth", (a) => {
      this.emit({ k: "auth", i, result: a.result, ms: a.ms, attempt: a.attempt, reason: a.reason, detail: a.error?.message, at: nowMs() });
    });
    m.on("publish", (p) => this.emit({ k: "publish", i, jid: p.load.jid, at: p.at }));
    m.on("return", (r) => this.emit({ k: "return", i, jid: r.jid, at: r.ackAt, retcode: r.retcode }));
    m.on("returnFailed", (r) => this.emit({ k: "returnFailed", i, jid: r.jid, code: isBrineError(r.error) ? r.error.code : "ERROR", detail: r.error.message, at: nowMs() }));
    m.on("badLoad", (b) => this.emit({ k: "badLoad", i, cmd: String(b.cmd), at: nowMs() }));
    m.on("reauth", (r) => this.emit({ k: "reauth", i, reason: r.reason, at: nowMs() }));
    m.on("drop", (d) => this.emit({ k: "drop", i, reason: d.reason, detail: d.detail, at: nowMs() }));
    m.on("timeout", (t) => this.emit({ k: "timeout", i, what: t.what, attempt: t.attempt, tries: t.tries, at: nowMs() }));
    m.on("problem", (p) => this.emit({ k: "problem", i, where: p.where, detail: p.error.message, at: nowMs() }));
  }

  private startOne(i: number, restart: boolean): Promise<void> {
    const m = this.minions.get(i);
    if (!m) return Promise.resolve();
    let authMs = 0;
    const onAuth = (a: { result: string; ms: number }) => {
      if (a.result === "accepted") authMs = a.ms;
    };
    m.on("auth", onAuth);
    const t0 = nowMs();
    return m.start().then(
      () => {
        m.off("auth", onAuth);
        this.emit({ k: "up", i, ms: nowMs() - t0, authMs, at: nowMs(), restart });
      },
      (e: unknown) => {
        m.off("auth", onAuth);
        const code = isBrineError(e) ? e.code : "ERROR";
        if (code === "MINION_STOPPED") return;
        this.emit({ k: "startFailed", i, code, detail: (e as Error).message, at: nowMs() });
      },
    );
  }

  /** Run `f` on every running minion, at most `inFlight` at a time; a failure is reported by the minion's own events. */
  private async eachUp(inFlight: number, f: (m: TestMinion) => Promise<void>): Promise<void> {
    const todo = [...this.minions.values()].filter((m) => m.running);
    const lane = async () => {
      for (let m = todo.shift(); m; m = todo.shift()) await f(m).catch(() => undefined);
    };
    await Promise.all(Array.from({ length: Math.max(1, inFlight) }, lane));
  }

  /** Start these minions, at most `inFlight` starting at a time (a storm paced by the master's answers). */
  private async startPaced(indices: number[], inFlight: number): Promise<void> {
    const todo = [...indices];
    const lane = async () => {
      for (let i = todo.shift(); i !== undefined; i = todo.shift()) await this.startOne(i, false);
    };
    await Promise.all(Array.from({ length: Math.max(1, inFlight) }, lane));
  }

  /** Start these minions, each after a random delay in [0, maxDelayMs] (Salt's random_startup_delay). */
  private startMany(indices: number[], maxDelayMs: number): void {
    for (const i of indices) {
      if (maxDelayMs > 0) sharedTimer.after(Math.floor(Math.random() * (maxDelayMs + 1)), () => void this.startOne(i, false));
      else void this.startOne(i, false);
    }
  }

  /** Stop these minions now and start each again after a random delay in [min, max] ms (Salt's reconnect). */
  private churn(indices: number[], minDelayMs: number, maxDelayMs: number): void {
    for (const i of indices) {
      const m = this.minions.get(i);
      if (!m) continue;
      void m.stop();
      this.emit({ k: "down", i, at: nowMs() });
      const delay = minDelayMs + Math.floor(Math.random() * (Math.max(minDelayMs, maxDelayMs) - minDelayMs + 1));
      sharedTimer.after(delay, () => void this.startOne(i, true));
    }
  }

  private async shutdown(): Promise<void> {
    await Promise.all([...this.minions.values()].map((m) => m.stop()));
    this.flush();
    const fds = openFds();
    this.minions.clear();
    const ru = process.resourceUsage();
    const usage: WorkerUsage = {
      pid: process.pid,
      minions: this.init_?.indices.length ?? 0,
      rssMb: process.memoryUsage.rss() / 1048576,
      cpuUserS: ru.userCPUTime / 1e6,
      cpuSystemS: ru.systemCPUTime / 1e6,
      fds,
    };
    this.send({ t: "bye", usage });
  }
}

export function assertWorkerInit(x: unknown): asserts x is WorkerInit {
  if (!x || typeof x !== "object" || !Array.isArray((x as WorkerInit).indices)) throw new BrineError("SWARM_WORKER", "bad init message");
}
