/**
 * `_master_opts`: the master settings a minion's state system reads (it reads `renderer`, `state_top`
 * and `file_roots` without defaults, so they must always be present).
 *
 * As Salt's AESFuncs._master_opts, `file_roots` maps each fileserver environment to an empty list: the
 * minion only needs the names (the paths stay on the master).
 */
import type { MasterConfig } from "../../shared/config/defaults.js";
import { sortCodePoints } from "../../lib/fileserver/sorting.js";

function fileserverEnvs(cfg: MasterConfig): string[] {
  const opt: unknown = cfg.fileserver_backend;
  const backends: string[] = Array.isArray(opt) ? opt.map(String) : typeof opt === "string" ? opt.split(",").map((s) => s.trim()) : ["roots"];
  const roots: unknown = cfg.file_roots;
  if (!backends.includes("roots") || typeof roots !== "object" || roots === null || Array.isArray(roots)) return [];
  return sortCodePoints(Object.keys(roots));
}

export function masterOptsForMinion(cfg: MasterConfig, envOnly: boolean): Record<string, unknown> {
  const fileRoots: Record<string, string[]> = {};
  for (const env of fileserverEnvs(cfg)) fileRoots[env] = [];
  const base: Record<string, unknown> = {
    file_roots: fileRoots,
    top_file_merging_strategy: cfg.top_file_merging_strategy ?? "merge",
    env_order: cfg.env_order ?? [],
    default_top: cfg.default_top ?? "base",
  };
  if (envOnly) return base;
  return {
    ...base,
    renderer: cfg.renderer ?? "jinja|yaml",
    failhard: cfg.failhard ?? false,
    state_top: cfg.state_top ?? "top.sls",
    state_top_saltenv: cfg.state_top_saltenv ?? null,
    nodegroups: cfg.nodegroups ?? {},
    state_auto_order: cfg.state_auto_order ?? true,
    state_events: cfg.state_events ?? false,
    state_aggregate: cfg.state_aggregate ?? false,
    jinja_env: cfg.jinja_env ?? {},
    jinja_sls_env: cfg.jinja_sls_env ?? {},
    jinja_lstrip_blocks: cfg.jinja_lstrip_blocks ?? false,
    jinja_trim_blocks: cfg.jinja_trim_blocks ?? false,
  };
}
