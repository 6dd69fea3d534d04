/**
 * When the replies of one batch leave its request worker: a pure core (no I/O, no clock, no timers); the
 * worker (worker.ts) tells it what happened and does what it answers.
 *
 * A reply leaves as soon as the callback that made it ready is done (its microtasks drained: a flush), never
 * waiting for the slow frames of its batch (a pillar render, a file read, a return behind a busy disk, a
 * runner call):
 * - every frame ready at the first flush (the ordinary batch of returns, all made durable by one group
 *   commit): the batch's result carries them all, one message, as before (`result`);
 * - otherwise the ready ones go now as a part (`part`, a BatchPart on the lane's BroadcastChannel, with the
 *   effects fired so far), and every later flush sends another part, except the last one while the task
 *   still runs: those replies ride in the batch's result (`final`). The parts and results of a batch are
 *   numbered, and the main thread applies them in that order. A batch of returns whose writes two group
 *   commits made durable (lmdb-js starts committing before the batch's loop has queued them all) is then two
 *   messages, as when a batch waited whole; one past the hold too (its result carries the effects so far).
 * Separately, the batch gives back its worker's task slot (Piscina's `concurrentTasksPerWorker`) when its
 * last reply went or `batchHoldMsMax` after it started (`hold`), whichever comes first: a frame that waits
 * minutes (a runner call) holds no slot; its reply still goes in a part.
 */

/** What to do at a flush (once the callback in which one or more frames became ready is done). */
export type BatchFlush =
  /** every reply is ready and none went yet: they all go in the batch's result */
  | { kind: "result" }
  /** these frames' replies go now, in one part */
  | { kind: "part"; indices: number[] }
  /** the last replies, with the batch's result (numbered after the parts sent before it); the task ends */
  | { kind: "final"; indices: number[] };

export class BatchReplies {
  private settled = 0;
  private ready: number[] = [];
  private flushDue = false;
  /** a part went (or the hold passed): every later reply goes in a part, the result carries none */
  private streaming = false;
  private released = false;
  private done = false;

  constructor(readonly frames: number) {}

  /** Frame `index` has its reply. True when a flush must be scheduled (none is pending yet). */
  settle(index: number): boolean {
    if (this.done) throw new Error(`batch reply ${index} settled after the batch ended`);
    this.settled++;
    this.ready.push(index);
    if (this.flushDue) return false;
    this.flushDue = true;
    return true;
  }

  /** The scheduled flush runs: what to send. */
  flush(): BatchFlush {
    this.flushDue = false;
    if (!this.streaming && this.settled === this.frames) {
      this.done = true;
      this.released = true;
      this.ready = [];
      return { kind: "result" };
    }
    this.streaming = true;
    const indices = this.ready;
    this.ready = [];
    if (this.settled !== this.frames) return { kind: "part", indices };
    this.done = true;
    if (this.released) return { kind: "part", indices };
    this.released = true;
    return { kind: "final", indices };
  }

  /**
   * `batchHoldMsMax` passed since the batch started. True when the task must end now (its slot goes back;
   * the frames still running answer in parts).
   */
  hold(): boolean {
    if (this.released) return false;
    this.released = true;
    this.streaming = true;
    return true;
  }

  /** Every reply went (in the result or in parts). */
  get finished(): boolean {
    return this.done;
  }
}
