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
import { parseJobTime, type ListJobsFilter } from "../lib/store/job-filter.js";
import { pyTruthy } from "../lib/wheel/salt-errors.js";
import { BrineError } from "../shared/errors.js";
import { argOf } from "./context.js";

/** The options Salt's list_jobs takes, by position. */
export const listJobsParams = ["ext_source", "outputter", "search_metadata", "search_function", "search_target", "start_time", "end_time", "display_progress"] as const;

/** Salt's split_input: a list as it is, anything else as a string split on commas, each part stripped. */
function splitInput(v: unknown): string[] {
  if (Array.isArray(v)) return v.map((x) => String(x));
  return String(v)
    .split(",")
    .map((s) => s.trim());
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

// the filter itself and its match live in src/lib/store/job-filter.ts (each master applies it to its own jobs)
export { entryMatches, filters, parseJobTime, type ListJobsFilter } from "../lib/store/job-filter.js";
