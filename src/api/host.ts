/**
 * The main thread's side of the HTTP API: starts the API thread (src/api/thread.ts) when the master's
 * configuration has a `rest_cherrypy:` or `brine_api:` mapping, and carries its clear requests into
 * the request lanes and their replies back. The API thread holds no key and decides nothing: every
 * login, publish, runner and wheel call is a clear request the request workers authenticate and
 * authorize exactly as one from salt-api over the request port. The host forwards bytes only.
 */
import { Worker } from "node:worker_threads";
import type { MasterConfig } from "../config/defaults.js";
import { BrineError } from "../errors.js";
import { getLogger, loggingConfig } from "../log.js";
import type { ApiInit, ApiTag, ApiToMain, MainToApi } from "./messages.js";
import { apiConfigured, readApiOptions } from "./options.js";

const log = getLogger("brine.api");

/** How long a start may take before the master gives up on the API thread. */
export const apiStartMs = 15_000;
/** How long a stopping master waits for the API thread to close its listener. */
export const apiStopMs = 5_000;

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
  port = 0;

  private constructor(private readonly worker: Worker) {}

  /** Starts the API thread when configured (undefined otherwise); options are checked here, before the thread. */
  static async start(cfg: MasterConfig, deps: ApiHostDeps): Promise<ApiHost | undefined> {
    if (!apiConfigured(cfg)) return undefined;
    readApiOptions(cfg); // a bad option stops the master's start with CONFIG_INVALID
    const init: ApiInit = { cfg, log: loggingConfig() };
    const w = new Worker(new URL("./thread.js", import.meta.url), { workerData: init });
    const host = new ApiHost(w);
    const ready = new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new BrineError("API_START", `no answer within ${apiStartMs} ms`)), apiStartMs);
      w.on("message", (m: ApiToMain) => {
        if (m.t === "listening") {
          clearTimeout(t);
          host.port = m.port;
          resolve();
        } else if (m.t === "failed") {
          clearTimeout(t);
          reject(new BrineError("API_START", m.message));
        } else host.onMessage(m, deps);
      });
      w.once("error", (e) => {
        clearTimeout(t);
        reject(new BrineError("API_START", e.message));
      });
      w.once("exit", (code) => {
        clearTimeout(t);
        if (!host.stopped) {
          log.error(`HTTP API thread exited (code ${code})`);
          reject(new BrineError("API_START", `thread exited with code ${code}`));
        }
      });
    });
    try {
      await ready;
    } catch (e) {
      host.stopped = true;
      await w.terminate();
      throw e;
    }
    return host;
  }

  private onMessage(m: ApiToMain, deps: ApiHostDeps): void {
    if (m.t === "req") {
      const body = Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength);
      const tag: ApiTag = { api: m.id };
      // the HTTP client's address goes with the request: the request worker's audit line and login throttle use it
      if (!deps.submit(body, tag, typeof m.source === "string" ? m.source.slice(0, 64) : undefined)) this.reply(tag, deps.refusedReply());
    } else if (m.t === "fire") {
      deps.fire(m.tag, m.data);
    }
  }

  /** A request worker's reply to one of the API thread's requests. */
  reply(tag: ApiTag, body: Buffer): void {
    if (this.stopped) return;
    const copy = new Uint8Array(body.byteLength);
    copy.set(body);
    const msg: MainToApi = { t: "rep", id: tag.api, body: copy };
    this.worker.postMessage(msg, [copy.buffer]);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    const exited = new Promise<void>((r) => this.worker.once("exit", () => r()));
    this.worker.postMessage({ t: "stop" } satisfies MainToApi);
    const t = setTimeout(() => void this.worker.terminate(), apiStopMs);
    await exited;
    clearTimeout(t);
  }
}
