/**
 * fileserver.* runners (Salt's salt/runners/fileserver.py over salt.fileserver.Fileserver), answered from a
 * roots backend of the runner thread's own (the same code and configuration the request workers serve from).
 *
 * `backend` narrows the enabled backends as Salt does: a comma-separated string or a list; when every name
 * starts with `-`, those are excluded from the enabled ones, otherwise names with `-` are ignored.
 * roots has no update step, cache or lock of its own: update answers True, clear_cache "No cache was
 * cleared", clear_lock "No locks were removed", lock "No locks were set" (Salt's answers for roots).
 * clear_file_list_cache answers {} (no change): brine's list caches live in memory and notice changes by
 * themselves (src/fileserver/list-cache.ts), there is no file list cache on disk to remove.
 */
import { RootsBackend } from "../fileserver/roots.js";
import { sortCodePoints } from "../fileserver/sorting.js";
import { argOf, type RunnerContext, type RunnerFn } from "./context.js";

/** The backends fileserver_backend enables, in its order. */
function enabledBackends(ctx: RunnerContext): string[] {
  const opt: unknown = ctx.cfg.fileserver_backend;
  return Array.isArray(opt) ? opt.map(String) : typeof opt === "string" ? opt.split(",").map((s) => s.trim()) : ["roots"];
}

/** Salt's Fileserver.backends(back): the enabled backends `back` selects. */
export function selectBackends(enabled: string[], back: unknown): string[] {
  if (back === null || back === undefined || back === "") return enabled;
  const names = (Array.isArray(back) ? back.map(String) : String(back).split(",")).map((s) => s.trim()).filter(Boolean);
  if (names.every((n) => n.startsWith("-"))) {
    const drop = new Set(names.map((n) => n.slice(1)));
    return enabled.filter((b) => !drop.has(b));
  }
  return enabled.filter((b) => names.filter((n) => !n.startsWith("-")).includes(b));
}

let roots: RootsBackend | undefined;
/** Only roots is served by brine; null when `back` does not select it. */
function rootsFor(ctx: RunnerContext, back: unknown): RootsBackend | null {
  if (!selectBackends(enabledBackends(ctx), back).includes("roots")) return null;
  return (roots ??= new RootsBackend(ctx.cfg, { watchDirsMax: 0 }));
}

const backOf = (arg: unknown[], kwarg: Record<string, unknown>, index: number) => argOf(arg, kwarg, index, "backend", null);
const saltenvOf = (arg: unknown[], kwarg: Record<string, unknown>) => String(argOf(arg, kwarg, 0, "saltenv", "base"));

type ListKind = "files" | "dirs" | "emptyDirs";

const lister =
  (kind: ListKind): RunnerFn =>
  async (ctx, arg, kwarg) => {
    const lists = await rootsFor(ctx, backOf(arg, kwarg, 1))?.envLists(saltenvOf(arg, kwarg));
    return lists ? lists[kind].slice() : [];
  };

export const fileserverRunners: Record<string, RunnerFn> = {
  "fileserver.envs": async (ctx, arg, kwarg) => sortCodePoints(rootsFor(ctx, backOf(arg, kwarg, 0))?.envs() ?? []),
  "fileserver.file_list": lister("files"),
  "fileserver.dir_list": lister("dirs"),
  "fileserver.empty_dir_list": lister("emptyDirs"),
  "fileserver.file_list_emptydirs": lister("emptyDirs"),
  "fileserver.symlink_list": async (ctx, arg, kwarg) => {
    const lists = await rootsFor(ctx, backOf(arg, kwarg, 1))?.envLists(saltenvOf(arg, kwarg));
    return lists ? { ...lists.links } : {};
  },
  "fileserver.update": async () => true,
  "fileserver.clear_file_list_cache": async () => ({}),
  "fileserver.clear_cache": async () => "No cache was cleared",
  "fileserver.clear_lock": async () => "No locks were removed",
  "fileserver.lock": async () => "No locks were set",
};
