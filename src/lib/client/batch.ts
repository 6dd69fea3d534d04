/**
 * Batch runs (`salt -b N|N%`, `--static`, batch_safe_limit), as Salt 3007's salt/cli/batch.py schedules
 * them, sans I/O: `BatchPlan` is the pure scheduler (time passed in, no publishing, no printing: it returns
 * what to publish and what to show), `runBatch` is the loop that drives it with the clock, the publisher
 * and the printer injected.
 *
 * Salt's facts kept: the minions are those that answered a test.ping of the target (the others are told
 * "Minion X did not respond. No job will be sent."); at most N sub-jobs' minions are active at once, the
 * rest wait; --batch-wait S keeps a finished minion's slot busy S seconds more; each sub-job is published to
 * a list target; a return is shown as `{minion: ret, jid, retcode}` as each answers; a minion whose sub-job
 * ended without its return is shown with an empty return; --failhard stops at the first return with a
 * retcode above 0; the exit code is the highest retcode seen.
 */

/** A minion's return as the local client yields it (get_iter_returns): ret, and out / retcode / jid when present. */
export interface BatchPart {
  ret: unknown;
  out?: string;
  retcode?: unknown;
  jid?: string;
  failed?: boolean;
}

export type BatchEffect =
  | { type: "print"; text: string }
  /** show one minion's return (Salt's display_output of `data`, with `out` the return's outputter) */
  | { type: "show"; id: string; data: Record<string, unknown>; out?: string; retcode: number }
  /** failhard stopped the run at this minion */
  | { type: "failhard"; id: string };

/** Salt's get_bnum: "N" or "N%" of the minions (below 1 rounds up, else down); undefined when invalid. */
export function batchSize(batch: string | number, minions: number): number | undefined {
  const s = String(batch).trim();
  if (s.includes("%")) {
    const pct = Number(s.replaceAll("%", ""));
    if (s.replaceAll("%", "") === "" || !Number.isFinite(pct)) return undefined;
    const res = (pct / 100) * minions;
    return res < 1 ? Math.ceil(res) : Math.floor(res);
  }
  if (!/^[+-]?\d+$/.test(s)) return undefined;
  return Number(s);
}

export function invalidBatchText(batch: string | number): string {
  return `Invalid batch data sent: ${String(batch)}\nData must be in the form of %10, 10% or 3`;
}

/** Python's repr of a list of str, as "Executing run on ['a', 'b']" prints it. */
function pyList(ids: string[]): string {
  return "[" + ids.map((i) => `'${i.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`).join(", ") + "]";
}

/** A retcode as the batch reads it: a multi-function job's map gives its highest, anything else not a number 0. */
export function partRetcode(v: unknown): number {
  if (v && typeof v === "object" && !Array.isArray(v)) {
    const vals = Object.values(v as Record<string, unknown>).map(Number).filter(Number.isFinite);
    return vals.length ? Math.max(...vals) : 0;
  }
  const n = Number(v ?? 0);
  return Number.isFinite(n) ? n : 0;
}

interface SubJob {
  minions: string[];
  active: boolean;
}

export class BatchPlan {
  private readonly toRun: string[];
  private readonly active: string[] = [];
  private readonly wait: number[] = [];
  private readonly done = new Map<string, unknown>();
  private readonly jobs = new Map<number, SubJob>();
  private nextKey = 1;
  private stopped = false;
  /** the highest retcode shown so far (the batch's exit code) */
  retcode = 0;

  /**
   * `minions`: those that answered the ping, in the order they are to run; `bnum` from batchSize;
   * `waitMs`: --batch-wait; `quiet`: --static (nothing printed but the returns at the end).
   */
  constructor(
    private readonly minions: string[],
    private readonly bnum: number,
    private readonly waitMs: number,
    private readonly failhard: boolean,
    private readonly quiet = false,
  ) {
    // Salt pops from the end of its list; ours runs in the given order
    this.toRun = [...minions].reverse();
  }

  /** What Salt prints first: the minions that did not answer the ping. */
  static downText(down: string[]): BatchEffect[] {
    return down.map((m) => ({ type: "print", text: `Minion ${m} did not respond. No job will be sent.` }));
  }

  get finished(): boolean {
    return this.stopped || this.done.size >= this.minions.length;
  }

  /** The returns kept so far ({minion: ret}), what --static prints. */
  returns(): Record<string, unknown> {
    return Object.fromEntries(this.done);
  }

  private freeWaits(now: number): void {
    let i = 0;
    while (i < this.wait.length && this.wait[i]! <= now) i++;
    if (i) this.wait.splice(0, i);
  }

  private release(minion: string, now: number): void {
    const i = this.active.indexOf(minion);
    if (i < 0) return;
    this.active.splice(i, 1);
    if (this.waitMs) this.wait.push(now + this.waitMs);
  }

