/**
 * fileserver.* runners (Salt's salt/runners/fileserver.py over salt.fileserver.Fileserver), answered from
 * backends of the runner thread's own (the same code and configuration the request workers serve from):
 * roots and gitfs.
 *
 * `backend` narrows the enabled backends as Salt does: a comma-separated string or a list; when every name
 * starts with `-`, those are excluded from the enabled ones, otherwise names with `-` are ignored; `git` is
 * gitfs's alias. The lists answer as Salt's Fileserver combines backends (unions, sorted; empty_dir_list
 * looks at every enabled backend whatever `backend` says, as Salt's does; symlink_list is the last
 * backend's answer).
 *
 * roots has no update step, cache or lock of its own: with roots only, update answers True, clear_cache
 * "No cache was cleared", clear_lock "No locks were removed", lock "No locks were set" (Salt's answers).
 * gitfs: update fetches its remotes (`remotes=` narrows them by id or name) in this thread, waiting for the
 * result, as Salt's runner does (src/lib/fileserver/git-cache.ts; the request workers see the new trees at
 * once); clear_cache removes cachedir/gitfs (the next update fetches again); lock / clear_lock set and
 * remove the update locks (`remote=` is a glob over the URLs).
 * git_pillar.update [branch=…] [repo=URL|name] (Salt's salt/runners/git_pillar.py) fetches the git_pillar
 * remotes now: {remote id: True (new commits), None (nothing new), False (failed)}.
 * clear_file_list_cache answers {} (no change): brine's list caches live in memory and notice changes by
 * themselves (src/lib/fileserver/list-cache.ts, gitfs.ts), there is no file list cache on disk to remove.
 */
import { clearRoleCache, lockRemotes, roleRemotes, updateRole } from "../lib/fileserver/git-cache.js";
import { FileserverHandlers } from "../lib/fileserver/handlers.js";
import { GitfsBackend } from "../lib/fileserver/gitfs.js";
import { backendNames, RootsBackend } from "../lib/fileserver/roots.js";
import { argOf, type RunnerContext, type RunnerFn } from "./context.js";

/** Salt's Fileserver.backends(back): the enabled backends `back` selects (gitfs's alias `git` as gitfs). */
export function selectBackends(enabled: string[], back: unknown): string[] {
  const norm = (b: string) => (b === "git" ? "gitfs" : b);
  const on = enabled.map(norm);
  if (back === null || back === undefined || back === "") return on;
  const names = (Array.isArray(back) ? back.map(String) : String(back).split(",")).map((s) => s.trim()).filter(Boolean);
  if (names.every((n) => n.startsWith("-"))) {
    const drop = new Set(names.map((n) => norm(n.slice(1))));
    return on.filter((b) => !drop.has(b));
  }
  const want = names.filter((n) => !n.startsWith("-")).map(norm);
  return want.filter((b) => on.includes(b));
}

let backends: { roots: RootsBackend; gitfs: GitfsBackend } | undefined;
function handlersFor(ctx: RunnerContext, back: unknown): FileserverHandlers {
  backends ??= { roots: new RootsBackend(ctx.cfg, { watchDirsMax: 0 }), gitfs: new GitfsBackend(ctx.cfg) };
  return new FileserverHandlers(backends.roots, backends.gitfs, selectBackends(backendNames(ctx.cfg), back));
}

const backOf = (arg: unknown[], kwarg: Record<string, unknown>, index: number) => argOf(arg, kwarg, index, "backend", null);
const saltenvOf = (arg: unknown[], kwarg: Record<string, unknown>) => String(argOf(arg, kwarg, 0, "saltenv", "base"));
const gitfsOn = (ctx: RunnerContext, back: unknown) => selectBackends(backendNames(ctx.cfg), back).includes("gitfs");

/** {key: list} with only the non-empty lists, or `none` when both are empty (Salt's runner answers). */
function answer(key: string, done: string[], errors: string[], none: string): unknown {
  const ret: Record<string, string[]> = {};
  if (done.length) ret[key] = done;
  if (errors.length) ret.errors = errors;
  return Object.keys(ret).length ? ret : none;
}

