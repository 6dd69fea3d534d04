/**
 * External pillars (Salt's Pillar.ext_pillar, salt/pillar/__init__.py): the `ext_pillar` option is a list of
 * one-key mappings `{module: value}`, applied in order; each module's result is merged into the pillar with
 * `pillar_source_merging_strategy` and `pillar_merge_lists`, and the next module sees the merged pillar.
 * `ext_pillar_first` (handled by compile.ts) runs them before the pillar SLS instead of after.
 *
 * The module interface (brine's own modules and any registered with `registerExtPillar`):
 *
 * ```ts
 * const mine: ExtPillarModule = {
 *   // Salt's calling convention: a mapping value gives keyword arguments, a list positional arguments,
 *   // anything else one positional argument
 *   async run(ctx, args, kwargs) {
 *     return { from_mine: ctx.minionId };   // a mapping merged into the pillar; null/{} adds nothing
 *   },
 * };
 * registerExtPillar("mine", mine);
 * ```
 *
 * A module that throws gives the pillar an `_errors` line "Failed to load ext_pillar <name>: <message>" and
 * a log line (Salt's answer). An `ext_pillar` entry naming a module brine does not have is logged
 * critical, as Salt logs it ("Specified ext_pillar interface <name> is unavailable"), and, unlike Salt,
 * also added to `_errors`: a pillar silently missing its external data would let states run without it.
 * A result that is not a mapping is an `_errors` line too (Salt raises out of the whole compile).
 *
 * Where it runs: in the request worker compiling the minion's pillar (and in runner threads for
 * pillar.show_pillar). Modules must not block the thread: cmd_* spawn their command asynchronously with a
 * bound on time and output (ext/cmd.ts), git reads trees the main thread's updater prepared (ext/git.ts).
 */
import { getLogger } from "../../shared/log.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { isDict, merge, type Data } from "./merge.js";

const log = getLogger("brine.pillar");

/** What an external pillar module is given besides its arguments. */
export interface ExtPillarContext {
  /** the minion whose pillar is compiled */
  minionId: string;
  /** the pillar compiled so far (SLS data, or only the override with ext_pillar_first); do not mutate */
  pillar: Data;
  /** the minion's grains (with `id`) */
  grains: Data;
  /** the master's options */
  cfg: MasterConfig;
  /** the effective pillarenv (null when none) and saltenv of this compilation */
  pillarenv: string | null;
  saltenv: string | null;
  /** whether this minion matches a compound target (nodegroups resolved), as the top file matches */
  matches(tgt: string): boolean;
}

export type ExtPillarResult = Data | null | undefined;

export interface ExtPillarModule {
  run(ctx: ExtPillarContext, args: unknown[], kwargs: Data): Promise<ExtPillarResult> | ExtPillarResult;
}

const modules = new Map<string, ExtPillarModule>();

/** Make a module available to `ext_pillar` entries under `name` (brine's built-ins register at import). */
export function registerExtPillar(name: string, mod: ExtPillarModule): void {
  modules.set(name, mod);
}

export function extPillarModule(name: string): ExtPillarModule | undefined {
  return modules.get(name);
}

export function extPillarNames(): string[] {
  return [...modules.keys()].sort();
}

/** Salt's _external_pillar_data: how an entry's value becomes arguments. */
export function extPillarArgs(val: unknown): { args: unknown[]; kwargs: Data } {
  if (isDict(val)) return { args: [], kwargs: { ...val } };
  if (Array.isArray(val)) return { args: [...val], kwargs: {} };
  return { args: [val], kwargs: {} };
}

export interface ExtPillarRun {
  cfg: MasterConfig;
  /** merge as the compile does (strategy, renderer, pillar_merge_lists) */
  merge(a: Data, b: Data): Data;
  ctx: Omit<ExtPillarContext, "pillar">;
  pillarOverride: Data;
}

/** Salt's Pillar.ext_pillar(pillar, errors): returns the new pillar; appends to `errors`. */
export async function applyExtPillars(run: ExtPillarRun, pillarIn: Data, errors: string[]): Promise<Data> {
  const opt: unknown = run.cfg.ext_pillar;
  if (opt === undefined || opt === null) return pillarIn;
  if (!Array.isArray(opt)) {
    errors.push('The "ext_pillar" option is malformed');
    log.critical(errors[errors.length - 1]!);
    return pillarIn;
  }
  let pillar = pillarIn;
  if (Object.keys(run.pillarOverride).length) pillar = run.merge(pillar, run.pillarOverride);
  for (const entry of opt) {
    if (!isDict(entry)) {
      errors.push('The "ext_pillar" option is malformed');
      log.critical(errors[errors.length - 1]!);
      return {};
    }
    let ext: ExtPillarResult = null;
    for (const [key, val] of Object.entries(entry)) {
      const mod = modules.get(key);
      if (!mod) {
        log.critical(`Specified ext_pillar interface ${key} is unavailable`);
        errors.push(`Specified ext_pillar interface ${key} is unavailable (brine's ext_pillar modules: ${extPillarNames().join(", ")})`);
        continue;
      }
      const { args, kwargs } = extPillarArgs(val);
      try {
        ext = await mod.run({ ...run.ctx, pillar }, args, kwargs);
      } catch (e) {
        errors.push(`Failed to load ext_pillar ${key}: ${(e as Error).message}`);
        log.error(`Exception caught loading ext_pillar '${key}': ${(e as Error).stack ?? (e as Error).message}`);
        ext = null;
      }
      if (ext !== null && ext !== undefined && !isDict(ext)) {
        errors.push(`Failed to load ext_pillar ${key}: it returned ${Array.isArray(ext) ? "a list" : typeof ext}, not a mapping`);
        log.error(errors[errors.length - 1]!);
        ext = null;
      }
    }
    if (ext && Object.keys(ext).length) pillar = run.merge(pillar, ext);
  }
  return pillar;
}

/** Merge with the compile's settings (used by modules that merge several sources, as Salt's do). */
export function mergeWith(cfg: MasterConfig): (a: Data, b: Data) => Data {
  const strategy = typeof cfg.pillar_source_merging_strategy === "string" ? cfg.pillar_source_merging_strategy : "smart";
  const renderer = typeof cfg.renderer === "string" ? cfg.renderer : "yaml";
  return (a, b) => merge(a, b, strategy, renderer, cfg.pillar_merge_lists === true);
}
