/**
 * The one style of messages between brine's threads (docs/ARCHITECTURE.md, "One RPC style"): each port
 * carries a typed union of plain messages told apart by `k`; a call is a message with an `id`, answered by
 * `{k: "res", id, ...}` or `{k: "err", id, code, text}`; streams (events, prints, bus frames) are messages
 * without an id. Payload bytes are transferred, never cloned twice. The peer proxy's port
 * (src/workers/raft/peer-proxy-wire.ts) is this style with per-turn batching on top.
 *
 * This module is the calling side's bookkeeping: ids, the callers waiting, their deadlines on one coarse
 * timer (never a Node timer per call), and errors that cross a port keeping their BrineError code.
 */
import { BrineError, ERR, isBrineError, type ErrCode } from "./errors.js";
import { CoarseTimer, type TimerHandle } from "./coarse-timer.js";

/** The deadlines of calls between threads (tens of seconds each): one coarse timer per thread, 250 ms ticks. */
const callTimer = new CoarseTimer(250);

/** An error as it crosses a port: its catalogue code and its exact text. */
export interface PortError {
  code: string;
  text: string;
}

/** The answer to a call that failed, for any thrown value; `fallback` names an error without a code. */
export function portError(e: unknown, fallback: ErrCode): PortError {
  return { code: isBrineError(e) ? e.code : fallback, text: e instanceof Error ? e.message : String(e) };
}

/** The error again on the calling side: a BrineError with the same code (the fallback for an unknown one) and text. */
export function revivePortError(f: PortError, fallback: ErrCode): BrineError {
  const e = new BrineError(f.code in ERR ? (f.code as ErrCode) : fallback);
  e.message = f.text;
  return e;
}

interface Waiting<A> {
  resolve(v: A): void;
  reject(e: Error): void;
  deadline: TimerHandle | undefined;
}

/**
 * A call's wait for its answer: the calls' own deadline (the default), or `untilGone` for the one call whose
 * answer is slow by nature and whose other side is known to be making progress (a thread's start, which
 * loads modules and restores from disk: tens of seconds on a loaded box). Such a call ends with its answer or
 * with rejectAll() when the other side is gone, never with a deadline.
 */
export type CallWait = "deadline" | "untilGone";

/** The calls one side of a port has made and not had answered. */
export class PortCalls<A> {
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting<A>>();

  /**
   * `timeoutMs`: how long a call waits for its answer, then fails with `onTimeout()`; `timer`: the coarse
   * timer the deadlines go on (this thread's one for calls by default).
   */
  constructor(
    private readonly timeoutMs: number,
    private readonly onTimeout: () => Error,
    private readonly timer: CoarseTimer = callTimer,
  ) {}

  /** Calls `post` with a fresh id; resolves with the answer to that id. */
  call(post: (id: number) => void, wait: CallWait = "deadline"): Promise<A> {
    const id = this.nextId++;
    return new Promise<A>((resolve, reject) => {
      const deadline =
        wait === "untilGone"
          ? undefined
          : this.timer.after(this.timeoutMs, () => {
              if (this.waiting.delete(id)) reject(this.onTimeout());
            });
      this.waiting.set(id, { resolve, reject, deadline });
      try {
        post(id);
      } catch (e) {
        this.take(id);
        reject(e as Error);
      }
    });
  }

  /** The answer to call `id` (false when nobody waits for it: answered, timed out, or never made). */
  resolve(id: number, value: A): boolean {
    const w = this.take(id);
    w?.resolve(value);
    return w !== undefined;
  }

  /** Call `id` failed on the other side. */
  reject(id: number, e: Error): boolean {
    const w = this.take(id);
    w?.reject(e);
    return w !== undefined;
  }

  /** Every call still waiting fails with `e` (the other side is gone or the port closes). */
  rejectAll(e: Error): void {
    for (const id of [...this.waiting.keys()]) this.reject(id, e);
  }

  get inFlight(): number {
    return this.waiting.size;
  }

  private take(id: number): Waiting<A> | undefined {
    const w = this.waiting.get(id);
    if (!w) return undefined;
    this.waiting.delete(id);
    w.deadline?.cancel();
    return w;
  }
}
