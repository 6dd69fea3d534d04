/**
 * Orchestration SLS files rendered on the master into high data (Salt's BaseHighState.render_highstate and
 * render_state, as the orchestrate runner's master minion runs them with `file_client: local`): the mods are
 * matched against the SLS names of `file_roots[saltenv]` (globs allowed), each file rendered through brine's
 * render pipe (Jinja + YAML; `salt`, `pillar`, `grains`, `opts`, `saltenv`, `sls`, `slspath`... in context),
 * `include` followed (relative `.x`, `{env: sls}`), `extend` and `exclude` collected, dotted state keys
 * (`salt.state:`) split into state + function, and `order` numbered in file order (`state_auto_order`).
 * Errors are Salt's messages; the caller answers them as the run's (failed) return.
 */
import type { MasterConfig } from "../../shared/config/defaults.js";
import { normalizeRoots } from "../../lib/fileserver/paths.js";
import { PillarTree } from "../../lib/pillar/tree.js";
import { slsContext } from "../../lib/pillar/compile.js";
import { JinjaEnv } from "../../lib/render/jinja.js";
import { renderPipe } from "../../lib/render/pipe.js";
import { RenderError } from "../../lib/render/render-error.js";
import { fnmatch } from "../../lib/targeting/fnmatch.js";
import { isMap, type Data } from "./compiler.js";

/** Include chains deeper than this are refused (a loop the mods set did not catch). */
export const stateIncludeDepthMax = 64;

export interface SlsRenderContext {
  /** extra Jinja context: salt, pillar, grains, opts */
  context: Data;
}

export class StateTree {
  private readonly tree: PillarTree;
  private readonly jinjas = new Map<string, JinjaEnv>();
  private iorder = 10000;

  constructor(private readonly cfg: MasterConfig) {
    this.tree = new PillarTree(normalizeRoots(cfg.file_roots), cfg);
  }

  private jinjaFor(env: string): JinjaEnv {
    let j = this.jinjas.get(env);
    if (!j) {
      const raw = this.cfg.jinja_sls_env;
      const envOpts = (isMap(raw) ? raw : {}) as Data;
      j = new JinjaEnv(
        (name) => {
          const f = this.tree.find(name, env);
          return f ? { path: f.path, sig: f.sig, read: () => this.tree.read(f) } : null;
        },
        { trimBlocks: this.cfg.jinja_trim_blocks === true || envOpts.trim_blocks === true, lstripBlocks: this.cfg.jinja_lstrip_blocks === true || envOpts.lstrip_blocks === true },
      );
      this.jinjas.set(env, j);
    }
    return j;
  }

  /** Salt's render_highstate for `{saltenv: mods}`. */
  async render(saltenv: string, mods: string[], ctx: SlsRenderContext): Promise<{ high: Data; errors: string[] }> {
    const high: Data = {};
    const errors: string[] = [];
    const done = new Set<string>();
    if (!this.tree.hasEnv(saltenv)) {
      errors.push(`No matching salt environment for environment '${saltenv}' found`);
    }
    const avail = await this.tree.listStates(saltenv);
    for (const match of mods) {
      let files = avail.filter((s) => fnmatch(s, match));
      if (!files.length) files = [match];
      for (const sls of files) {
        if (done.has(`${saltenv}:${sls}`)) continue;
        const errs: string[] = [];
        const state = await this.renderState(sls, saltenv, done, avail, ctx, errs, 0);
        if (state) mergeIncluded(high, state, errs);
        errors.push(...errs.map((e) => (e.includes("is not available") && e.includes(`SLS ${match} in saltenv`) ? `No matching sls found for '${match}' in env '${saltenv}'` : e)));
      }
    }
    if (Array.isArray(high.__extend__)) {
      const seen = new Set<string>();
      high.__extend__ = (high.__extend__ as Data[]).flatMap((e) => Object.entries(e)).filter(([k, v]) => {
        const key = JSON.stringify([k, v]);
        if (seen.has(key)) return false;
        seen.add(key);
        return true;
      }).map(([k, v]) => ({ [k]: v }));
    }
    return { high, errors };
  }

