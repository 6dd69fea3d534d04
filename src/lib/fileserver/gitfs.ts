/**
 * The `gitfs` fileserver backend as request workers serve it (Salt's salt/fileserver/gitfs.py over
 * salt.utils.gitfs.GitFS): environments are the branches and tags of `gitfs_remotes` (the `base` branch,
 * default master, is `base`), each remote's `root` subdirectory appears under its `mountpoint`, and for a
 * path the first remote (in configuration order) holding it wins.
 *
 * Workers never run git: they read what the updater (git-cache.ts) left in `cachedir/gitfs` — the state
 * file naming the tree of each environment of each remote, the checked-out trees and their manifests.
 * The state file is looked at (one stat) at most once per second (git-cache.ts `stateRecheckMs`); a new one is read and the
 * environments rebuilt, so an update is served without a restart. Trees are immutable (named by their git
 * tree id), so lists built from their manifests and hashes of their files stay valid for as long as they
 * are used. A remote with `fallback` (or `all_saltenvs`) also serves environments it has no ref for.
 *
 * Shapes as Salt's gitfs: `_file_find`'s `stat` is `[mode]` (the git blob mode), there are no empty
 * directories, dir_list includes each mountpoint itself (not its parents), symlinks are listed as files and
 * in symlink_list with their targets. A symlink is followed only within the tree of its remote's root.
 */
import { realpathSync, statSync, type BigIntStats } from "node:fs";
import path from "node:path";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { readManifest, refOf, roleDir, roleRemotes, StateReader, treeDir, type EnvSource, type Manifest, type RemoteState } from "./git-cache.js";
import { envExposed, type GitRemote } from "./git-remotes.js";
import type { EnvLists } from "./list-cache.js";
import { envName, isInside, parseRequestPath } from "./paths.js";
import { backendNames, type Found } from "./roots.js";
import { sortCodePoints } from "./sorting.js";

/** Manifests kept in memory per worker thread. */
export const manifestsMax = 256;

interface Source {
  tree: string;
  dir: string;
  mountpoint: string;
}

export class GitfsBackend {
  readonly name = "gitfs";
  readonly enabled: boolean;
  private readonly base: string;
  private readonly state: StateReader;
  private generation = -1;
  /** the configured remotes with their state, in configuration order */
  private remotes: Array<{ conf: GitRemote; st: RemoteState }> = [];
  private listed = new Set<string>();
  private readonly sourceCache = new Map<string, Source[] | null>();
  private readonly conf: GitRemote[];
  private readonly manifests = new Map<string, Manifest>();
  private readonly lists = new Map<string, { key: string; lists: EnvLists }>();

  constructor(cfg: MasterConfig, now: () => number = Date.now) {
    const backends = backendNames(cfg);
    this.conf = roleRemotes(cfg, "gitfs", false) ?? [];
    this.enabled = (backends.includes("gitfs") || backends.includes("git")) && this.conf.length > 0;
    this.base = roleDir(cfg, "gitfs");
    this.state = new StateReader(this.base, now);
  }

  /** Rebuild the environments when the state file changed (checked at most once per stateRecheckMs). */
  private refresh(): void {
    const state = this.state.get();
    if (this.state.generation === this.generation) return;
    this.generation = this.state.generation;
    const byId = new Map((state?.remotes ?? []).map((r) => [r.id, r]));
    this.remotes = this.conf.flatMap((conf) => (byId.has(conf.id) ? [{ conf, st: byId.get(conf.id)! }] : []));
    this.listed = new Set(this.remotes.flatMap((r) => Object.keys(r.st.envs)));
    this.sourceCache.clear();
    this.lists.clear();
  }

  envs(): string[] {
    if (!this.enabled) return [];
    this.refresh();
    return sortCodePoints(this.listed);
  }

