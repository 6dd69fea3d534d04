/**
 * Returns a request worker waits for (a minion's `minion_publish`, which answers once every targeted minion
 * returned), pushed from the event bus instead of polled: the worker asks the main thread to watch a jid
 * before it publishes the job, and the main thread, which puts every event on the bus (those of this master's
 * request workers and those the other masters forward, `cl/ev`), posts each `salt/job/<jid>/ret/<id>` frame
 * of a watched jid to the worker that watches it. That is Salt's own way (its minion_publish reads the returns
 * from the event bus with LocalClient.cmd_iter, then the job cache once at the end), and it costs no peer
 * message: with jobs placed on a ring, the returns that land on other masters reach this master's bus all the
 * same. Forwarding is best effort (a peer's queue full, a session down), so at the end a worker still missing
 * returns reads the job cache once (cluster-wide when placed).
 *
 * One BroadcastChannel per master, messages in the one port style (src/shared/port-calls.ts):
 * worker -> main `{k: "watch", from, id, jid, untilMs}` (answered `{k: "ok", to, id}` once the watch is in
 * place, or `{k: "err", to, id, code, text}`), `{k: "unwatch", from, jid}`; main -> worker
 * `{k: "ret", to, jid, minion, data}` (the event data's msgpack bytes). No timers: a watch ends with its
 * unwatch, or at `untilMs` (checked whenever a watch is added or a frame of its jid comes), so a worker that
 * died leaves nothing behind for long; at most returnWatchesMax jids are watched at once.
 */
import { BroadcastChannel } from "node:worker_threads";
import { randomBytes } from "node:crypto";
import path from "node:path";
import type { MasterConfig } from "./config/defaults.js";
import { BrineError } from "./errors.js";
import { jobReturnOfFrame } from "./event-frame.js";
import { PortCalls, portError, revivePortError, type PortError } from "./port-calls.js";
import { validJid } from "./protocol/ids.js";

/** jids watched at once on one master at most (a minion_publish watches one), count */
export const returnWatchesMax = 10_000;
/** how long a worker waits for the main thread to confirm a watch, ms */
export const watchAnswerTimeoutMs = 5_000;
/** a watch's deadline at most this far ahead (the longest minion_publish wait is 300 s), ms */
export const watchMsMax = 600_000;

export type ReturnWatchMsg =
  | { k: "watch"; from: string; id: number; jid: string; untilMs: number }
  | { k: "unwatch"; from: string; jid: string }
  | { k: "ok"; to: string; id: number }
  | ({ k: "err"; to: string; id: number } & PortError)
  | { k: "ret"; to: string; jid: string; minion: string; data: Uint8Array };

/** One channel per master (several masters may run in one process in tests): named by its socket directory and request port. */
export function jobReturnsChannel(cfg: MasterConfig): BroadcastChannel {
  const ch = new BroadcastChannel(`brine-job-returns:${path.resolve(cfg.sock_dir)}:${cfg.ret_port}`);
  ch.unref();
  return ch;
}

/** Main thread: the watched jids (jid -> worker token -> deadline), and the bus frames that are their returns. */
export class ReturnWatches {
  private readonly byJid = new Map<string, Map<string, number>>();

