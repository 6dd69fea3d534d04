/**
 * Pillar compilation for one minion (Salt's salt/pillar/__init__.py: Pillar.compile_pillar): top files →
 * matching SLS → render (jinja|yaml, shebangs) → `include:` → merge, and the external pillars
 * (ext-pillar.ts) after the SLS data, or before it with `ext_pillar_first` (then SLS templates see the
 * external data as `pillar`).
 *
 * Errors follow Salt: each problem becomes a line in the pillar's `_errors` list and a critical line in
 * the master log; one broken SLS leaves the others' data in place. With `pillar_safe_render_error`
 * (default True) the minion sees "Rendering SLS 'x' failed. Please see master log for details." and the
 * log holds the full render error (file, line, context); with False the minion gets the full error.
 */
import { getLogger } from "../../shared/log.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { fnmatchFilter } from "../targeting/fnmatch.js";
import type { NodegroupConfig } from "../targeting/index.js";
import { JinjaEnv } from "../render/jinja.js";
import { renderPipe } from "../render/pipe.js";
import { RenderError } from "../render/render-error.js";
import { makeSaltFuncs } from "../render/salt-funcs.js";
import { deepCopy, isDict, merge, type Data } from "./merge.js";
import { effectivePillarRoots, PillarTree, type TreeFile } from "./tree.js";
import { mergeTops, topMatches, TopError, type MergedTop } from "./top.js";
import { minionMatches } from "../targeting/index.js";
import { applyExtPillars, type ExtPillarRun } from "./ext-pillar.js";
import "./ext/builtins.js";

const log = getLogger("brine.pillar");

/** Depth of nested `include:` followed before giving up on a branch. */
export const includeDepthMax = 64;
/** Pillar trees (distinct effective pillar_roots) kept per worker thread. */
export const pillarTreesMax = 64;

export interface CompileRequest {
  id: string;
  grains: Data;
  saltenv?: string | null;
  pillarenv?: string | null;
  pillarOverride?: Data;
  /** false: no external pillars (Salt's compile_pillar(ext=False), as git_pillar compiles its trees) */
  ext?: boolean;
}

interface Run {
  req: CompileRequest;
  tree: PillarTree;
  grains: Data;
  saltenv: string | null;
  pillarenv: string | null;
  avail: Map<string, string[]>;
  ignored: Map<string, Set<string>>;
  opts: Data;
  /** `pillar` as SLS templates see it: {} or, with ext_pillar_first, the external pillars' data */
  pillarCtx: Data;
}

function str(v: unknown): string | null {
  return typeof v === "string" && v !== "" ? v : typeof v === "number" ? String(v) : null;
}

/** Salt's generate_sls_context for a template at `tmplpath` rendering `sls`. */
export function slsContext(tmplpath: string, sls: string): Data {
  let slspath = sls.split(".").join("/");
  let template = tmplpath;
  if (!sls) template = template.split("/").pop() ?? template;
  else if (template.endsWith(`${slspath}.sls`)) template = template.slice(-(4 + slspath.length));
  else if (template.endsWith(`${slspath}/init.sls`)) template = template.slice(-(9 + slspath.length));
  slspath = template.includes("/") ? template.slice(0, template.lastIndexOf("/")) : "";
  return {
    tplpath: tmplpath,
    tplfile: template,
    tpldir: slspath || ".",
    tpldot: slspath.split("/").join("."),
    slspath,
    slsdotpath: slspath.split("/").join("."),
    slscolonpath: slspath.split("/").join(":"),
    sls_path: slspath.split("/").join("_"),
  };
}

export class PillarCompiler {
  private readonly trees = new Map<string, PillarTree>();
  private readonly jinjas = new Map<string, JinjaEnv>();
  private readonly strategy: string;
  private readonly renderer: string;
  private readonly mergeLists: boolean;
  private readonly includesOverride: boolean;
  private readonly safeErrors: boolean;
  private readonly stateTop: string;

