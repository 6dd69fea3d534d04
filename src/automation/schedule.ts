/**
 * The master schedule (Salt's salt/utils/schedule.py as the master runs it): jobs from `schedule:` in the master
 * config, each a runner function (`function: jobs.list_jobs`) or, brine's addition, a wheel function
 * (`function: wheel.key.list_all`), with `args`/`kwargs`. Pure logic on an injected clock: `due(now)` says which
 * jobs fire now and `nextWake()` when to look again, so one timer serves every job.
 *
 * When a job fires (Salt's semantics):
 * - `seconds`/`minutes`/`hours`/`days` (summed): every interval, the first one interval after start
 *   (`run_on_start: True`: at start too);
 * - `cron`: croner's next match (5 fields as croniter; a 6-field expression is croner's, seconds FIRST);
 * - `once`: at that time, once (`once_fmt` is not supported: ISO `YYYY-MM-DDTHH:MM[:SS]`, local time);
 *   a time already past at start fires at once if it passed within the last `loop_interval` (Salt's window:
 *   its schedule looks once per loop_interval), never if it passed before that; the same for `when` times;
 * - `when`: a time or list of times: ISO date-times fire once, times of day (`15:30`, `3pm`, `3:30pm`) every day;
 *   Salt's dateutil phrases and pillar/grains `whens` names are not supported (CONFIG_INVALID);
 * - `splay`: N (1..N s) or {start, end} seconds added to each fire time, drawn anew each time;
 * - `range`: {start, end[, invert]} (same time formats as `when`): fires only inside (invert: outside);
 * - `maxrunning` (default 1, as Salt): a fire while that many runs of the job are still going is skipped;
 * - `enabled: False` skips the job; `schedule: {enabled: False}` skips all; `return_job: False` sends no
 *   `__schedule_return` event (the job is still a job with a jid in the job cache: brine's addition).
 * Only one of the interval, `cron`, `once` and `when` may be given (Salt refuses the mix too).
 */
import { Cron } from "croner";
import { BrineError } from "../shared/errors.js";

export interface ScheduleJob {
  name: string;
  /** the runner function, or the wheel function when `kind` is "wheel" (without its `wheel.` prefix) */
  fun: string;
  kind: "runner" | "wheel";
  args: unknown[];
  kwargs: Record<string, unknown>;
  intervalMs?: number;
  cron?: Cron;
  once?: number;
  when?: WhenTime[];
  splay?: { start: number; end: number };
  range?: { start: WhenTime; end: WhenTime; invert: boolean };
  maxrunning: number;
  runOnStart: boolean;
  returnJob: boolean | "nocache";
  enabled: boolean;
  /** the job's raw entry, as `schedule.list` shows it */
  raw: Record<string, unknown>;
}

/** An absolute instant (ms), or a time of day (seconds after local midnight) that recurs daily. */
export type WhenTime = { at: number } | { daily: number };

interface JobState {
  job: ScheduleJob;
  /** when it fires next (ms), splay included; null: never again */
  next: number | null;
  running: number;
  runs: number;
  skips: number;
}

function bad(option: string, why: string): never {
  throw new BrineError("CONFIG_INVALID", `${option}: ${why}`);
}

const ISO = /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2}))?$/;
const TIME = /^(\d{1,2})(?::(\d{2}))?(?::(\d{2}))?\s*([ap]m)?$/i;

/** A `when`/`range`/`once` time: ISO date-time (local) or a time of day. */
export function parseTime(v: unknown, option: string, allowDaily = true): WhenTime {
  if (typeof v !== "string") bad(option, `expected a time string, got ${JSON.stringify(v)}`);
  const s = v.trim();
  const iso = ISO.exec(s);
  if (iso) {
    const [y, mo, d, h, mi, se] = iso.slice(1).map((x) => Number(x ?? 0));
    const at = new Date(y!, mo! - 1, d!, h!, mi!, se!).getTime();
    if (Number.isNaN(at)) bad(option, `not a date: ${s}`);
    return { at };
  }
  const t = allowDaily ? TIME.exec(s) : null;
  if (t) {
    let h = Number(t[1]);
    const m = Number(t[2] ?? 0);
    const sec = Number(t[3] ?? 0);
    const ampm = t[4]?.toLowerCase();
    if (ampm) {
      if (h < 1 || h > 12) bad(option, `not a time: ${s}`);
      h = (h % 12) + (ampm === "pm" ? 12 : 0);
    }
    if (h > 23 || m > 59 || sec > 59) bad(option, `not a time: ${s}`);
    return { daily: h * 3600 + m * 60 + sec };
  }
  bad(option, `${JSON.stringify(s)} is not a time brine reads (ISO YYYY-MM-DDTHH:MM[:SS]${allowDaily ? ", HH:MM[:SS] or 3pm/3:30pm" : ""})`);
}

