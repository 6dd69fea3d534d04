/**
 * The parent's view of the swarm, built from worker events: each minion's state and sign-in/start times,
 * each job's expected minions, publishes seen and returns acknowledged, and every bad condition (refused
 * or timed-out sign-ins, "bad load" replies, dropped publishes, failed returns), counted and listed.
 */
import { EventEmitter } from "node:events";
import type { SwarmEvent } from "./events.js";

export const errorListMax = 2000;
export const errorsListedPerKind = 200;

export type MinionState = "idle" | "up" | "failed" | "down";

export interface JobTrack {
  jid: string;
  fun: string;
  publishAt: number;
  /** when the publish request was answered */
  publishedAt: number;
  expected: Set<number>;
  /** minion → when it received the publish */
  received: Map<number, number>;
  /** expected minion → when the master acknowledged its return */
  returned: Map<number, number>;
  /** returns from minions that were not up when the job was published (still starting then) */
  extra: Map<number, number>;
  failed: Map<number, string>;
}

export interface ErrorEntry {
  minion: string;
  kind: string;
  detail: string;
  at: number;
}

export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export function sortedNums(xs: Iterable<number>): number[] {
  return [...xs].filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
}

export class Collector extends EventEmitter {
  readonly state: MinionState[];
  /** first accepted sign-in: ms from its start() (set even if the rest of its start then fails) */
  readonly authMs: number[];
  /** first full start (auth + SUB + pillar + events): ms from its start() */
  readonly upMs: number[];
  readonly upAt: number[];
  readonly authAt: number[];
  readonly jobs = new Map<string, JobTrack>();
  private readonly orphans = new Map<string, SwarmEvent[]>();
  readonly authResults = new Map<string, number>();
  /** sign-in results (and `try_timeout`, each timed-out try) by the second they came (floor of `at` / 1000): a storm's timeline (bench/auth-storm.ts) */
  readonly authBySecond = new Map<number, Map<string, number>>();
  readonly startFailures = new Map<string, number>();
  readonly drops = new Map<string, number>();
  readonly reauthReasons = new Map<string, number>();
  /** request timeouts (each followed by a resend on a fresh socket while tries remain), by command */
  readonly timeouts = new Map<string, number>();
  badLoads = 0;
  returnFailures = 0;
  problems = 0;
  readonly reconnectMs: number[] = [];
  reconnectFailures = 0;
  private readonly downAt = new Map<number, number>();
  readonly errors: ErrorEntry[] = [];
  errorCount = 0;
  readonly errorKinds = new Map<string, number>();
  upCount = 0;
  failedCount = 0;

  constructor(
    readonly n: number,
    private readonly idOf: (i: number) => string,
  ) {
    super();
    this.state = new Array<MinionState>(n).fill("idle");
    this.authMs = new Array<number>(n).fill(NaN);
    this.upMs = new Array<number>(n).fill(NaN);
    this.upAt = new Array<number>(n).fill(NaN);
    this.authAt = new Array<number>(n).fill(NaN);
  }

  private bump(m: Map<string, number>, k: string): void {
    m.set(k, (m.get(k) ?? 0) + 1);
  }

  /** A sign-in result (or `try_timeout`: one try of a payload timed out) in its second of the timeline. */
  private bumpSecond(at: number, what: string): void {
    const second = Math.floor(at / 1000);
    let bucket = this.authBySecond.get(second);
    if (!bucket) this.authBySecond.set(second, (bucket = new Map()));
    this.bump(bucket, what);
  }

  /** Count every error; list up to errorsListedPerKind of each kind (so a flood of one kind cannot hide the others). */
  error(i: number | null, kind: string, detail: string, at: number): void {
    this.errorCount++;
    this.bump(this.errorKinds, kind);
    if (this.errors.length < errorListMax && this.errorKinds.get(kind)! <= errorsListedPerKind) {
      this.errors.push({ minion: i === null ? "" : this.idOf(i), kind, detail, at });
    }
  }

  private setState(i: number, s: MinionState): void {
    const old = this.state[i];
    if (old === s) return;
    if (old === "up") this.upCount--;
    if (old === "failed") this.failedCount--;
    if (s === "up") this.upCount++;
    if (s === "failed") this.failedCount++;
    this.state[i] = s;
  }

  addJob(jid: string, fun: string, publishAt: number, expected: Iterable<number>): JobTrack {
    const job: JobTrack = { jid, fun, publishAt, publishedAt: Date.now(), expected: new Set(expected), received: new Map(), returned: new Map(), extra: new Map(), failed: new Map() };
    this.jobs.set(jid, job);
    const early = this.orphans.get(jid);
    if (early) {
      this.orphans.delete(jid);
      for (const e of early) this.apply(e);
    }
    this.emit("change");
    return job;
  }

  ingest(batch: SwarmEvent[]): void {
    for (const e of batch) this.apply(e);
    this.emit("change");
  }

