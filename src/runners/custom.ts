/**
 * Custom runners: `saltutil.sync_runners` / `sync_all` copy the JavaScript modules under `_runners/` of the
 * file roots into `<extension_modules>/runners/` (Salt's salt.utils.extmods.sync; `extension_modules`
 * defaults to `<cachedir>/extmods`, root_dir applies), and a runner call brine does not know by itself
 * loads `<module>.mjs` or `<module>.js` from there (each call runs in a fresh runner thread: a new sync is
 * seen by the next call, no restart).
 *
 * The interface (README "Custom runners"): an ES module whose exported functions are the runner's functions,
 * each called as `fn(ctx, args, kwargs)` (the RunnerContext of context.ts: cfg, jobs, minions, keys, client,
 * print, events) and returning its result (or a promise of it). `salt-run hello.world a b=1` calls
 * `world(ctx, ["a"], {b: 1})` of `_runners/hello.mjs`. Built-in runners keep their names: a custom module
 * adds functions, it does not replace brine's.
 *
 * Python runners (`.py`, `.pyx`, `.so`, `.zip`) cannot run here: sync reports each one by its path, and
 * calling a function of one says which file it is instead of "not available".
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import type { MasterConfig } from "../shared/config/defaults.js";
import { prependRoot } from "../shared/config/load.js";
import { BrineError } from "../shared/errors.js";
import { RootsBackend } from "../lib/fileserver/roots.js";
import { getLogger } from "../shared/log.js";
import { argOf, type RunnerContext, type RunnerFn } from "./context.js";

const log = getLogger("brine.runner.custom");

/** Module file names a custom runner may have, in lookup order. */
export const RUNNER_EXTENSIONS = [".mjs", ".js"] as const;
/** What Salt would have loaded from `_runners`, and brine cannot. */
const PYTHON_EXTENSIONS = /\.(pyx?|so|zip)$/;

/** `extension_modules` (string path; default `<cachedir>/extmods`; root_dir applies as in Salt). */
export function extensionModulesDir(cfg: MasterConfig): string {
  const v: unknown = (cfg as unknown as Record<string, unknown>).extension_modules;
  if (v === undefined || v === null || v === "") return path.join(cfg.cachedir, "extmods");
  if (typeof v !== "string") throw new BrineError("CONFIG_INVALID", "extension_modules: must be a directory path");
  return prependRoot(cfg.root_dir, v);
}

function runnersDir(cfg: MasterConfig): string {
  return path.join(extensionModulesDir(cfg), "runners");
}

/** Python runner files under `_runners/<module>.*` in any file root, for the "not supported" message. */
function pythonRunnerFiles(cfg: MasterConfig, module: string): string[] {
  const out: string[] = [];
  for (const roots of Object.values(cfg.file_roots ?? {})) {
    for (const root of Array.isArray(roots) ? roots : []) {
      for (const ext of [".py", ".pyx", ".so"]) {
        const f = path.join(String(root), "_runners", `${module}${ext}`);
        if (existsSync(f)) out.push(f);
      }
    }
  }
  return out;
}

/** The custom runner function `fun` ("module.function"), or an error saying why there is none (Salt's "not available"). */
export async function loadCustomRunner(cfg: MasterConfig, fun: string): Promise<RunnerFn> {
  const dot = fun.indexOf(".");
  const module = dot > 0 ? fun.slice(0, dot) : "";
  const name = dot > 0 ? fun.slice(dot + 1) : "";
  if (/^[A-Za-z0-9_-]+$/.test(module) && /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name)) {
    for (const ext of RUNNER_EXTENSIONS) {
      const file = path.join(runnersDir(cfg), `${module}${ext}`);
      if (!existsSync(file)) continue;
      // the file's mtime in the URL: a module re-synced meanwhile is not served from the import cache
      const mod = (await import(`${pathToFileURL(file).href}?m=${statSync(file).mtimeMs}`)) as Record<string, unknown>;
      const fn = mod[name] ?? (mod.default as Record<string, unknown> | undefined)?.[name];
      if (typeof fn === "function" && !name.startsWith("_")) return (ctx, args, kwargs) => Promise.resolve((fn as RunnerFn)(ctx, args, kwargs));
      break;
    }
    const py = pythonRunnerFiles(cfg, module);
    if (py.length) throw new Error(`'${fun}' is not available: ${py.join(", ")} is a Python runner, which brine cannot run; write it as a JavaScript module (_runners/${module}.mjs exporting ${name}(ctx, args, kwargs))`);
  }
  throw new Error(`'${fun}' is not available.`);
}

/**
 * The custom runner for `fun` when its module is a synced one or a Python runner in the file roots (loaded
 * when called: loadCustomRunner's error is its failure); undefined otherwise (the caller's "not available").
 */
export function customRunner(cfg: MasterConfig, fun: string): RunnerFn | undefined {
  const module = fun.slice(0, Math.max(0, fun.indexOf(".")));
  if (!/^[A-Za-z0-9_-]+$/.test(module)) return undefined;
  const present = RUNNER_EXTENSIONS.some((ext) => existsSync(path.join(runnersDir(cfg), `${module}${ext}`))) || pythonRunnerFiles(cfg, module).length > 0;
  return present ? async (ctx, args, kwargs) => (await loadCustomRunner(cfg, fun))(ctx, args, kwargs) : undefined;
}