/** The instant of `w` on the day of `now` (daily) or its own instant. */
function instantOn(w: WhenTime, now: number, dayOffset = 0): number {
  if ("at" in w) return w.at;
  const d = new Date(now);
  return new Date(d.getFullYear(), d.getMonth(), d.getDate() + dayOffset, 0, 0, w.daily).getTime();
}

/** The first instant of `w` at or after `from`, or null. */
function nextOf(w: WhenTime, from: number): number | null {
  if ("at" in w) return w.at >= from ? w.at : null;
  const today = instantOn(w, from);
  return today >= from ? today : instantOn(w, from, 1);
}

function num(job: Record<string, unknown>, k: string, option: string): number {
  const v = job[k];
  if (v === undefined) return 0;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0) bad(`${option}.${k}`, "expected a non-negative number");
  return v;
}

/** One job entry of `schedule:` checked and compiled. */
export function parseJob(name: string, raw: Record<string, unknown>, defaultSplay?: unknown): ScheduleJob {
  const o = `schedule.${name}`;
  const fn = raw.function ?? raw.fun;
  if (typeof fn !== "string" || !/^[\w.]+$/.test(fn)) bad(`${o}.function`, "expected a runner function name (or wheel.<function>)");
  const wheel = fn.startsWith("wheel.");
  const args = raw.args ?? [];
  if (!Array.isArray(args)) bad(`${o}.args`, "expected a list");
  const kwargs = raw.kwargs ?? {};
  if (kwargs === null || typeof kwargs !== "object" || Array.isArray(kwargs)) bad(`${o}.kwargs`, "expected a map");
  const job: ScheduleJob = {
    name,
    fun: wheel ? fn.slice("wheel.".length) : fn,
    kind: wheel ? "wheel" : "runner",
    args,
    kwargs: kwargs as Record<string, unknown>,
    maxrunning: 1,
    runOnStart: raw.run_on_start === true,
    returnJob: raw.return_job === false ? false : raw.return_job === "nocache" ? "nocache" : true,
    enabled: raw.enabled !== false,
    raw,
  };
  const interval = num(raw, "seconds", o) + num(raw, "minutes", o) * 60 + num(raw, "hours", o) * 3600 + num(raw, "days", o) * 86400;
  const kinds = [interval > 0 ? "seconds/minutes/hours/days" : "", raw.cron !== undefined ? "cron" : "", raw.once !== undefined ? "once" : "", raw.when !== undefined ? "when" : ""].filter(Boolean);
  if (kinds.length === 0) bad(o, "needs one of seconds, minutes, hours, days, cron, once or when");
  if (kinds.length > 1) bad(o, `cannot use ${kinds.join(" and ")} together`);
  if (interval > 0) job.intervalMs = interval * 1000;
  if (raw.cron !== undefined) {
    if (typeof raw.cron !== "string") bad(`${o}.cron`, "expected a cron expression");
    try {
      job.cron = new Cron(raw.cron, { paused: true });
    } catch (e) {
      bad(`${o}.cron`, (e as Error).message);
    }
  }
  if (raw.once !== undefined) {
    if (raw.once_fmt !== undefined) bad(`${o}.once_fmt`, "not supported by brine: give `once` as YYYY-MM-DDTHH:MM[:SS]");
    const t = parseTime(raw.once, `${o}.once`, false);
    job.once = (t as { at: number }).at;
  }
  if (raw.when !== undefined) job.when = (Array.isArray(raw.when) ? raw.when : [raw.when]).map((w, i) => parseTime(w, `${o}.when[${i}]`));
  const splay = raw.splay ?? defaultSplay;
  if (splay !== undefined && splay !== null && splay !== false && splay !== 0) {
    if (typeof splay === "number" && Number.isInteger(splay) && splay > 0) job.splay = { start: 1, end: splay };
    else if (splay && typeof splay === "object" && typeof (splay as { start?: unknown }).start === "number" && typeof (splay as { end?: unknown }).end === "number") {
      const { start, end } = splay as { start: number; end: number };
      if (start < 0 || end < start) bad(`${o}.splay`, "end must be larger than start");
      job.splay = { start, end };
    } else bad(`${o}.splay`, "expected seconds or {start, end}");
  }
  if (raw.range !== undefined) {
    const r = raw.range as Record<string, unknown>;
    if (!r || typeof r !== "object" || r.start === undefined || r.end === undefined) bad(`${o}.range`, "expected {start, end[, invert]}");
    job.range = { start: parseTime(r.start, `${o}.range.start`), end: parseTime(r.end, `${o}.range.end`), invert: r.invert === true };
  }
  if (raw.maxrunning !== undefined) {
    if (typeof raw.maxrunning !== "number" || !Number.isInteger(raw.maxrunning) || raw.maxrunning < 1) bad(`${o}.maxrunning`, "expected a positive integer");
    job.maxrunning = raw.maxrunning;
  }
  return job;
}

