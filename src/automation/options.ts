/**
 * The reactor's and the master schedule's options, read once at start (main thread, again in the automation
 * thread from the same configuration). Salt's names and defaults (salt/config/__init__.py):
 * `reactor` (a list of one-entry maps {tag glob: sls path or list of paths}, or the path of a YAML file
 * holding that list), `reactor_worker_threads` (10), `reactor_worker_hwm` (10000),
 * `reactor_refresh_interval` (60 s), `schedule` (a map of job name → job, plus `enabled` for all jobs).
 *
 * Types, bounds and defaults are declared in src/shared/config/schema.ts. A bad value throws
 * BrineError("CONFIG_INVALID", "<option>: <why>") when the master starts.
 */
import { BrineError } from "../shared/errors.js";
import type { MasterConfig } from "../shared/config/defaults.js";
import { optionBounds, optionDefault } from "../shared/config/options.js";

export interface ReactorOptions {
  /** the map as configured (a list), or a file path to read it from */
  map: ReactorMapEntry[] | string;
  workerThreads: number;
  workerHwm: number;
  refreshIntervalS: number;
}

/** One reactor map entry: a tag glob and its SLS paths. */
export interface ReactorMapEntry {
  [glob: string]: string[];
}

export interface AutomationOptions {
  reactor: ReactorOptions;
  /** raw schedule jobs by name (checked by src/automation/schedule.ts) */
  schedule: Record<string, Record<string, unknown>>;
  /** `schedule: {enabled: False}` turns every job off */
  scheduleEnabled: boolean;
}

function bad(option: string, why: string): never {
  throw new BrineError("CONFIG_INVALID", `${option}: ${why}`);
}

/** an integer option; its default and bounds are declared in src/shared/config/schema.ts */
function int(cfg: Record<string, unknown>, name: "reactor_worker_threads" | "reactor_worker_hwm" | "reactor_refresh_interval"): number {
  const { min, max } = optionBounds(name);
  const v = cfg[name];
  if (v === undefined || v === null) return optionDefault(name) as number;
  if (typeof v !== "number" || !Number.isInteger(v)) bad(name, `expected an integer, got ${JSON.stringify(v)}`);
  if (v < min || v > max) bad(name, `must be between ${min} and ${max}, got ${v}`);
  return v;
}

function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !Buffer.isBuffer(v);
}

/** Checks a reactor map (the option's list, or a map file's content); `where` names it in errors. */
export function checkReactorMap(v: unknown, where: string): ReactorMapEntry[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) bad(where, "expected a list of {tag glob: [sls files]} entries");
  return v.map((e, i) => {
    if (!isMap(e) || Object.keys(e).length !== 1) bad(where, `entry ${i} must be a map with exactly one tag glob`);
    const [glob, files] = Object.entries(e)[0]!;
    const list = typeof files === "string" ? [files] : files;
    if (!Array.isArray(list) || list.some((f) => typeof f !== "string" || f === "")) bad(where, `entry ${i} (${glob}): expected an sls path or a list of sls paths`);
    return { [glob]: list as string[] };
  });
}

export function readAutomationOptions(config: MasterConfig): AutomationOptions {
  const cfg = config as unknown as Record<string, unknown>;
  const raw = cfg.reactor;
  const map = typeof raw === "string" ? (raw === "" ? [] : raw) : checkReactorMap(raw, "reactor");
  const reactor: ReactorOptions = {
    map,
    workerThreads: int(cfg, "reactor_worker_threads"),
    workerHwm: int(cfg, "reactor_worker_hwm"),
    refreshIntervalS: int(cfg, "reactor_refresh_interval"),
  };
  const sched = cfg.schedule ?? {};
  if (!isMap(sched)) bad("schedule", "expected a map of job name to job");
  const schedule: Record<string, Record<string, unknown>> = {};
  let scheduleEnabled = true;
  for (const [name, job] of Object.entries(sched)) {
    if (name === "enabled") {
      if (typeof job !== "boolean") bad("schedule.enabled", "expected True or False");
      scheduleEnabled = job;
      continue;
    }
    if (name === "splay" || name === "loop_interval") continue; // Salt's schedule-wide keys; per-job splay is what brine reads
    if (!isMap(job)) bad(`schedule.${name}`, "expected a map");
    schedule[name] = job;
  }
  return { reactor, schedule, scheduleEnabled };
}

/** Whether there is anything for the automation thread to do. */
export function automationWanted(o: AutomationOptions): boolean {
  return (typeof o.reactor.map === "string" || o.reactor.map.length > 0) || Object.keys(o.schedule).length > 0;
}