  constructor(
    private readonly post: (m: ReturnWatchMsg) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** jids watched now. */
  get size(): number {
    return this.byJid.size;
  }

  /** A worker's message. */
  onMessage(m: ReturnWatchMsg): void {
    if (!m || typeof m !== "object" || !("from" in m) || typeof m.from !== "string") return;
    if (m.k === "unwatch") {
      this.drop(m.jid, m.from);
      return;
    }
    if (m.k !== "watch" || !Number.isSafeInteger(m.id)) return;
    const { from: to, id } = m;
    if (!validJid(m.jid) || !Number.isFinite(m.untilMs)) {
      this.post({ k: "err", to, id, code: "PLACEMENT_BAD_MESSAGE", text: "a return watch names no jid or no deadline" });
      return;
    }
    const now = this.now();
    if (this.byJid.size >= returnWatchesMax) this.sweep(now);
    if (this.byJid.size >= returnWatchesMax && !this.byJid.has(m.jid)) {
      this.post({ k: "err", to, id, ...portError(new BrineError("PLACEMENT_WATCHES_FULL", `${returnWatchesMax} jobs watched at once`), "PLACEMENT_WATCHES_FULL") });
      return;
    }
    let w = this.byJid.get(m.jid);
    if (!w) this.byJid.set(m.jid, (w = new Map()));
    w.set(to, Math.min(m.untilMs, now + watchMsMax));
    this.post({ k: "ok", to, id });
  }

  /** Every bus frame: a return of a watched jid goes to its watchers (nothing is read while nothing is watched). */
  offer(frame: Uint8Array): void {
    if (this.byJid.size === 0) return;
    const r = jobReturnOfFrame(frame);
    const w = r && this.byJid.get(r.jid);
    if (!r || !w) return;
    const now = this.now();
    for (const [to, until] of w) {
      if (until < now) this.drop(r.jid, to);
      else this.post({ k: "ret", to, jid: r.jid, minion: r.id, data: r.data });
    }
  }

  private drop(jid: string, from: string): void {
    const w = this.byJid.get(jid);
    if (!w?.delete(from)) return;
    if (w.size === 0) this.byJid.delete(jid);
  }

  private sweep(now: number): void {
    for (const [jid, w] of this.byJid) for (const [from, until] of w) if (until < now) this.drop(jid, from);
  }
}

/** Main thread: serves the workers' watches on `ch` with the bus's frames (`subscribe`); returns the stop. */
export function serveReturnWatches(ch: BroadcastChannel, subscribe: (fn: (frame: Buffer) => void) => () => void): () => void {
  const watches = new ReturnWatches((m) => ch.postMessage(m));
  ch.onmessage = (e: unknown) => watches.onMessage((e as { data: ReturnWatchMsg }).data);
  const off = subscribe((f) => watches.offer(f));
  return () => {
    off();
    ch.onmessage = () => undefined;
  };
}

/** Request worker: watches jids' returns through the main thread. */
export class ReturnWatcher {
  private ch: BroadcastChannel | undefined;
  private readonly me = randomBytes(8).toString("hex");
  private readonly calls = new PortCalls<void>(watchAnswerTimeoutMs, () => new BrineError("THREAD_NO_ANSWER", `the main thread did not confirm a return watch within ${watchAnswerTimeoutMs / 1000} s`));
  private readonly onRet = new Map<string, (minion: string, data: Uint8Array) => void>();

  constructor(private readonly cfg: MasterConfig) {}

  /**
   * Watches `jid`'s returns until `untilMs` (or the stop it resolves with): `onReturn` gets each one's minion id
   * and event data bytes. Resolves once the main thread has the watch, so a job published after it cannot
   * return unseen.
   */
  async watch(jid: string, untilMs: number, onReturn: (minion: string, data: Uint8Array) => void): Promise<() => void> {
    const ch = this.channel();
    this.onRet.set(jid, onReturn);
    try {
      await this.calls.call((id) => ch.postMessage({ k: "watch", from: this.me, id, jid, untilMs } satisfies ReturnWatchMsg));
    } catch (e) {
      this.onRet.delete(jid);
      throw e;
    }
    return () => {
      this.onRet.delete(jid);
      ch.postMessage({ k: "unwatch", from: this.me, jid } satisfies ReturnWatchMsg);
    };
  }

  private channel(): BroadcastChannel {
    if (this.ch) return this.ch;
    const ch = (this.ch = jobReturnsChannel(this.cfg));
    ch.onmessage = (e: unknown) => {
      const m = (e as { data: ReturnWatchMsg }).data;
      if (!m || !("to" in m) || m.to !== this.me) return;
      if (m.k === "ok") this.calls.resolve(m.id, undefined);
      else if (m.k === "err") this.calls.reject(m.id, revivePortError(m, "THREAD_CALL"));
      else if (m.k === "ret" && m.data instanceof Uint8Array) this.onRet.get(m.jid)?.(m.minion, m.data);
    };
    return ch;
  }
}
