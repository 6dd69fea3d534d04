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
 * are used.
 *
 * Shapes as Salt's gitfs: `_file_find`'s `stat` is `[mode]` (the git blob mode), there are no empty
 * directories, dir_list includes each mountpoint itself (not its parents), symlinks are listed as files and
 * in symlink_list with their targets. A symlink is followed only within the tree of its remote's root.
 */
import { realpathSync, statSync, type BigIntStats } from "node:fs";
import path from "node:path";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { readManifest, roleDir, roleRemotes, StateReader, treeDir, type Manifest } from "./git-cache.js";
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
  private sources = new Map<string, Source[]>();
  private readonly manifests = new Map<string, Manifest>();
  private readonly lists = new Map<string, { key: string; lists: EnvLists }>();

  constructor(cfg: MasterConfig, now: () => number = Date.now) {
    const backends = backendNames(cfg);
    this.enabled = (backends.includes("gitfs") || backends.includes("git")) && (roleRemotes(cfg, "gitfs", false)?.length ?? 0) > 0;
    this.base = roleDir(cfg, "gitfs");
    this.state = new StateReader(this.base, now);
  }

  /** Rebuild the environments when the state file changed (checked at most once per stateRecheckMs). */
  private refresh(): void {
    const state = this.state.get();
    if (this.state.generation === this.generation) return;
    this.generation = this.state.generation;
    const sources = new Map<string, Source[]>();
    for (const r of state?.remotes ?? []) {
      for (const [env, s] of Object.entries(r.envs)) {
        let l = sources.get(env);
        if (!l) sources.set(env, (l = []));
        if (s.tree) l.push({ tree: s.tree, dir: treeDir(this.base, s.tree), mountpoint: s.mountpoint });
      }
    }
    this.sources = sources;
    this.lists.clear();
  }

  envs(): string[] {
    if (!this.enabled) return [];
    this.refresh();
    return sortCodePoints(this.sources.keys());
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
    for (const s of this.sources.get(saltenv) ?? []) {
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
    const sources = this.sources.get(saltenv);
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
