/**
 * jobs.list_jobs' filters as Salt's runner applies them (salt/runners/jobs.py, list_jobs), pure: a job is
 * listed when it matches every filter given.
 * - `search_metadata` (a dict): some key of it is in the entry's `Metadata` with an equal value (Python's ==).
 *   Given but not a dict, Salt logs that it is ignored and then lists nothing; brine refuses it instead.
 * - `search_target` / `search_function`: a list, or a string split on commas (Salt's split_input); a job is
 *   listed when its `Target` (or one of its targets) / its `Function` matches one of them as an fnmatch glob.
 * - `start_time` / `end_time`: the job started at or after / at or before. Salt parses them with dateutil; brine
 *   reads ISO 8601 (a date alone, or with a time), Salt's own StartTime form (`2015, Mar 16 19:00:00.000000`)
 *   and what Date.parse reads, all in the master's local time as dateutil's naive times are; anything else is
 *   refused with the value named rather than guessed at.
 * Salt's positions (ext_source, outputter, search_metadata, search_function, search_target, start_time,
 * end_time, display_progress) are kept, so `salt-run jobs.list_jobs '' '' '' 'test.*'` means what it means in Salt.
 */
import { fnmatch } from "../lib/targeting/fnmatch.js";
import { pyEqual } from "../lib/pillar/merge.js";
import { pyTruthy } from "../lib/wheel/salt-errors.js";
import { BrineError } from "../shared/errors.js";
import { argOf } from "./context.js";

export interface ListJobsFilter {
  metadata?: Record<string, unknown>;
  targets?: string[];
  functions?: string[];
  /** ms since the epoch */
  startMs?: number;
  endMs?: number;
}

/** The options Salt's list_jobs takes, by position. */
export const listJobsParams = ["ext_source", "outputter", "search_metadata", "search_function", "search_target", "start_time", "end_time", "display_progress"] as const;

/** Salt's split_input: a list as it is, anything else as a string split on commas, each part stripped. */
function splitInput(v: unknown): string[] {
  if (Array.isArray(v)) return v.map((x) => String(x));
  return String(v)
    .split(",")
    .map((s) => s.trim());
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

function timeArg(name: string, v: unknown): number | undefined {
  if (!pyTruthy(v)) return undefined;
  const ms = parseJobTime(String(v));
  if (Number.isNaN(ms)) throw new BrineError("RUNNER_BAD_ARGUMENT", `jobs.list_jobs: ${name} ${JSON.stringify(String(v))} is not a time brine reads (ISO 8601 such as 2015-03-16 19:00, or Salt's "2015, Mar 16 19:00")`);
  return ms;
}

/** A jobs.* runner's `ext_source`: none or local_cache; any other job cache is refused, never ignored. */
export function extSourceChecked(fun: string, ext: unknown): void {
  if (pyTruthy(ext) && ext !== "local_cache") throw new BrineError("RUNNER_BAD_ARGUMENT", `${fun}: ext_source ${JSON.stringify(ext)} is not implemented by brine (its job cache is the only one)`);
}

/** The filters of a list_jobs call (or last_run's metadata/function/target), refusing what Salt would not honour. */
export function listJobsFilter(arg: unknown[], kwarg: Record<string, unknown>): ListJobsFilter {
  const at = (i: number) => argOf(arg, kwarg, i, listJobsParams[i]!, undefined);
  extSourceChecked("jobs.list_jobs", at(0));
  return filterOf(at(2), at(3), at(4), timeArg("start_time", at(5)), timeArg("end_time", at(6)));
}

/** The filter of metadata, function and target values given (Salt's truthiness: empty means no filter). */
export function filterOf(metadata: unknown, functions: unknown, targets: unknown, startMs?: number, endMs?: number): ListJobsFilter {
  const f: ListJobsFilter = {};
  if (pyTruthy(metadata)) {
    if (typeof metadata !== "object" || metadata === null || Array.isArray(metadata)) throw new BrineError("RUNNER_BAD_ARGUMENT", "jobs.list_jobs: search_metadata must be a dictionary (Salt ignores it and lists nothing)");
    f.metadata = metadata as Record<string, unknown>;
  }
  if (pyTruthy(functions)) f.functions = splitInput(functions);
  if (pyTruthy(targets)) f.targets = splitInput(targets);
  if (startMs !== undefined) f.startMs = startMs;
  if (endMs !== undefined) f.endMs = endMs;
  return f;
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
