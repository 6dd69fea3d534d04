/**
 * The pillar tree: `pillar_roots` environments read with the fileserver's path rules (first root wins,
 * no `..`, absolute paths or NUL, nothing whose real path leaves its root) and its list cache
 * (`list_states`: every `.sls` file as a dotted name, `a/init.sls` as `a`).
 *
 * Lookups are synchronous (Jinja includes resolve while a template renders); they stat the file each
 * time, so an edited pillar file is seen by the next compile.
 */
import { readFileSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { IgnoreRules } from "../fileserver/ignore.js";
import { FileListCache, listOptionsFromConfig } from "../fileserver/list-cache.js";
import { isInside, isSafeEnvComponent, normalizeRel, normalizeRoots } from "../fileserver/paths.js";
import { statSignature } from "../fileserver/hash-cache.js";

/** Largest pillar file read (bytes). */
export const pillarFileBytesMax = 16 * 1024 * 1024;

export interface TreeFile {
  /** root + rel (Salt's `tmplpath`) */
  path: string;
  real: string;
  rel: string;
  sig: string;
}

/**
 * `pillar_roots` with Salt's `__env__` handling (Pillar.__gen_opts): an `__env__` entry is renamed to
 * the effective environment (pillarenv, else saltenv, else base) with `__env__` replaced in its paths,
 * unless that environment is configured by name (then `__env__` is dropped).
 */
export function effectivePillarRoots(cfg: MasterConfig, env: string): Map<string, string[]> {
  const roots = normalizeRoots(cfg.pillar_roots);
  const any = roots.get("__env__");
  if (any) {
    roots.delete("__env__");
    if (!roots.has(env) && isSafeEnvComponent(env)) roots.set(env, any.map((r) => r.split("__env__").join(env)));
  }
  return roots;
}

export class PillarTree {
  readonly lists: FileListCache;
  private readonly ignore: IgnoreRules;
  /** list_states results per file list object (a new list object means the tree changed) */
  private readonly states = new WeakMap<object, string[]>();

  constructor(
    readonly roots: ReadonlyMap<string, string[]>,
    cfg: MasterConfig,
  ) {
    this.ignore = new IgnoreRules(cfg.file_ignore_regex, cfg.file_ignore_glob);
    this.lists = new FileListCache(listOptionsFromConfig(this.roots, cfg, this.ignore));
  }

  /** Environments Salt's Pillar._get_envs reports: base first, then the configured ones. */
  envs(): string[] {
    return ["base", ...[...this.roots.keys()].filter((e) => e !== "base")];
  }

  hasEnv(env: string): boolean {
    return this.roots.has(env);
  }

  /** A file by relative path in an environment; null when missing or unsafe. */
  find(relRaw: string, env: string): TreeFile | null {
    const rel = normalizeRel(relRaw);
    const roots = this.roots.get(env);
    if (rel === null || !roots || this.ignore.ignored(rel)) return null;
    for (const root of roots) {
      const full = path.join(root, rel);
      if (this.ignore.ignored(full)) continue;
      try {
        const real = realpathSync.native(full);
        if (!isInside(realpathSync.native(root), real)) continue;
        const st = statSync(real, { bigint: true });
        if (!st.isFile()) continue;
        return { path: full, real, rel, sig: statSignature(st) };
      } catch {
        // not in this root
      }
    }
    return null;
  }

  read(f: TreeFile): string {
    const st = statSync(f.real);
    if (st.size > pillarFileBytesMax) throw new Error(`${f.path} exceeds pillarFileBytesMax (${pillarFileBytesMax} bytes)`);
    return readFileSync(f.real, "utf8");
  }

  /** Salt's fileclient.get_state: `a.b` → `a/b.sls`, then `a/b/init.sls`. */
  findSls(sls: string, env: string): { file: TreeFile; source: string } | null {
    const base = sls.split(".").join("/");
    for (const rel of [`${base}.sls`, `${base}/init.sls`]) {
      const f = this.find(rel, env);
      if (f) return { file: f, source: `salt://${rel}` };
    }
    return null;
  }

  /** Salt's fileclient.list_states for an environment (sorted dotted names; cached per file list). */
  async listStates(env: string): Promise<string[]> {
    const l = await this.lists.get(env);
    if (!l) return [];
    const hit = this.states.get(l);
    if (hit) return hit;
    const out = new Set<string>();
    for (const f of l.files) {
      if (!f.endsWith(".sls")) continue;
      out.add(f.endsWith("/init.sls") ? f.slice(0, -9).split("/").join(".") : f.slice(0, -4).split("/").join("."));
    }
    const states = [...out].sort();
    this.states.set(l, states);
    return states;
  }
}
