/**
 * The master's local control socket (`sock_dir/brine_ctl.ipc`, mode 0600, main thread). Through it
 * `salt-run` runs runners inside the master — each call in its own runner thread, which sees the
 * master's shared state — and `salt-key` reports key changes so the master fires `salt/key`.
 *
 * Requests: {op: "run", fun, arg, kwarg} → a stream of {type: "print", text} then one
 * {type: "return", ret} or {type: "error", message}; {op: "fire", tag, data} → {type: "return"}.
 */
import net from "node:net";
import { chmodSync, rmSync } from "node:fs";
import path from "node:path";
import { Worker } from "node:worker_threads";
import type { MasterConfig } from "../config/defaults.js";
import { getLogger, loggingConfig } from "../log.js";
import type { EventBusServer } from "../events/bus-server.js";
import { FrameReader, frame } from "../transport/length-framing.js";
import type { RunnerInit, RunnerMessage } from "../runners/messages.js";
import type { RunnerClusterLink } from "./cluster-node.js";

const log = getLogger("brine.control");

export const CONTROL_SOCKET = "brine_ctl.ipc";
/** Runner threads at once; more calls are refused with a clear error. */
export const runnerThreadsMax = 16;

/** Tags salt-key may ask the master to fire. */
const FIREABLE = /^salt\/key$/;

export class ControlServer {
  private server: net.Server | undefined;
  private running = 0;
  readonly path: string;

  constructor(
    private readonly cfg: MasterConfig,
    private readonly bus: EventBusServer,
    private readonly waiting: () => number,
    private readonly fire: (tag: string, data: unknown) => void,
    private readonly rotate: () => void,
    /** with clustering on: the ring buffer and a fresh Raft worker port for each runner thread */
    private readonly clusterLink: () => RunnerClusterLink | undefined = () => undefined,
    /** runner jobs: a jid for each call and this master's own bus, for `salt/run/<jid>/new|ret` */
    private readonly runnerEvents?: { nextJid: () => string; fireLocal: (tag: string, data: unknown) => void },
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
      for (const m of msgs) this.handle(s, m as Record<string, unknown>);
    });
  }

  private handle(s: net.Socket, m: Record<string, unknown>): void {
    const reply = (v: unknown) => {
      if (!s.destroyed) s.write(frame(v));
    };
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
    if (m.op === "status") {
      reply({ type: "return", ret: { id: this.cfg.id, waiting: this.waiting(), runners: this.running } });
      return;
    }
    if (m.op !== "run" || typeof m.fun !== "string") {
      reply({ type: "error", message: "unknown control request" });
      return;
    }
    const started = this.startRunner(
      { fun: m.fun, arg: Array.isArray(m.arg) ? m.arg : [], kwarg: m.kwarg && typeof m.kwarg === "object" ? (m.kwarg as Record<string, unknown>) : {}, user: this.cfg.user },
      reply,
    );
    if (!started) return;
    s.on("close", () => started.abandon());
  }

  /**
   * Runs one runner call in its own thread: `salt/run/<jid>/new`, every message to `onMessage`, then
   * `salt/run/<jid>/ret`. Used by `salt-run` over this socket and by authorized clear `runner`
   * requests (those come with the jid their request worker gave them). Undefined when too many run.
   */
  startRunner(call: { fun: string; arg: unknown[]; kwarg: Record<string, unknown>; user: string; jid?: string }, onMessage: (m: RunnerMessage) => void): { abandon(): void } | undefined {
    if (this.running >= runnerThreadsMax) {
      const message = `too many runners at once (runnerThreadsMax ${runnerThreadsMax})`;
      onMessage({ type: "error", message });
      // a clear runner request was already answered with its jid: its waiter learns of the refusal here
      if (call.jid) this.runnerEvents?.fireLocal(`salt/run/${call.jid}/ret`, { fun: `runner.${call.fun}`, jid: call.jid, user: call.user, return: message, success: false });
      return undefined;
    }
    this.running++;
    const lc = loggingConfig();
    const init: RunnerInit = {
      cfg: this.cfg,
      fun: call.fun,
      arg: call.arg,
      kwarg: call.kwarg,
      log: { level: lc.level, file: lc.file ?? null, fileLevel: lc.fileLevel ?? null },
    };
    const link = this.clusterLink();
    if (link) init.cluster = link;
    const jid = call.jid ?? this.runnerEvents?.nextJid();
    const job = { fun: `runner.${call.fun}`, fun_args: [...init.arg, ...(Object.keys(init.kwarg).length ? [init.kwarg] : [])], jid, user: call.user };
    if (jid) this.runnerEvents?.fireLocal(`salt/run/${jid}/new`, job);
    const w = new Worker(new URL("../runners/runner-thread.js", import.meta.url), { workerData: init, transferList: link ? [link.raftPort] : [] });
    const unsubscribe = this.bus.subscribe((f) => w.postMessage({ type: "event", frame: f }));
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      this.running--;
      unsubscribe();
    };
    w.on("message", (msg: RunnerMessage) => {
      onMessage(msg);
      if (msg.type === "return" || msg.type === "error") {
        if (jid) {
          const ok = msg.type === "return";
          this.runnerEvents?.fireLocal(`salt/run/${jid}/ret`, { ...job, return: ok ? msg.ret : msg.message, success: ok });
        }
        finish();
        void w.terminate();
      }
    });
    w.on("error", (e) => {
      onMessage({ type: "error", message: e.message });
      if (jid) this.runnerEvents?.fireLocal(`salt/run/${jid}/ret`, { ...job, return: e.message, success: false });
      finish();
    });
    w.on("exit", () => finish());
    return {
      abandon: () => {
        if (!done) void w.terminate();
      },
    };
  }

  async stop(): Promise<void> {
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    rmSync(this.path, { force: true });
  }
}