  private async renderState(sls: string, saltenv: string, done: Set<string>, avail: string[], ctx: SlsRenderContext, errors: string[], depth: number): Promise<Data | null> {
    const found = this.tree.findSls(sls, saltenv);
    if (!found) {
      errors.push(`Specified SLS ${sls} in saltenv ${saltenv} is not available on the salt master or through a configured fileserver`);
      return null;
    }
    let state: unknown;
    try {
      state = renderPipe({
        text: this.tree.read(found.file),
        file: found.file.path,
        name: found.file.rel,
        defaultPipe: typeof this.cfg.renderer === "string" ? this.cfg.renderer : "jinja|yaml",
        jinja: this.jinjaFor(saltenv),
        context: { ...ctx.context, saltenv, sls, ...slsContext(found.file.path, sls) },
        blacklist: Array.isArray(this.cfg.renderer_blacklist) ? this.cfg.renderer_blacklist.map(String) : [],
        whitelist: Array.isArray(this.cfg.renderer_whitelist) ? this.cfg.renderer_whitelist.map(String) : [],
      });
    } catch (e) {
      errors.push(e instanceof RenderError ? `Rendering SLS '${saltenv}:${sls}' failed: ${e.message}` : `Rendering SLS ${sls} failed, render error: ${(e as Error).message}`);
      return null;
    } finally {
      done.add(`${saltenv}:${sls}`);
    }
    if (!state || (isMap(state) && Object.keys(state).length === 0)) return {};
    if (!isMap(state)) {
      errors.push(`SLS ${sls} does not render to a dictionary`);
      return null;
    }
    let include: unknown[] = [];
    if ("include" in state) {
      if (!Array.isArray(state.include)) errors.push(`Include Declaration in SLS ${sls} is not formed as a list`);
      else include = state.include;
      delete state.include;
    }
    handleExtend(state, sls, saltenv, errors);
    if ("exclude" in state) {
      const exc = state.exclude;
      delete state.exclude;
      if (!Array.isArray(exc)) errors.push(`Exclude Declaration in SLS ${sls} is not formed as a list`);
      else state.__exclude__ = [...((state.__exclude__ as unknown[]) ?? []), ...exc];
    }
    handleStateDecls(state, sls, saltenv, errors);
    for (const raw of include) {
      let env = saltenv;
      let inc: string;
      if (isMap(raw)) {
        const k = Object.keys(raw)[0] ?? "";
        env = k;
        inc = String(raw[k]);
      } else inc = String(raw);
      if (env !== saltenv && !this.tree.hasEnv(env)) {
        errors.push(`Nonexistent saltenv '${env}' found in include of '${inc}' within SLS '${saltenv}:${sls}'`);
        continue;
      }
      if (inc.startsWith(".")) {
        const m = /^(\.+)(.*)$/.exec(inc)!;
        const comps = sls.split(".");
        if (found.source.endsWith("/init.sls")) comps.push("init");
        if (m[1]!.length > comps.length) {
          errors.push(`Attempted relative include of '${inc}' within SLS '${saltenv}:${sls}' goes beyond top level package `);
          continue;
        }
        inc = [...comps.slice(0, comps.length - m[1]!.length), m[2]!].join(".");
      }
      if (depth >= stateIncludeDepthMax) {
        errors.push(`Include of '${inc}' within SLS '${saltenv}:${sls}' is deeper than ${stateIncludeDepthMax} levels`);
        continue;
      }
      const envAvail = env === saltenv ? avail : await this.tree.listStates(env);
      const targets = envAvail.filter((s) => fnmatch(s, inc));
      for (const target of targets.length ? targets : [inc]) {
        if (done.has(`${env}:${target}`)) continue;
        const nstate = await this.renderState(target, env, done, envAvail, ctx, errors, depth + 1);
        if (!nstate) continue;
        for (const [id, body] of Object.entries(nstate)) {
          if (id.startsWith("__") || !isMap(body)) continue;
          body.__sls_included_from__ = [...((body.__sls_included_from__ as unknown[]) ?? []), sls];
        }
        mergeIncluded(state, nstate, errors);
      }
    }
    if (this.cfg.state_auto_order !== false) this.handleIorder(state);
    return state;
  }