export const fileserverRunners: Record<string, RunnerFn> = {
  "fileserver.envs": async (ctx, arg, kwarg) => handlersFor(ctx, backOf(arg, kwarg, 0)).fileEnvs(),
  "fileserver.file_list": async (ctx, arg, kwarg) => handlersFor(ctx, backOf(arg, kwarg, 1)).fileList({ saltenv: saltenvOf(arg, kwarg) }),
  "fileserver.dir_list": async (ctx, arg, kwarg) => handlersFor(ctx, backOf(arg, kwarg, 1)).dirList({ saltenv: saltenvOf(arg, kwarg) }),
  "fileserver.empty_dir_list": async (ctx, arg, kwarg) => handlersFor(ctx, null).fileListEmptydirs({ saltenv: saltenvOf(arg, kwarg) }),
  "fileserver.file_list_emptydirs": async (ctx, arg, kwarg) => handlersFor(ctx, null).fileListEmptydirs({ saltenv: saltenvOf(arg, kwarg) }),
  "fileserver.symlink_list": async (ctx, arg, kwarg) => handlersFor(ctx, backOf(arg, kwarg, 1)).symlinkList({ saltenv: saltenvOf(arg, kwarg) }),
  "fileserver.update": async (ctx, arg, kwarg) => {
    if (gitfsOn(ctx, backOf(arg, kwarg, 0))) {
      const remotes = kwarg.remotes;
      const only = remotes === undefined || remotes === null ? undefined : Array.isArray(remotes) ? remotes.map(String) : String(remotes).split(",");
      await updateRole(ctx.cfg, "gitfs", { only });
    }
    return true;
  },
  "fileserver.clear_file_list_cache": async () => ({}),
  "fileserver.clear_cache": async (ctx, arg, kwarg) => {
    if (!gitfsOn(ctx, backOf(arg, kwarg, 0))) return "No cache was cleared";
    const errors = await clearRoleCache(ctx.cfg, "gitfs");
    return answer("cleared", errors.length ? [] : ["The gitfs fileserver cache was successfully cleared"], errors, "No cache was cleared");
  },
  "fileserver.clear_lock": async (ctx, arg, kwarg) => {
    if (!gitfsOn(ctx, backOf(arg, kwarg, 0))) return "No locks were removed";
    const [done, errors] = lockRemotes(ctx.cfg, "gitfs", argOf(arg, kwarg, 1, "remote", null), false);
    return answer("cleared", done, errors, "No locks were removed");
  },
  "fileserver.lock": async (ctx, arg, kwarg) => {
    if (!gitfsOn(ctx, backOf(arg, kwarg, 0))) return "No locks were set";
    const remote = argOf(arg, kwarg, 1, "remote", null);
    if (remote !== null && typeof remote !== "string") return { errors: [`Badly formatted remote pattern '${String(remote)}'`] };
    const [done, errors] = lockRemotes(ctx.cfg, "gitfs", remote, true);
    return answer("locked", done, errors, "No locks were set");
  },
  "git_pillar.update": async (ctx, arg, kwarg) => {
    const branch = argOf(arg, kwarg, 0, "branch", null);
    const repo = argOf(arg, kwarg, 1, "repo", null);
    const select = (r: { branch?: string; url: string; name?: string }) =>
      (branch === null || branch === r.branch) && (repo === null || repo === r.url || repo === r.name);
    const remotes = (roleRemotes(ctx.cfg, "git_pillar") ?? []).filter(select);
    if (!remotes.length) throw new Error(branch !== null || repo !== null ? "Specified git branch/repo not found in ext_pillar config" : "No git_pillar remotes are configured");
    const res = await updateRole(ctx.cfg, "git_pillar", { select });
    const ret: Record<string, boolean | null> = {};
    for (const r of remotes) ret[r.id] = res.changedIds.includes(r.id) ? true : res.updated.includes(r.id) ? null : false;
    return ret;
  },
};