/** Whether `now` is inside the job's range (Salt: start <= now <= end; invert: outside). */
export function inRange(r: NonNullable<ScheduleJob["range"]>, now: number): boolean {
  const start = instantOn(r.start, now);
  const end = instantOn(r.end, now);
  if (end < start && "daily" in r.start && "daily" in r.end) {
    const inside = now >= start || now <= end; // a range over midnight
    return r.invert ? !inside : inside;
  }
  const inside = now >= start && now <= end;
  return r.invert ? !inside : inside;
}

export type FireDecision = { job: ScheduleJob; run: true } | { job: ScheduleJob; run: false; reason: string };

export class Schedule {
  private readonly states = new Map<string, JobState>();

  constructor(
    jobs: ScheduleJob[],
    private readonly enabled: boolean,
    start: number,
    private readonly random: () => number = Math.random,
    /**
     * How late a `once` or `when` time may be found at start and still fire, ms: Salt's `loop_interval`
     * (60 s on a master). Salt's schedule looks every loop_interval and runs a time that passed within the
     * last one (salt/utils/schedule.py `_handle_once`, `_handle_when`); a time further back never fires.
     */
    lateStartMs = 0,
  ) {
    for (const job of jobs) this.states.set(job.name, { job, next: null, running: 0, runs: 0, skips: 0 });
    for (const s of this.states.values()) s.next = s.job.runOnStart ? start : this.plan(s.job, start, lateStartMs);
  }

  private splayMs(job: ScheduleJob): number {
    if (!job.splay) return 0;
    const { start, end } = job.splay;
    return Math.floor(start + this.random() * (end - start + 1)) * 1000;
  }

  /** The next fire time after `from` (or up to `lateMs` before it, for `once` and `when`), splay included. */
  private plan(job: ScheduleJob, from: number, lateMs = 0): number | null {
    let base: number | null = null;
    if (job.intervalMs) base = from + job.intervalMs;
    else if (job.cron) base = job.cron.nextRun(new Date(from))?.getTime() ?? null;
    else if (job.once !== undefined) base = job.once >= from - lateMs ? job.once : null;
    else if (job.when) {
      for (const w of job.when) {
        const t = nextOf(w, from + 1 - lateMs);
        if (t !== null && (base === null || t < base)) base = t;
      }
    }
    return base === null ? null : base + this.splayMs(job);
  }

  /** When the timer should look again (ms), or null when no job will ever fire. */
  nextWake(): number | null {
    let n: number | null = null;
    for (const s of this.states.values()) if (s.next !== null && (n === null || s.next < n)) n = s.next;
    return n;
  }

  /**
   * The jobs due at `now`, each with whether to run it (`mine(job)`: false when another master of the
   * cluster runs this fire). Advances every due job to its next fire time.
   */
  due(now: number, mine: (job: ScheduleJob) => boolean = () => true): FireDecision[] {
    const out: FireDecision[] = [];
    for (const s of this.states.values()) {
      if (s.next === null || s.next > now) continue;
      const once = s.job.once !== undefined;
      s.next = once ? null : this.plan(s.job, now);
      let reason: string | undefined;
      if (!this.enabled) reason = "the schedule is disabled";
      else if (!s.job.enabled) reason = "the job is disabled";
      else if (s.job.range && !inRange(s.job.range, now)) reason = s.job.range.invert ? "inside its range (invert)" : "outside its range";
      else if (s.running >= s.job.maxrunning) reason = `maxrunning ${s.job.maxrunning} reached`;
      else if (!mine(s.job)) reason = "another master of the cluster runs it (or the ring is not published yet)";
      if (reason) {
        s.skips++;
        out.push({ job: s.job, run: false, reason });
      } else out.push({ job: s.job, run: true });
    }
    return out;
  }

  started(name: string): void {
    const s = this.states.get(name);
    if (s) {
      s.running++;
      s.runs++;
    }
  }

  finished(name: string): void {
    const s = this.states.get(name);
    if (s && s.running > 0) s.running--;
  }

  /** schedule.list: each job's entry as configured, plus brine's live state. */
  list(): Record<string, Record<string, unknown>> {
    const out: Record<string, Record<string, unknown>> = {};
    for (const [name, s] of this.states) {
      out[name] = { ...s.job.raw, _next_fire_time: s.next === null ? null : new Date(s.next).toISOString(), _running: s.running, _runs: s.runs, _skips: s.skips };
    }
    return out;
  }
}