  /** Salt's _handle_iorder: each state declaration without `order` gets the next number from 10000. */
  private handleIorder(state: Data): void {
    for (const body of Object.values(state)) {
      if (!isMap(body)) continue;
      for (const [dec, run] of Object.entries(body)) {
        if (dec.startsWith("_") || !Array.isArray(run)) continue;
        if (run.some((a) => isMap(a) && Object.keys(a)[0] === "order")) continue;
        run.push({ order: this.iorder++ });
      }
    }
  }
}

function handleExtend(state: Data, sls: string, saltenv: string, errors: string[]): void {
  if (!("extend" in state)) return;
  const ext = state.extend;
  delete state.extend;
  if (!isMap(ext)) {
    errors.push(`Extension value in SLS '${sls}' is not a dictionary`);
    return;
  }
  for (const [name, body] of Object.entries(ext)) {
    if (!isMap(body)) {
      errors.push(`Extension name '${name}' in SLS '${sls}' is not a dictionary`);
      continue;
    }
    body.__sls__ ??= sls;
    body.__env__ ??= saltenv;
    for (const key of Object.keys(body)) {
      if (key.startsWith("_") || !Array.isArray(body[key]) || !key.includes(".")) continue;
      const [st, ...rest] = key.split(".");
      const run = body[key] as unknown[];
      delete body[key];
      body[st!] = [...run, rest.join(".")];
    }
  }
  state.__extend__ = [...((state.__extend__ as unknown[]) ?? []), ext];
}

/** Salt's _handle_state_decls: `pkg.installed:` keys split, short `id: pkg.installed` forms padded, __sls__/__env__ added. */
export function handleStateDecls(state: Data, sls: string, saltenv: string, errors: string[]): void {
  for (const [name, body] of Object.entries(state)) {
    if (name === "__extend__" || name === "__exclude__") continue;
    if (!isMap(body)) {
      if (typeof body === "string" && body.includes(".")) {
        const [st, fun] = body.split(".");
        state[name] = { __sls__: sls, __env__: saltenv, [st!]: [fun] };
        continue;
      }
      errors.push(`ID ${name} in SLS ${sls} is not a dictionary`);
      continue;
    }
    const seen = new Set<string>();
    for (const key of Object.keys(body)) {
      if (key.startsWith("_") || !Array.isArray(body[key])) continue;
      if (key.includes(".")) {
        const [st, ...rest] = key.split(".");
        if (seen.has(st!)) {
          errors.push(`ID '${name}' in SLS '${sls}' contains multiple state declarations of the same type`);
          continue;
        }
        const run = body[key] as unknown[];
        delete body[key];
        body[st!] = [...run, rest.join(".")];
        seen.add(st!);
        continue;
      }
      seen.add(key);
    }
    body.__sls__ ??= sls;
    body.__env__ ??= saltenv;
  }
}

/** Salt's merge_included_states: extends and excludes gathered, ids merged (a different body under one id is an error). */
function mergeIncluded(high: Data, state: Data, errors: string[]): void {
  if ("__extend__" in state) {
    high.__extend__ = [...((high.__extend__ as unknown[]) ?? []), ...(state.__extend__ as unknown[])];
    delete state.__extend__;
  }
  if ("__exclude__" in state) {
    high.__exclude__ = [...((high.__exclude__ as unknown[]) ?? []), ...(state.__exclude__ as unknown[])];
    delete state.__exclude__;
  }
  for (const [id, body] of Object.entries(state)) {
    const had = high[id];
    if (isMap(had) && isMap(body) && JSON.stringify(had) !== JSON.stringify(body)) {
      errors.push(`Detected conflicting IDs, SLS IDs need to be globally unique.\n    The conflicting ID is '${id}' and is found in SLS '${String(had.__env__)}:${String(had.__sls__)}' and SLS '${String(body.__env__)}:${String(body.__sls__)}'`);
    }
    high[id] = body;
  }
}