  constructor(readonly cfg: MasterConfig) {
    this.strategy = str(cfg.pillar_source_merging_strategy) ?? "smart";
    this.renderer = str(cfg.renderer) ?? "jinja|yaml";
    this.mergeLists = cfg.pillar_merge_lists === true;
    this.includesOverride = cfg.pillar_includes_override_sls === true;
    this.safeErrors = cfg.pillar_safe_render_error !== false;
    this.stateTop = (str(cfg.state_top) ?? "top.sls").replace(/^salt:\/\//, "").replace(/^\/+/, "");
    if (cfg.decrypt_pillar && Array.isArray(cfg.decrypt_pillar) && cfg.decrypt_pillar.length) {
      log.warning("decrypt_pillar is configured, but brine does not decrypt pillar data");
    }
  }

  private merge(a: Data, b: Data): Data {
    return merge(a, b, this.strategy, this.renderer, this.mergeLists);
  }

  private treeFor(env: string): PillarTree {
    const roots = effectivePillarRoots(this.cfg, env);
    const key = JSON.stringify([...roots]);
    let t = this.trees.get(key);
    if (!t) {
      t = new PillarTree(roots, this.cfg);
      this.trees.set(key, t);
      while (this.trees.size > pillarTreesMax) {
        const oldest = this.trees.keys().next().value!;
        this.trees.get(oldest)!.lists.clear();
        this.trees.delete(oldest);
        for (const k of [...this.jinjas.keys()]) if (k.startsWith(`${oldest}\0`)) this.jinjas.delete(k);
      }
    }
    return t;
  }

  /** The Jinja environment for a pillar environment; SLS files use `jinja_sls_env`, top files `jinja_env`. */
  private jinjaFor(tree: PillarTree, env: string, sls: boolean): JinjaEnv {
    const key = `${JSON.stringify([...tree.roots])}\0${env}\0${sls}`;
    let j = this.jinjas.get(key);
    if (!j) {
      const raw = sls ? this.cfg.jinja_sls_env : this.cfg.jinja_env;
      const envOpts = (isDict(raw) ? raw : {}) as Data;
      j = new JinjaEnv(
        (name) => {
          const f = tree.find(name, env);
          return f ? { path: f.path, sig: f.sig, read: () => tree.read(f) } : null;
        },
        {
          trimBlocks: this.cfg.jinja_trim_blocks === true || envOpts.trim_blocks === true,
          lstripBlocks: this.cfg.jinja_lstrip_blocks === true || envOpts.lstrip_blocks === true,
        },
      );
      this.jinjas.set(key, j);
    }
    return j;
  }

  /** Render one file of the pillar tree through the render pipe. */
  private renderFile(run: Run, f: TreeFile, env: string, sls: string, defaults: Data = {}): unknown {
    const text = run.tree.read(f);
    const context: Data = {
      // salt["pillar.get"] reads the pillar the functions were loaded with: without the external data even with
      // ext_pillar_first (Salt 3007 does not reload them), while `pillar` has it
      salt: makeSaltFuncs({ id: run.req.id, grains: run.grains, pillar: {}, opts: run.opts }),
      grains: run.grains,
      opts: run.opts,
      pillar: run.pillarCtx,
      saltenv: env,
      sls,
      proxy: {},
      ...slsContext(f.path, sls),
      ...defaults,
    };
    return renderPipe({
      text,
      file: f.path,
      name: f.rel,
      defaultPipe: this.renderer,
      jinja: this.jinjaFor(run.tree, env, sls !== ""),
      context,
      blacklist: Array.isArray(this.cfg.renderer_blacklist) ? this.cfg.renderer_blacklist.map(String) : [],
      whitelist: Array.isArray(this.cfg.renderer_whitelist) ? this.cfg.renderer_whitelist.map(String) : [],
    });
  }

  /** Salt's get_tops: rendered top files per environment, plus their includes. */
  private getTops(run: Run, errors: string[]): Map<string, unknown[]> {
    const tops = new Map<string, unknown[]>();
    const push = (env: string, v: unknown) => {
      let l = tops.get(env);
      if (!l) tops.set(env, (l = []));
      l.push(v);
    };
    let envs: string[];
    if (run.pillarenv) envs = run.tree.hasEnv(run.pillarenv) ? [run.pillarenv] : [];
    else {
      envs = run.tree.envs();
      if (this.strategy === "none") envs = envs.filter((e) => e === (run.saltenv || "base"));
    }
    try {
      for (const env of envs) {
        const f = run.tree.find(this.stateTop, env);
        if (f) push(env, this.renderFile(run, f, env, ""));
      }
    } catch (e) {
      errors.push(`Rendering Primary Top file failed, render error:\n${(e as Error).message}`);
      log.critical(`Pillar rendering failed for minion ${run.req.id}: ${(e as Error).message}`);
    }
    const done = new Map<string, Set<string>>();
    let includes = new Map<string, unknown[]>();
    for (const [env, ctops] of tops) {
      for (const ctop of ctops) {
        if (!isDict(ctop) || !("include" in ctop)) continue;
        const inc = ctop.include;
        includes.set(env, [...(includes.get(env) ?? []), ...(Array.isArray(inc) ? inc : [inc])]);
        delete ctop.include;
      }
    }
    for (let round = 0; includes.size && round < includeDepthMax; round++) {
      const next = new Map<string, unknown[]>();
      for (const [env, list] of includes) {
        let d = done.get(env);
        if (!d) done.set(env, (d = new Set()));
        for (const raw of list) {
          const sls = String(raw);
          if (d.has(sls)) continue;
          d.add(sls);
          try {
            const found = run.tree.findSls(sls, env);
            const rendered = found ? this.renderFile(run, found.file, env, "") : {};
            push(env, rendered);
            if (isDict(rendered) && "include" in rendered) {
              const inc = rendered.include;
              next.set(env, [...(next.get(env) ?? []), ...(Array.isArray(inc) ? inc : [inc])]);
              delete rendered.include;
            }
          } catch (e) {
            errors.push(`Rendering Top file ${sls} failed, render error:\n${(e as Error).message}`);
          }
        }
      }
      includes = next;
    }
    return tops;
  }

  /** Salt's render_pstate: one SLS and its includes. Returns [data|null, errors]. */
  private renderPstate(run: Run, sls: string, env: string, mods: Map<string, unknown>, defaults: Data, depth: number): [unknown, string[]] {
    const errors: string[] = [];
    const found = run.tree.findSls(sls, env);
    if (!found) {
      if (run.ignored.get(env)?.has(sls)) {
        log.debug(`Skipping ignored and missing SLS '${sls}' in environment '${env}'`);
        return [null, errors];
      }
      if ((run.tree.roots.get(env) ?? []).length) {
        const msg = `Specified SLS '${sls}' in environment '${env}' is not available on the salt master`;
        log.error(msg);
        errors.push(msg);
      } else {
        log.debug(`Specified SLS '${sls}' in environment '${env}' was not found.`);
      }
      return [null, errors];
    }
    let state: unknown = null;
    try {
      state = this.renderFile(run, found.file, env, sls, defaults);
    } catch (e) {
      const detail = e instanceof RenderError ? e.message : (e as Error).message;
      const msg = `Rendering SLS '${sls}' failed, render error:\n${detail}`;
      log.critical(`${msg} (minion ${run.req.id})`);
      errors.push(this.safeErrors ? `Rendering SLS '${sls}' failed. Please see master log for details.` : msg);
    }
    mods.set(sls, state);
    if (!state) return [state, errors];
    if (!isDict(state)) {
      const msg = `SLS '${sls}' does not render to a dictionary`;
      log.error(msg);
      errors.push(msg);
      return [state, errors];
    }
    if (!("include" in state)) return [state, errors];
    if (!Array.isArray(state.include)) {
      const msg = `Include Declaration in SLS '${sls}' is not formed as a list`;
      log.error(msg);
      errors.push(msg);
      return [state, errors];
    }
    const includeList = state.include as unknown[];
    delete state.include;
    if (depth >= includeDepthMax) {
      errors.push(`Include depth in SLS '${sls}' exceeds includeDepthMax (${includeDepthMax})`);
      return [state, errors];
    }
    const avail = run.avail.get(env);
    const includeStates: Data[] = [];
    let current: Data = state;
    let incDefaults = defaults;
    for (const item of includeList) {
      let sub: string;
      let key: string | null = null;
      if (isDict(item)) {
        const [name, v] = Object.entries(item)[0] ?? ["", {}];
        sub = name;
        const opts = isDict(v) ? v : {};
        incDefaults = isDict(opts.defaults) ? opts.defaults : {};
        key = typeof opts.key === "string" ? opts.key : null;
      } else sub = String(item);
      let matched: string[];
      if (avail) {
        matched = fnmatchFilter(avail, sub.replace(/^\.+/, "").split("/").join("."));
        if (sub.startsWith(".")) {
          const parts = found.source.endsWith("/init.sls") ? sls.split(".") : sls.split(".").slice(0, -1);
          sub = [...parts, sub.slice(1)].join(".");
        }
        matched.push(...fnmatchFilter(avail, sub));
      } else {
        errors.push(`No matching pillar environment for environment '${env}' found`);
        matched = [sub];
      }
      if (matched.length < 1) matched = [sub];
      for (const m of matched) {
        let nstate: unknown;
        if (!mods.has(m)) {
          const [n, err] = this.renderPstate(run, m, env, mods, incDefaults, depth + 1);
          nstate = n;
          errors.push(...err);
        } else nstate = mods.get(m);
        if (!nstate) continue;
        if (key !== null) for (const frag of key.split(":").reverse()) nstate = { [frag]: nstate };
        if (!isDict(nstate)) continue;
        if (this.includesOverride) current = this.merge(current, nstate);
        else includeStates.push(nstate);
      }
    }
    if (this.includesOverride) return [current, errors];
    includeStates.push(current);
    let merged: Data | null = null;
    for (const s of includeStates) merged = merged === null ? s : this.merge(merged, s);
    return [merged, errors];
  }

  /** Salt's render_pillar. */
  private renderPillar(run: Run, matches: Map<string, string[]>, errors: string[]): Data {
    let pillar: Data = { ...(run.req.pillarOverride ?? {}) };
    for (const [env, pstates] of matches) {
      const files: string[] = [];
      const mods = new Map<string, unknown>();
      const avail = run.avail.get(env);
      for (const m of pstates) {
        let matched: string[] = [];
        if (avail) matched = fnmatchFilter(avail, m);
        else errors.push(`No matching pillar environment for environment '${env}' found`);
        if (matched.length) files.push(...matched);
        else files.push(m);
      }
      for (const sls of files) {
        const [pstate, err] = this.renderPstate(run, sls, env, mods, {}, 0);
        errors.push(...err);
        if (pstate === null || pstate === undefined) continue;
        if (!isDict(pstate)) {
          log.error(`The rendered pillar sls file, '${sls}' state did not return the expected data format. This is a sign of a malformed pillar sls file. Returned errors: ${errors.map((e) => `'${e}'`).join(", ")}`);
          continue;
        }
        pillar = this.merge(pillar, pstate);
      }
    }
    return pillar;
  }

  /** The compiled pillar of one minion. Never throws for bad trees: problems land in `_errors`. */
  async compile(req: CompileRequest): Promise<Data> {
    const run = await this.prepare(req);
    const topErrors: string[] = [];
    const top = this.mergedTop(run, topErrors);
    const matches = topMatches(top, { id: req.id, grains: run.grains, nodegroups: (this.cfg.nodegroups ?? {}) as NodegroupConfig }, run.pillarenv);
    const errors: string[] = [];
    const ext = req.ext !== false && Array.isArray(this.cfg.ext_pillar) ? this.extRun(run) : null;
    let pillar: Data;
    if (ext && this.cfg.ext_pillar_first === true) {
      run.pillarCtx = await applyExtPillars(ext, {}, errors);
      pillar = this.merge(run.pillarCtx, this.renderPillar(run, matches, errors));
    } else {
      pillar = this.renderPillar(run, matches, errors);
      if (ext) pillar = await applyExtPillars(ext, pillar, errors);
    }
    errors.push(...topErrors);
    if (this.cfg.pillar_opts === true) {
      const { grains: _g, ...mopts } = run.opts;
      pillar.master = mopts;
    }
    if (errors.length) {
      for (const e of errors) log.critical(`Pillar render error: ${e}`);
      pillar._errors = errors;
    }
    if (req.pillarOverride && Object.keys(req.pillarOverride).length) pillar = this.merge(pillar, req.pillarOverride);
    return pillar;
  }

  /** What the external pillars of one compilation are given. */
  private extRun(run: Run): ExtPillarRun {
    const nodegroups = (this.cfg.nodegroups ?? {}) as NodegroupConfig;
    return {
      cfg: this.cfg,
      merge: (a, b) => this.merge(a, b),
      pillarOverride: run.req.pillarOverride ?? {},
      ctx: {
        minionId: run.req.id,
        grains: run.grains,
        cfg: this.cfg,
        pillarenv: run.pillarenv,
        saltenv: run.saltenv,
        matches: (tgt) => minionMatches({ tgt, tgt_type: "compound" }, { id: run.req.id, grains: run.grains, pillar: {}, nodegroups }),
      },
    };
  }

  /**
   * Salt's Pillar.get_top (pillar.show_top): the merged top data, {env: {target: [match items…, SLS…]}} in
   * Salt's order, and the errors met rendering or merging the top files.
   */
  async top(req: CompileRequest): Promise<{ top: Record<string, Record<string, unknown[]>>; errors: string[] }> {
    const run = await this.prepare(req);
    const errors: string[] = [];
    const merged = this.mergedTop(run, errors);
    const top: Record<string, Record<string, unknown[]>> = {};
    for (const [env, targets] of merged) {
      top[env] = {};
      for (const [tgt, t] of targets) top[env]![tgt] = [...t.options, ...t.states];
    }
    return { top, errors };
  }

  /** get_tops then merge_tops; a malformed top is an error and an empty top, as in Salt. */
  private mergedTop(run: Run, errors: string[]): MergedTop {
    const tops = this.getTops(run, errors);
    try {
      return mergeTops(tops, run.ignored);
    } catch (e) {
      errors.push(e instanceof TopError ? e.message : "Error encountered while rendering pillar top file.");
      return new Map();
    }
  }

  /** What one compilation works from: environments, tree, grains with the id, opts, available SLS per environment. */
  private async prepare(req: CompileRequest): Promise<Run> {
    const saltenv = str(req.saltenv) ?? str(this.cfg.saltenv);
    let pillarenv = str(req.pillarenv);
    if (pillarenv === null) pillarenv = this.cfg.pillarenv_from_saltenv === true ? saltenv : str(this.cfg.pillarenv);
    const env = pillarenv || saltenv || "base";
    const tree = this.treeFor(env);
    const grains: Data = { ...req.grains, id: req.id };
    const opts: Data = {
      ...deepCopy(this.cfg as unknown as Data),
      id: req.id,
      grains,
      saltenv,
      pillarenv,
      file_client: "local",
      pillar_roots: Object.fromEntries(tree.roots),
    };
    const avail = new Map<string, string[]>();
    for (const e of tree.envs()) avail.set(e, await tree.listStates(e));
    return { req, tree, grains, saltenv, pillarenv, avail, ignored: new Map(), opts, pillarCtx: {} };
  }
}
