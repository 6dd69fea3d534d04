/**
 * Results of runner calls a request worker waits for (a minion's `publish.runner`, `minion_runner`): the
 * worker asks for the runner as a clear `runner` request does (Effects.runs, with `awaited` set), the main
 * thread starts its runner thread, and posts the result on this master's BroadcastChannel, where the waiting
 * worker picks it up by jid. Salt runs the runner inside the request worker; brine keeps runners in their own
 * threads, so the worker only waits (its reply goes in a part, worker.ts) and no lane thread runs runner code.
 */
import { BroadcastChannel } from "node:worker_threads";
import path from "node:path";
import type { MasterConfig } from "./config/defaults.js";
import type { RunnerMessage } from "../runners/messages.js";

/** What the main thread posts for one awaited runner call: its return's msgpack bytes, or why it failed. */
export interface RunnerResult {
  jid: string;
  packed?: Uint8Array;
  error?: string;
}

/** One channel per master (several masters may run in one process in tests): named by its socket directory and request port. */
export function runnerResultsChannel(cfg: MasterConfig): BroadcastChannel {
  const ch = new BroadcastChannel(`brine-runner-results:${path.resolve(cfg.sock_dir)}:${cfg.ret_port}`);
  ch.unref();
  return ch;
}

/** Main thread: the `onMessage` of an awaited runner launch; posts its result (prints are dropped, as Salt's Runner.run prints them on the master). */
export function relayRunnerResult(ch: BroadcastChannel, jid: string): (m: RunnerMessage) => void {
  return (m) => {
    if (m.type === "return") ch.postMessage({ jid, packed: m.packed } satisfies RunnerResult);
    else if (m.type === "error") ch.postMessage({ jid, error: m.message } satisfies RunnerResult);
  };
}

/** Request worker: waits for the results of the runner calls it launched. */
export class RunnerResultWaiter {
  private readonly waiting = new Map<string, (r: RunnerResult) => void>();
  private ch: BroadcastChannel | undefined;

  constructor(private readonly cfg: MasterConfig) {}

  /** The call's result, or `{error}` after `timeoutMs`. Register before the launch leaves the worker. */
  wait(jid: string, timeoutMs: number): Promise<RunnerResult> {
    if (!this.ch) {
      this.ch = runnerResultsChannel(this.cfg);
      this.ch.onmessage = (e: unknown) => {
        const r = (e as { data: RunnerResult }).data;
        const resolve = r && typeof r.jid === "string" ? this.waiting.get(r.jid) : undefined;
        if (resolve) resolve(r);
      };
    }
    return new Promise<RunnerResult>((resolve) => {
      const timer = setTimeout(() => done({ jid, error: `runner did not finish within ${Math.round(timeoutMs / 1000)} s` }), timeoutMs);
      const done = (r: RunnerResult) => {
        clearTimeout(timer);
        this.waiting.delete(jid);
        resolve(r);
      };
      this.waiting.set(jid, done);
    });
  }
}
