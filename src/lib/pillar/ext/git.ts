/**
 * The `git` external pillar (git_pillar, salt/pillar/git_pillar.py):
 *
 * ```yaml
 * ext_pillar:
 *   - git:
 *     - master https://git.example.com/pillar.git      # branch master → pillar environment base
 *     - dev https://git.example.com/pillar.git:
 *       - env: dev
 *       - root: pillar
 *     - __env__ https://git.example.com/pillar.git     # the branch named like the minion's pillarenv/saltenv
 * ```
 *
 * Each remote's branch is a pillar tree with its own top file, compiled as Salt compiles it (a Pillar of its
 * own with `pillar_roots: {env: [this tree, the other trees of the same env (git_pillar_includes)]}`, no
 * external pillars), and the results merged in order with `pillar_source_merging_strategy` /
 * `pillar_merge_lists`. With a pillarenv, only the trees of that environment count. A branch that does not
 * exist falls back to the remote's `fallback`; `all_saltenvs` is the branch an `__env__` remote serves for
 * every environment.
 *
 * The trees come from the git cache (src/lib/fileserver/git-cache.ts), fetched by the main thread every
 * `git_pillar_update_interval` and at start; a compile never runs git (Salt's master also only checks out
 * locally here). A remote not fetched yet adds nothing (logged).
 */
import { getLogger } from "../../../shared/log.js";
import type { MasterConfig } from "../../../shared/config/defaults.js";
import { roleDir, StateReader, treeDir } from "../../fileserver/git-cache.js";
import { parseRemotes } from "../../fileserver/git-remotes.js";
import { PillarCompiler } from "../compile.js";
import { mergeWith, registerExtPillar, type ExtPillarContext, type ExtPillarResult } from "../ext-pillar.js";
import type { Data } from "../merge.js";

const log = getLogger("brine.pillar");

/** Compilers of git pillar trees kept per thread. */
export const gitPillarCompilersMax = 32;

const readers = new Map<string, StateReader>();
const compilers = new Map<string, PillarCompiler>();

function compilerFor(cfg: MasterConfig, env: string, roots: string[]): PillarCompiler {
  const key = JSON.stringify([env, roots]);
  let c = compilers.get(key);
  if (!c) {
    c = new PillarCompiler({ ...cfg, pillar_roots: { [env]: roots }, ext_pillar: [] } as MasterConfig);
    compilers.set(key, c);
    while (compilers.size > gitPillarCompilersMax) compilers.delete(compilers.keys().next().value!);
  }
  return c;
}

async function gitPillar(ctx: ExtPillarContext, args: unknown[]): Promise<ExtPillarResult> {
  const cfg = ctx.cfg;
  const parsed = parseRemotes(cfg, "git_pillar", args);
  if (parsed.errors.length) throw new Error(`git_pillar is misconfigured: ${parsed.errors.join("; ")}`);
  const base = roleDir(cfg, "git_pillar");
  let reader = readers.get(base);
  if (!reader) readers.set(base, (reader = new StateReader(base)));
  const state = reader.get();
  const saltenv = ctx.saltenv;
  // Salt's GitPillar.checkout: one (tree directory, env) per remote whose branch is checked out
  const dirs: Array<[string, string]> = [];
  for (const r of parsed.remotes) {
    const st = state?.remotes.find((x) => x.id === r.id);
    if (!st) {
      log.warning(`git_pillar remote '${r.id}' has not been fetched yet; it adds nothing until the next update`);
      continue;
    }
    // Salt's get_checkout_target: the branch, or for __env__ all_saltenvs, else the minion's environment
    let target = r.branch!;
    if (r.branch === "__env__") {
      const t = ctx.pillarenv || saltenv || "base";
      target = r.allSaltenvs ?? (t === "base" ? r.base : t);
    }
    // checkout: the target's branch or tag, else the fallback's
    const src = st.envs[target]?.tree ? st.envs[target] : r.fallback !== undefined ? st.envs[r.fallback] : undefined;
    if (!src?.tree) {
      log.error(`Failed to checkout ${target} from git_pillar remote '${r.id}': remote ref does not exist`);
      continue;
    }
    let env: string;
    if (r.branch === "__env__" && r.allSaltenvs !== undefined) env = ctx.pillarenv || saltenv || "base";
    else if (r.env) env = r.env;
    else env = r.branch === r.base || target === r.base ? "base" : target;
    dirs.push([treeDir(base, src.tree), env]);
  }
  const merge = mergeWith(cfg);
  const includes = cfg.git_pillar_includes !== false;
  let ret: Data = {};
  for (const [dir, env0] of dirs) {
    const env = env0 === "__env__" ? ctx.pillarenv || saltenv || String(cfg.git_pillar_base ?? "master") : env0;
    if (ctx.pillarenv && env !== ctx.pillarenv) continue;
    const roots = [dir, ...(includes ? dirs.filter(([d, e]) => e === env0 && d !== dir).map(([d]) => d) : [])];
    const compiled = await compilerFor(cfg, env, roots).compile({ id: ctx.minionId, grains: ctx.grains, saltenv: env, pillarenv: ctx.pillarenv, ext: false });
    ret = merge(ret, compiled);
  }
  return ret;
}

registerExtPillar("git", { run: gitPillar });