  private jobFor(e: SwarmEvent & { jid: string }): JobTrack | undefined {
    const job = this.jobs.get(e.jid);
    if (!job) {
      let list = this.orphans.get(e.jid);
      if (!list) this.orphans.set(e.jid, (list = []));
      if (list.length < 100_000) list.push(e);
    }
    return job;
  }

  private apply(e: SwarmEvent): void {
    switch (e.k) {
      case "auth":
        this.bump(this.authResults, e.result);
        this.bumpSecond(e.at, e.result);
        if (e.result === "accepted" && e.reason === "start" && !Number.isFinite(this.authMs[e.i]!)) {
          this.authMs[e.i] = e.ms;
          this.authAt[e.i] = e.at;
        }
        if (e.result === "timeout") this.error(e.i, "auth_timeout", `sign-in attempt ${e.attempt} timed out (${e.reason})`, e.at);
        else if (e.result === "rejected") this.error(e.i, "auth_rejected", `the master rejected the key (${e.reason})`, e.at);
        else if (e.result === "full") this.error(e.i, "auth_full", "the master is full", e.at);
        else if (e.result === "error") this.error(e.i, "auth_invalid", e.detail ?? "sign-in reply refused", e.at);
        else if (e.result === "failed") this.error(e.i, "auth_failed", e.detail ?? "not a sign-in reply", e.at);
        else if (e.result === "pending" && e.attempt === 1) this.error(e.i, "auth_pending", "the key is pending on the master", e.at);
        return;
      case "up": {
        if (e.restart) {
          const down = this.downAt.get(e.i);
          if (down !== undefined) this.reconnectMs.push(e.at - down);
          this.downAt.delete(e.i);
        } else {
          this.upMs[e.i] = e.ms;
          this.upAt[e.i] = e.at;
        }
        this.setState(e.i, "up");
        return;
      }
      case "startFailed":
        this.bump(this.startFailures, e.code);
        if (this.downAt.has(e.i)) this.reconnectFailures++;
        this.setState(e.i, "failed");
        this.error(e.i, e.code.toLowerCase(), e.detail, e.at);
        return;
      case "down":
        // the parent marked it down when it asked (markDown); the worker's report only confirms it
        if (this.state[e.i] !== "up") return;
        this.downAt.set(e.i, e.at);
        this.setState(e.i, "down");
        return;
      case "publish": {
        const job = this.jobFor(e);
        if (job && !job.received.has(e.i)) job.received.set(e.i, e.at);
        return;
      }
      case "return": {
        const job = this.jobFor(e);
        if (!job) return;
        const into = job.expected.has(e.i) ? job.returned : job.extra;
        if (!into.has(e.i)) into.set(e.i, e.at);
        return;
      }
      case "returnFailed": {
        this.returnFailures++;
        const job = this.jobFor(e);
        if (job && job.expected.has(e.i)) job.failed.set(e.i, e.code);
        this.error(e.i, "return_failed", `${e.jid}: ${e.detail}`, e.at);
        return;
      }
      case "badLoad":
        this.badLoads++;
        this.error(e.i, "bad_load", `"bad load" reply to ${e.cmd}`, e.at);
        return;
      case "reauth":
        this.bump(this.reauthReasons, e.reason);
        return;
      case "drop":
        this.bump(this.drops, e.reason);
        if (e.reason !== "not-aes") this.error(e.i, `publish_${e.reason.replace(/-/g, "_")}`, e.detail ?? e.reason, e.at);
        return;
      case "timeout":
        this.bump(this.timeouts, e.what);
        if (e.what === "_auth") this.bumpSecond(e.at, "try_timeout");
        this.error(e.i, "timeout", `${e.what}: no reply (try ${e.attempt} of ${e.tries})`, e.at);
        return;
      case "problem":
        this.problems++;
        this.error(e.i, "problem", `${e.where}: ${e.detail}`, e.at);
        return;
    }
  }

  /** Resolve when `pred()` holds (checked after every batch), or after `timeoutMs` with false. */
  waitFor(pred: () => boolean, timeoutMs: number): Promise<boolean> {
    if (pred()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (v: boolean) => {
        clearTimeout(t);
        this.off("change", check);
        resolve(v);
      };
      const check = () => {
        if (pred()) done(true);
      };
      const t = setTimeout(() => done(pred()), Math.max(0, timeoutMs));
      this.on("change", check);
    });
  }

  /** The parent is about to cycle these minions: they count as down from now on, not when the worker says so. */
  markDown(indices: number[], at: number): void {
    for (const i of indices) {
      this.downAt.set(i, at);
      this.setState(i, "down");
    }
    this.emit("change");
  }

  upIndices(): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.n; i++) if (this.state[i] === "up") out.push(i);
    return out;
  }

  settledCount(): number {
    return this.upCount + this.failedCount;
  }
}