  /**
   * The next sub-job to publish now, if a slot is free: its minions (the caller publishes them as a list
   * target and reports its returns under the key), with the line Salt prints.
   */
  next(now: number): { key: number; minions: string[]; effects: BatchEffect[] } | undefined {
    if (this.finished) return undefined;
    if (this.waitMs && this.wait.length) this.freeWaits(now);
    const batch: string[] = [];
    if (this.toRun.length <= this.bnum - this.wait.length && this.active.length === 0) {
      while (this.toRun.length) batch.push(this.toRun.pop()!);
    } else {
      for (let i = 0; i < this.bnum - this.active.length - this.wait.length; i++) {
        if (this.toRun.length) batch.push(this.toRun.pop()!);
      }
    }
    if (!batch.length) return undefined;
    this.active.push(...batch);
    const key = this.nextKey++;
    this.jobs.set(key, { minions: [...batch], active: true });
    const effects: BatchEffect[] = this.quiet ? [] : [{ type: "print", text: `\nExecuting run on ${pyList([...batch].sort())}\n` }];
    return { key, minions: batch, effects };
  }

  /**
   * Returns that arrived (`parts`, each under its sub-job's key) and sub-jobs whose wait ended (`ended`):
   * what to show, in Salt's order. A minion of an ended sub-job that did not return is shown with an empty
   * return.
   */
  settle(parts: [number, string, BatchPart][], ended: number[], now: number): BatchEffect[] {
    const effects: BatchEffect[] = [];
    const got = new Map<string, BatchPart>();
    for (const [key, id, part] of parts) {
      got.set(id, part);
      const job = this.jobs.get(key);
      const i = job ? job.minions.indexOf(id) : -1;
      if (job && i >= 0) job.minions.splice(i, 1);
      else if (!this.quiet) effects.push({ type: "print", text: `minion ${id} was already deleted from tracker, probably a duplicate key` });
    }
    for (const key of ended) {
      const job = this.jobs.get(key);
      if (!job) continue;
      job.active = false;
      for (const m of job.minions) if (!got.has(m)) got.set(m, { ret: {} });
    }
    for (const [minion, part] of got) {
      if (this.active.includes(minion)) this.release(minion, now);
      let stop = false;
      if (part.failed) {
        if (!this.quiet) effects.push({ type: "print", text: `Minion '${minion}' failed to respond to job sent` });
        if (this.failhard) stop = true;
        this.done.set(minion, part);
      } else {
        const rc = "retcode" in part ? partRetcode(part.retcode) : 0;
        if (this.failhard && rc > 0) stop = true;
        if (rc > this.retcode) this.retcode = rc;
        this.done.set(minion, part.ret);
        // Salt shows the part with the return moved under the minion's id (retcode, jid, then the minion)
        const data: Record<string, unknown> = {};
        if ("retcode" in part) data.retcode = "retcode" in part && typeof part.retcode === "object" ? rc : part.retcode;
        if (part.jid !== undefined) data.jid = part.jid;
        data[minion] = part.ret;
        effects.push({ type: "show", id: minion, data, out: part.out, retcode: rc });
      }
      if (stop) {
        effects.push({ type: "failhard", id: minion });
        this.stopped = true;
        return effects;
      }
    }
    for (const key of ended) {
      const job = this.jobs.get(key);
      if (!job) continue;
      this.jobs.delete(key);
      for (const m of job.minions) this.release(m, now);
    }
    return effects;
  }
}

/** One sub-job's returns as the local client yields them; `missing` ones are those it gave up on. */
export type SubJobReturn = { id: string; part: BatchPart } | { id: string; missing: true };

export interface BatchIo {
  now(): number;
  sleep(ms: number): Promise<void>;
  /** publish the function to these minions (a list target) and yield their returns as they come */
  publish(minions: string[]): AsyncIterable<SubJobReturn>;
  effect(e: BatchEffect): void;
}

/** Drive a BatchPlan to its end: publish each sub-job as a slot frees, feed returns as they arrive. */
export async function runBatch(plan: BatchPlan, io: BatchIo, pollMs = 20): Promise<void> {
  const queue: [number, SubJobReturn | "end"][] = [];
  let wake: (() => void) | undefined;
  const pumps: Promise<void>[] = [];
  const pump = async (key: number, it: AsyncIterable<SubJobReturn>) => {
    try {
      for await (const r of it) {
        queue.push([key, r]);
        wake?.();
      }
    } finally {
      queue.push([key, "end"]);
      wake?.();
    }
  };
  while (!plan.finished) {
    const nx = plan.next(io.now());
    if (nx) {
      for (const e of nx.effects) io.effect(e);
      pumps.push(pump(nx.key, io.publish(nx.minions)).catch(() => undefined));
    }
    if (!queue.length) {
      await Promise.race([
        new Promise<void>((r) => (wake = r)),
        io.sleep(pollMs),
      ]);
      wake = undefined;
    }
    const parts: [number, string, BatchPart][] = [];
    const ended: number[] = [];
    for (const [key, r] of queue.splice(0)) {
      if (r === "end") ended.push(key);
      else if (!("missing" in r)) parts.push([key, r.id, r.part]);
    }
    if (parts.length || ended.length) for (const e of plan.settle(parts, ended, io.now())) io.effect(e);
  }
}
