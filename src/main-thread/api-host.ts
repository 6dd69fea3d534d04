/**
 * The main thread's side of the HTTP API: starts the API thread (src/api/thread.ts) when the master's
 * configuration has a `rest_cherrypy:` or `brine_api:` mapping, and carries its clear requests into
 * the request lanes and their replies back. The API thread holds no key and decides nothing: every
 * login, publish, runner and wheel call is a clear request the request workers authenticate and
 * authorize exactly as one from salt-api over the request port. The host forwards bytes only. A thread
 * that dies after it started is restarted (a few times, then the API stays down, logged critical); the
 * replies still due to the dead thread are dropped, never handed to its successor, whose request ids
 * start again at 1.
 */
import type { Worker } from "node:worker_threads";
import type { MasterConfig } from "../shared/config/defaults.js";
import { BrineError } from "../shared/errors.js";
import { getLogger } from "../shared/log.js";
import type { ApiInit, ApiTag, ApiToMain, MainToApi } from "../api/messages.js";
import { apiConfigured, apiThreadConfig, readApiOptions } from "../api/options.js";
import { endThread, spawnThread, threadLogSettings } from "../shared/thread-kit.js";

const log = getLogger("brine.api");

/** How long a start may take before the master gives up on the API thread. */
export const apiStartMs = 15_000;
/** How long a stopping master waits for the API thread to close its listener. */
export const apiStopMs = 5_000;
/** A thread that exits after it listened is restarted after this delay, ms ... */
export const restartDelayMs = 1_000;
/** ... at most this many times within restartWindowMs; then the API stays down (logged critical). */
export const restartsMax = 5;
export const restartWindowMs = 10 * 60_000;

export interface ApiHostDeps {
  /** submit a clear request body to the request lanes; false when the lane is full or the master stops */
  submit(body: Buffer, tag: ApiTag, source?: string): boolean;
  /** the reply sent at once when `submit` refuses */
  refusedReply(): Buffer;
  /** fire an event on this master's bus (webhooks) */
  fire(tag: string, data: unknown): void;
}

export function isApiTag(tag: unknown): tag is ApiTag {
  return typeof tag === "object" && tag !== null && !Array.isArray(tag) && typeof (tag as ApiTag).api === "number";
}

export class ApiHost {
  private stopped = false;
  private worker: Worker | undefined;
  /** which thread a request came from: replies to a thread that has since died are dropped, never given to its successor */
  private generation = 0;
  private readonly restarts: number[] = [];
  port = 0;

  private constructor(
    private readonly cfg: MasterConfig,
    private readonly deps: ApiHostDeps,
  ) {}

  /** Starts the API thread when configured (undefined otherwise); options are checked here, before the thread. */
  static async start(cfg: MasterConfig, deps: ApiHostDeps): Promise<ApiHost | undefined> {
    if (!apiConfigured(cfg)) return undefined;
    readApiOptions(cfg); // a bad option stops the master's start with CONFIG_INVALID
    const host = new ApiHost(cfg, deps);
    await host.spawn();
    return host;
  }

  /** One API thread, resolved once it listens; a thread that exits later is restarted (restartsMax in restartWindowMs). */
  private async spawn(): Promise<void> {
    const init: ApiInit = { cfg: apiThreadConfig(this.cfg), log: threadLogSettings() };
    // policy: restarted after an exit (restartsMax in restartWindowMs); an error is logged by the kit
    const w = spawnThread({ name: "api", url: new URL("../api/thread.js", import.meta.url), workerData: init });
    const gen = ++this.generation;
    this.worker = w;
    let listening = false;
    const ready = new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new BrineError("API_START", `no answer within ${apiStartMs} ms`)), apiStartMs);
      w.on("message", (m: ApiToMain) => {
        if (m.k === "listening") {
          clearTimeout(t);
          listening = true;
          this.port = m.port;
          resolve();
        } else if (m.k === "failed") {
          clearTimeout(t);
          reject(new BrineError("API_START", m.message));
        } else this.onMessage(m, gen);
      });
      w.once("error", (e) => {
        clearTimeout(t);
        reject(new BrineError("API_START", e.message));
      });
      w.once("exit", (code) => {
        clearTimeout(t);
        if (this.stopped || this.worker !== w) return;
        this.worker = undefined;
        if (!listening) return reject(new BrineError("API_START", `thread exited with code ${code}`));
        this.restartAfterExit(code);
      });
    });
    try {
      await ready;
    } catch (e) {
      if (this.worker === w) this.worker = undefined;
      await endThread(w, "api", { ask: { k: "stop" } satisfies MainToApi, answer: "stopped" }, apiStopMs);
      throw e;
    }
  }

  private restartAfterExit(code: number): void {
    const now = Date.now();
    while (this.restarts.length && now - this.restarts[0]! > restartWindowMs) this.restarts.shift();
    if (this.restarts.length >= restartsMax) {
      log.critical(`HTTP API thread exited (code ${code}) ${restartsMax} times within ${restartWindowMs / 1000} s; the API stays down until the master restarts`);
      return;
    }
    this.restarts.push(now);
    log.error(`HTTP API thread exited (code ${code}); restarting it in ${restartDelayMs} ms`);
    setTimeout(() => {
      if (this.stopped) return;
      this.spawn().catch((e: Error) => log.critical(`HTTP API thread could not be restarted: ${e.message}; the API stays down until the master restarts`));
    }, restartDelayMs).unref();
  }

  private onMessage(m: ApiToMain, gen: number): void {
    if (m.k === "req") {
      const body = Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength);
      const tag: ApiTag = { api: m.id, gen };
      // the HTTP client's address goes with the request: the request worker's audit line and login throttle use it
      if (!this.deps.submit(body, tag, typeof m.source === "string" ? m.source.slice(0, 64) : undefined)) this.reply(tag, this.deps.refusedReply());
    } else if (m.k === "fire") {
      this.deps.fire(m.tag, m.data);
    }
  }

  /** A request worker's reply to one of the API thread's requests (dropped when that thread is gone). */
  reply(tag: ApiTag, body: Buffer): void {
    if (this.stopped || !this.worker || tag.gen !== this.generation) return;
    const copy = new Uint8Array(body.byteLength);
    copy.set(body);
    const msg: MainToApi = { k: "res", id: tag.api, body: copy };
    this.worker.postMessage(msg, [copy.buffer]);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const w = this.worker;
    if (!w) return;
    // the thread closes its request sockets, its connections and its listener, then it is ended
    await endThread(w, "api", { ask: { k: "stop" } satisfies MainToApi, answer: "stopped" }, apiStopMs);
  }
}