  /**
   * The trees serving an environment, in remote order (Salt's GitFS.find_file / _file_lists over get_tree):
   * a remote's own tree for it, else its all_saltenvs or fallback tree when the environment maps to a ref
   * there and is exposed; null for an environment no remote serves.
   */
  private sourcesFor(env: string): Source[] | null {
    if (this.sourceCache.has(env)) return this.sourceCache.get(env)!;
    const out: Source[] = [];
    let known = this.listed.has(env);
    const add = (e: EnvSource) => e.tree && out.push({ tree: e.tree, dir: treeDir(this.base, e.tree), mountpoint: e.mountpoint });
    for (const { conf, st } of this.remotes) {
      const own = st.envs[env];
      if (own) {
        add(own);
        continue;
      }
      if (!st.any || !envExposed(conf, env) || refOf(conf, env) === null) continue;
      known = true;
      add(st.any);
    }
    const ret = known ? out : null;
    this.sourceCache.set(env, ret);
    while (this.sourceCache.size > 256) this.sourceCache.delete(this.sourceCache.keys().next().value!);
    return ret;
  }

  private manifest(tree: string): Manifest | null {
    const hit = this.manifests.get(tree);
    if (hit) return hit;
    const m = readManifest(this.base, tree);
    if (!m) return null;
    this.manifests.set(tree, m);
    while (this.manifests.size > manifestsMax) this.manifests.delete(this.manifests.keys().next().value!);
    return m;
  }

  async find(rawPath: unknown, saltenvArg: unknown): Promise<(Found & { mode: number }) | null> {
    if (!this.enabled) return null;
    const req = parseRequestPath(rawPath);
    if (!req) return null;
    const saltenv = req.saltenv ?? envName(saltenvArg);
    if (saltenv === null) return null;
    this.refresh();
    for (const s of this.sourcesFor(saltenv) ?? []) {
      if (s.mountpoint && !req.rel.startsWith(`${s.mountpoint}/`)) continue;
      const repoPath = s.mountpoint ? req.rel.slice(s.mountpoint.length + 1) : req.rel;
      if (!repoPath) continue;
      const full = path.join(s.dir, repoPath);
      let real: string;
      let st: BigIntStats;
      try {
        real = realpathSync.native(full);
        if (!isInside(realpathSync.native(s.dir), real)) continue;
        st = statSync(real, { bigint: true });
      } catch {
        continue;
      }
      if (!st.isFile()) continue;
      // the git blob mode: checkout-index wrote 0644/0755 (less the umask); git knows only these two
      const mode = Number(st.mode) & 0o111 ? 0o100755 : 0o100644;
      return { path: full, real, rel: req.rel, saltenv, stat: st, mode };
    }
    return null;
  }

  async envLists(saltenvArg: unknown): Promise<EnvLists | null> {
    if (!this.enabled) return null;
    const saltenv = envName(saltenvArg);
    if (saltenv === null) return null;
    this.refresh();
    const sources = this.sourcesFor(saltenv);
    if (!sources) return null;
    const key = sources.map((s) => `${s.tree}@${s.mountpoint}`).join(",");
    const hit = this.lists.get(saltenv);
    if (hit && hit.key === key) return hit.lists;
    const files = new Set<string>();
    const dirs = new Set<string>();
    const links: Record<string, string> = {};
    const at = (mp: string, p: string) => (mp ? `${mp}/${p}` : p);
    for (const s of sources) {
      const m = this.manifest(s.tree);
      if (!m) continue;
      for (const [p] of m.files) files.add(at(s.mountpoint, p));
      for (const d of m.dirs) dirs.add(at(s.mountpoint, d));
      if (s.mountpoint) dirs.add(s.mountpoint);
      for (const [p, t] of Object.entries(m.links)) links[at(s.mountpoint, p)] = t;
    }
    const lists: EnvLists = { files: sortCodePoints(files), dirs: sortCodePoints(dirs), emptyDirs: [], links };
    this.lists.set(saltenv, { key, lists });
    return lists;
  }
}
