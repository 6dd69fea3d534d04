/**
 * The automation thread's host on the main thread: starts the thread when `reactor:` or `schedule:` has anything
 * (their options are checked first: a bad one stops the master's start with CONFIG_INVALID), feeds it the bus
 * frames its tag globs select, fires the events it asks for, and relays the control socket's reactor.* and
 * schedule.* requests.
 *
 * The only cost on the main thread per bus frame is reading the tag out of the frame's first bytes (the frame
 * layout of src/shared/event-frame.ts: no msgpack decoding) and testing it against the globs: a tag no reaction
 * names is never copied or posted, so returns pay nothing for the reactor. A selected frame is copied once and
 * transferred.
 */
import type { Worker } from "node:worker_threads";
import type { MasterConfig } from "../shared/config/defaults.js";
import { getLogger } from "../shared/log.js";
import { BrineError } from "../shared/errors.js";
import { fnmatchToRegExp } from "../lib/targeting/index.js";
import { automationDrainMsMax, type AutomationInit, type AutomationRequest, type FromAutomation, type ToAutomation } from "../automation/messages.js";
import { automationWanted, readAutomationOptions } from "../automation/options.js";
import { parseJob } from "../automation/schedule.js";
import { endThread, spawnThread, threadLogSettings } from "../shared/thread-kit.js";
import { PortCalls, revivePortError } from "../shared/port-calls.js";

const log = getLogger("brine.automation");

/** `{"head": {}, "body": ` as packEvent writes it. */
const FRAME_HEAD = Buffer.from([0x82, 0xa4, ...Buffer.from("head"), 0x80, 0xa4, ...Buffer.from("body")]);
/** Tags longer than this are not looked at by the filter (and so never react). */
export const tagBytesMax = 1024;
/** How long the master's start waits for the automation thread, ms. */
const startWaitMs = 60_000;
/** How long a stopping master waits for the thread to close its sockets beyond its drain (AutomationDeps.stopDrainMs), ms. */
const stopCloseWaitMs = 2_000;
/** How long a control request waits for the thread, ms. */
const requestTimeoutMs = 30_000;

/** The tag of a bus frame (its first bytes), or undefined when the frame is not laid out as brine packs it. */
export function tagOfFrame(frame: Buffer): string | undefined {
  if (frame.length < FRAME_HEAD.length + 2 || frame.compare(FRAME_HEAD, 0, FRAME_HEAD.length, 0, FRAME_HEAD.length) !== 0) return undefined;
  let pos = FRAME_HEAD.length;
  const b = frame[pos]!;
  pos += b === 0xc4 ? 2 : b === 0xc5 ? 3 : b === 0xc6 ? 5 : Infinity;
  if (pos >= frame.length) return undefined;
  const end = frame.indexOf("\n\n", pos, "latin1");
  if (end < 0 || end - pos > tagBytesMax) return undefined;
  return frame.toString("utf8", pos, end);
}

export interface AutomationDeps {
  /** every bus frame, from now on; returns an unsubscribe */
  subscribe(fn: (frame: Buffer) => void): () => void;
  fire(tag: string, data: unknown): void;
  cluster?: () => AutomationInit["cluster"];
  /** how long a stop lets reactions and scheduled calls in flight finish, ms (default and most: automationDrainMsMax) */
  stopDrainMs?: number;
}

export class AutomationHost {
  private globs: RegExp[] = [];
  private unsubscribe: (() => void) | undefined;
  /** control requests waiting for the thread's answer */
  private readonly calls = new PortCalls<unknown>(requestTimeoutMs, () => new BrineError("THREAD_NO_ANSWER", `automation, within ${requestTimeoutMs} ms`));
  private stopped = false;
  private exited = false;

  private constructor(
    private readonly worker: Worker,
    private readonly drainMs: number,
  ) {}

  /**
   * Starts the thread when there is a reactor or a schedule (undefined otherwise) and waits until it is ready
   * (its first globs message), so an event fired once the master is up already reacts.
   */
  static async start(cfg: MasterConfig, deps: AutomationDeps): Promise<AutomationHost | undefined> {
    const opts = readAutomationOptions(cfg);
    if (!automationWanted(opts)) return undefined;
    // every schedule entry checked here, so a bad one stops the start (the thread parses them again)
    for (const [name, raw] of Object.entries(opts.schedule)) parseJob(name, raw);
    const init: AutomationInit = { cfg, log: threadLogSettings() };
    const cluster = deps.cluster?.();
    if (cluster) init.cluster = cluster;
    const w = spawnThread({ name: "automation", url: new URL("../automation/thread.js", import.meta.url), workerData: init });
    const host = new AutomationHost(w, Math.min(deps.stopDrainMs ?? automationDrainMsMax, automationDrainMsMax));
    w.on("message", (m: FromAutomation) => host.onMessage(m, deps));
    // policy: an error is logged (by the kit); on exit the reactor and schedule stop and requests to them fail
    w.on("exit", (code) => {
      host.exited = true;
      if (!host.stopped) log.error(`automation thread exited (${code}); reactor and schedule stopped`);
      host.unsubscribe?.();
      host.calls.rejectAll(new BrineError("THREAD_GONE", "automation"));
    });
    host.unsubscribe = deps.subscribe((frame) => host.offer(frame));
    const ready = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), startWaitMs);
      const on = (m: FromAutomation) => {
        if (m.k !== "globs") return;
        clearTimeout(timer);
        w.off("message", on);
        resolve(true);
      };
      w.on("message", on);
      w.once("exit", () => resolve(false));
    });
    if (!ready) {
      await host.stop();
      throw new BrineError("CONFIG_INVALID", "reactor/schedule: the automation thread did not start (see the log)");
    }
    return host;
  }

  private offer(frame: Buffer): void {
    if (this.globs.length === 0) return;
    const tag = tagOfFrame(frame);
    if (tag === undefined) return;
    for (const re of this.globs) {
      if (re.test(tag)) {
        const copy = new Uint8Array(frame);
        this.worker.postMessage({ k: "ev", frame: copy } satisfies ToAutomation, [copy.buffer]);
        return;
      }
    }
  }

  private onMessage(m: FromAutomation, deps: AutomationDeps): void {
    switch (m.k) {
      case "globs":
        this.globs = m.globs.map((g) => fnmatchToRegExp(g));
        break;
      case "fire":
        deps.fire(m.tag, m.data);
        break;
      case "res":
        this.calls.resolve(m.id, m.ret);
        break;
      case "err":
        this.calls.reject(m.id, revivePortError(m, "THREAD_CALL"));
        break;
      case "stopped":
        break;
    }
  }

  /** A reactor.* / schedule.* request from the control socket. */
  request(req: AutomationRequest): Promise<unknown> {
    if (this.exited) return Promise.reject(new BrineError("THREAD_GONE", "automation"));
    return this.calls.call((id) => this.worker.postMessage({ k: "req", id, req } satisfies ToAutomation));
  }

  /**
   * Stops taking events; the thread lets requests in flight finish (at most the drain, AutomationDeps.stopDrainMs), closes its
   * request sockets and answers, then it is ended (endThread; after its drain and `stopCloseWaitMs` anyway, logged).
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.unsubscribe?.();
    if (this.exited) return;
    await endThread(this.worker, "automation", { ask: { k: "stop", drainMs: this.drainMs } satisfies ToAutomation, answer: "stopped" }, this.drainMs + stopCloseWaitMs);
  }
}