/** Salt's extmod_whitelist / extmod_blacklist argument for one form: a comma-separated string or {form: [names]}. */
function modList(v: unknown, form: string, dflt: unknown): Set<string> | undefined {
  const src = v === null || v === undefined ? dflt : v;
  if (typeof src === "string") return new Set(src.split(",").map((s) => s.trim()));
  if (src && typeof src === "object" && !Array.isArray(src)) {
    const l = (src as Record<string, unknown>)[form];
    if (Array.isArray(l)) return new Set(l.map(String));
  }
  return undefined;
}

function listRecursive(dir: string, base = ""): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const rel = base ? `${base}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...listRecursive(path.join(dir, e.name), rel));
    else out.push(rel);
  }
  return out;
}

const sameContent = (a: string, b: string) => existsSync(b) && readFileSync(a).equals(readFileSync(b));

/**
 * sync_runners(saltenv="base", extmod_whitelist, extmod_blacklist): copies new or changed `_runners` modules
 * and returns their names ("runners.<name>"); with `clean_dynamic_modules` (default True) removes modules no
 * longer in the file roots. Python files are reported (print and log), never copied.
 */
export async function syncRunners(ctx: RunnerContext, arg: unknown[], kwarg: Record<string, unknown>, form = "runners"): Promise<string[]> {
  const cfg = ctx.cfg as unknown as Record<string, unknown>;
  const envArg = argOf(arg, kwarg, 0, "saltenv", "base");
  const envs = Array.isArray(envArg) ? envArg.map(String) : String(envArg ?? "base").split(",");
  const white = modList(argOf(arg, kwarg, 1, "extmod_whitelist", null), form, cfg.extmod_whitelist);
  const black = modList(argOf(arg, kwarg, 2, "extmod_blacklist", null), form, cfg.extmod_blacklist);
  const modDir = runnersDir(ctx.cfg);
  mkdirSync(modDir, { recursive: true, mode: 0o700 });
  const roots = new RootsBackend(ctx.cfg, { watchDirsMax: 0 });
  const synced: string[] = [];
  const remote = new Set<string>();
  for (const env of envs) {
    for (const rel of (await roots.envLists(env))?.files ?? []) {
      if (!rel.startsWith(`_${form}/`)) continue;
      const sub = rel.slice(form.length + 2);
      const found = await roots.find(rel, env);
      if (!found) continue;
      if (PYTHON_EXTENSIONS.test(sub)) {
        const msg = `${found.path}: Python runners are not supported by brine (not synced); write it as a JavaScript module (.mjs or .js) exporting functions (ctx, args, kwargs)`;
        log.warning(msg);
        ctx.print(msg);
        continue;
      }
      const ext = RUNNER_EXTENSIONS.find((e) => sub.endsWith(e));
      if (!ext) continue;
      const relname = sub.slice(0, -ext.length).split("/").join(".");
      if (white && !white.has(relname)) continue;
      if (black && black.has(relname)) continue;
      remote.add(sub);
      const dest = path.join(modDir, sub);
      if (sameContent(found.real, dest)) continue;
      mkdirSync(path.dirname(dest), { recursive: true, mode: 0o700 });
      copyFileSync(found.real, dest);
      log.info(`synced ${found.path} to ${dest}`);
      synced.push(`${form}.${relname}`);
    }
  }
  if (cfg.clean_dynamic_modules !== false) {
    for (const rel of listRecursive(modDir)) {
      if (!remote.has(rel)) rmSync(path.join(modDir, rel), { force: true });
    }
  }
  return synced;
}

/** The keys of Salt 3007's sync_all answer, and the `_<dir>` each syncs from. */
const SYNC_ALL_FORMS: Record<string, string> = {
  clouds: "clouds", modules: "modules", states: "states", grains: "grains", renderers: "renderers", returners: "returners",
  output: "output", proxymodules: "proxy", runners: "runners", wheel: "wheel", engines: "engines", thorium: "thorium",
  queues: "queues", pillar: "pillar", utils: "utils", sdb: "sdb", cache: "cache", fileserver: "fileserver", tops: "tops",
  tokens: "tokens", serializers: "serializers", executors: "executors", wrapper: "wrapper", roster: "roster",
};

/** sync_all: Salt's dictionary of every module type; brine syncs runners only (the other lists stay empty, and files found for them are reported). */
async function syncAll(ctx: RunnerContext, arg: unknown[], kwarg: Record<string, unknown>): Promise<Record<string, string[]>> {
  const ret: Record<string, string[]> = {};
  const roots = new RootsBackend(ctx.cfg, { watchDirsMax: 0 });
  const envArg = argOf(arg, kwarg, 0, "saltenv", "base");
  const envs = Array.isArray(envArg) ? envArg.map(String) : String(envArg ?? "base").split(",");
  for (const [key, dir] of Object.entries(SYNC_ALL_FORMS)) {
    if (key === "runners") {
      ret[key] = await syncRunners(ctx, arg, kwarg);
      continue;
    }
    ret[key] = [];
    for (const env of envs) {
      const n = ((await roots.envLists(env))?.files ?? []).filter((f) => f.startsWith(`_${dir}/`)).length;
      if (n) ctx.print(`_${dir} in saltenv ${env}: ${n} file(s) not synced; brine loads custom runners only`);
    }
  }
  return ret;
}

export const saltutilRunners: Record<string, RunnerFn> = {
  "saltutil.sync_runners": async (ctx, arg, kwarg) => syncRunners(ctx, arg, kwarg),
  "saltutil.sync_all": syncAll,
};
