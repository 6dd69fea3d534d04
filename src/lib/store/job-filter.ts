/**
 * jobs.list_jobs' filters as Salt's runner applies them to each job's list entry (salt/runners/jobs.py, list_jobs),
 * pure: a job is listed when its entry (job-listing.ts formatJob) matches every filter given. The runner reads the
 * filter from its arguments (src/runners/list-jobs-filter.ts); with jobs placed on a ring each master applies it
 * to its own jobs before the cluster-wide list is cut at brine_cluster_list_jobs_max (job-placement.ts), so the
 * cut keeps the newest matching jobs, not the newest jobs.
 */
import { fnmatch } from "../targeting/fnmatch.js";
import { pyEqual } from "../pillar/merge.js";

export interface ListJobsFilter {
  metadata?: Record<string, unknown>;
  targets?: string[];
  functions?: string[];
  /** ms since the epoch */
  startMs?: number;
  endMs?: number;
}

const MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"];

/** A local time from its parts (month 1-12); NaN when a part is out of range. */
function localMs(y: number, mo: number, d: number, h = 0, mi = 0, s = 0, frac = ""): number {
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return NaN;
  const t = new Date(y, mo - 1, d, h, mi, s, Number((frac + "000").slice(0, 3)));
  return t.getMonth() === mo - 1 ? t.getTime() : NaN;
}

const ISO_LOCAL = /^(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?)?$/;
const SALT_START = /^(\d{4}), ([A-Za-z]{3}) (\d{1,2}) (\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?$/;

/** A time as list_jobs reads start_time, end_time and the entries' StartTime; NaN when it cannot be read. */
export function parseJobTime(text: string): number {
  const s = text.trim();
  let m = ISO_LOCAL.exec(s);
  if (m) return localMs(+m[1]!, +m[2]!, +m[3]!, +(m[4] ?? 0), +(m[5] ?? 0), +(m[6] ?? 0), m[7] ?? "");
  m = SALT_START.exec(s);
  if (m) {
    const mo = MONTHS.indexOf(m[2]!.toLowerCase());
    return mo < 0 ? NaN : localMs(+m[1]!, mo + 1, +m[3]!, +m[4]!, +m[5]!, +(m[6] ?? 0), m[7] ?? "");
  }
  return s === "" ? NaN : Date.parse(s);
}

/** Whether the filter selects anything at all (a call without one lists every job without decoding any). */
export function filters(f: ListJobsFilter): boolean {
  return f.metadata !== undefined || f.targets !== undefined || f.functions !== undefined || f.startMs !== undefined || f.endMs !== undefined;
}

/** Whether a list entry (Salt's format_jid_instance: Function, Target, Metadata, StartTime) passes every filter. */
export function entryMatches(f: ListJobsFilter, e: Record<string, unknown>): boolean {
  if (f.metadata) {
    const have = e.Metadata;
    if (!have || typeof have !== "object" || Array.isArray(have)) return false;
    const h = have as Record<string, unknown>;
    if (!Object.entries(f.metadata).some(([k, v]) => k in h && pyEqual(h[k], v))) return false;
  }
  if (f.targets) {
    if (!("Target" in e)) return false;
    const ts = (Array.isArray(e.Target) ? e.Target : [e.Target]).filter((t): t is string => typeof t === "string");
    if (!ts.some((t) => f.targets!.some((g) => fnmatch(t, g)))) return false;
  }
  if (f.functions) {
    if (typeof e.Function !== "string" || !f.functions.some((g) => fnmatch(e.Function, g))) return false;
  }
  if (f.startMs !== undefined || f.endMs !== undefined) {
    const started = typeof e.StartTime === "string" ? parseJobTime(e.StartTime) : NaN;
    if (Number.isNaN(started)) return false;
    if (f.startMs !== undefined && started < f.startMs) return false;
    if (f.endMs !== undefined && started > f.endMs) return false;
  }
  return true;
}

const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.length <= 1024 && v.every((x) => typeof x === "string" && x.length <= 4096);

/** A filter as another master sent it (plain data), checked; undefined when malformed (the asker then gets every job). */
export function checkListJobsFilter(raw: unknown): ListJobsFilter | undefined {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return undefined;
  const o = raw as Record<string, unknown>;
  const f: ListJobsFilter = {};
  if (o.metadata !== undefined) {
    if (typeof o.metadata !== "object" || o.metadata === null || Array.isArray(o.metadata)) return undefined;
    f.metadata = o.metadata as Record<string, unknown>;
  }
  if (o.targets !== undefined) {
    if (!isStrings(o.targets)) return undefined;
    f.targets = o.targets;
  }
  if (o.functions !== undefined) {
    if (!isStrings(o.functions)) return undefined;
    f.functions = o.functions;
  }
  for (const k of ["startMs", "endMs"] as const) {
    if (o[k] === undefined) continue;
    if (typeof o[k] !== "number" || !Number.isFinite(o[k])) return undefined;
    f[k] = o[k] as number;
  }
  return f;
}
