/**
 * The git cache of gitfs and git_pillar, and its updater: the only code that runs git.
 *
 * Layout (Salt's where Salt has one, so a cache a Python master made is reused):
 *   cachedir/<role>/<hash>/_/.git        one clone per remote (`<hash>`: the remote's `name`, else
 *                                        base64(hash_type(remote id)) with `/` → `_`, as Salt names it)
 *   cachedir/<role>/work/<hash>/_/update.lk   the update lock (pid on the first line), as Salt's
 *   cachedir/<role>/brine-trees/<tree>/  a checked-out git tree, named by its tree id: immutable once
 *                                        there, so request workers cache hashes and lists of it forever
 *   cachedir/<role>/brine-trees/<tree>.json   its manifest: files with their git modes, directories, symlinks
 *   cachedir/<role>/brine-state.json     which tree serves what: written last, atomically (rename)
 *
 * An update (`updateRole`): for each remote due, take its lock, `git fetch --prune` its refspecs,
 * read its refs, work out the environments (gitfs: Salt's _get_envs_from_ref_paths; git_pillar: the
 * configured branch, or every branch for `__env__`), resolve each to the tree at `root`, check out the
 * trees not yet there (`git read-tree` + `git checkout-index` into a temporary directory, renamed into
 * place), then write the state file. Workers see the new trees at their next look at the state file
 * (gitfs.ts: at most one stat per second), without a restart. Trees no state refers to are removed after
 * `treeGraceMs` (a request may still be reading one).
 *
 * Who calls it: the main thread's maintenance timer (every second it asks which remotes are due:
 * `gitfs_update_interval`, `git_pillar_update_interval` or a remote's `update_interval`; the first pass
 * right after start), and the fileserver.update runner. Both are in this process: the lock file keeps them
 * from updating one remote at once (the second skips it with a warning, as Salt's update does).
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, utimesSync, writeFileSync, openSync, closeSync, writeSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../../shared/log.js";
import { isBrineError } from "../../shared/errors.js";
import type { MasterConfig } from "../../shared/config/defaults.js";
import { git, gitFetchTimeoutMs } from "./git-cli.js";
import { envExposed, gitPillarRemoteLists, parseRemotes, type GitRemote, type GitRole } from "./git-remotes.js";
import { sortCodePoints } from "./sorting.js";
import { fnmatch } from "../targeting/fnmatch.js";

const log = getLogger("brine.gitfs");

/** An unreferenced tree is kept this long (ms) after the last state that used it. */
export const treeGraceMs = 10 * 60_000;
/** Most branches of one `__env__` git_pillar remote checked out. */
export const envBranchesMax = 256;
export const STATE_FILE = "brine-state.json";
export const TREES_DIR = "brine-trees";

export interface EnvSource {
  /** the commit the ref points at */
  commit: string;
  /** the tree at the remote's root in that commit; null when the root is not in it */
  tree: string | null;
  mountpoint: string;
}

export interface RemoteState {
  id: string;
  hash: string;
  /** gitfs: environment → source */
  envs: Record<string, EnvSource>;
  /** gitfs: the source of any other environment (all_saltenvs, else fallback), when configured */
  any?: EnvSource;
  /** git_pillar: the branch (or `__env__`), env, base */
  branch?: string;
  env?: string;
  base?: string;
  /** when this remote was last fetched successfully (ms) */
  fetched?: number;
}

export interface RoleState {
  version: 1;
  updated: number;
  remotes: RemoteState[];
}

export interface Manifest {
  /** [path, git mode] sorted by path */
  files: Array<[string, number]>;
  dirs: string[];
  links: Record<string, string>;
}

export const roleDir = (cfg: MasterConfig, role: GitRole) => path.join(typeof cfg.cachedir === "string" ? cfg.cachedir : "/var/cache/salt/master", role);
export const treeDir = (base: string, tree: string) => path.join(base, TREES_DIR, tree);

/** The remotes of a role, or null when the role is off or misconfigured (errors logged critical once). */
export function roleRemotes(cfg: MasterConfig, role: GitRole, logIt = true): GitRemote[] | null {
  const lists = role === "gitfs" ? [cfg.gitfs_remotes ?? []] : gitPillarRemoteLists(cfg);
  const out: GitRemote[] = [];
  const seen = new Set<string>();
  for (const list of lists) {
    const p = parseRemotes(cfg, role, list);
    if (logIt) for (const w of p.warnings) log.warning(w);
    if (p.errors.length) {
      if (logIt) for (const e of p.errors) log.critical(e);
      if (logIt) log.critical(`Failed to load ${role}: its configuration has errors (above); ${role} is disabled`);
      return null;
    }
    for (const r of p.remotes) if (!seen.has(r.hashDir)) (seen.add(r.hashDir), out.push(r));
  }
  return out;
}

function readJson<T>(file: string): T | null {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as T;
  } catch {
    return null;
  }
}

export function readState(base: string): RoleState | null {
  const s = readJson<RoleState>(path.join(base, STATE_FILE));
  return s && s.version === 1 && Array.isArray(s.remotes) ? s : null;
}

/** The state file is stat'ed at most this often (ms) by its readers. */
export const stateRecheckMs = 1000;

/** A reader of a role's state file: re-read when it changed, looked at (one stat) at most once per stateRecheckMs. */
export class StateReader {
  private checkedAt = -Infinity;
  private sig = "";
  private state: RoleState | null = null;
  /** bumped each time a changed state file was read */
  generation = 0;

  constructor(
    readonly base: string,
    private readonly now: () => number = Date.now,
  ) {}

  get(): RoleState | null {
    const now = this.now();
    if (now - this.checkedAt < stateRecheckMs) return this.state;
    this.checkedAt = now;
    let sig = "";
    try {
      const st = statSync(path.join(this.base, STATE_FILE), { bigint: true });
      sig = `${st.ino}:${st.size}:${st.mtimeNs}`;
    } catch {
      sig = "";
    }
    if (sig !== this.sig) {
      this.sig = sig;
      this.state = sig ? readState(this.base) : null;
      this.generation++;
    }
    return this.state;
  }
}

function writeAtomic(file: string, text: string): void {
  const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  writeFileSync(tmp, text);
  renameSync(tmp, file);
}

// --- locks (Salt's update.lk) ---

export const lockFile = (r: GitRemote) => path.join(path.dirname(r.hashDir), "work", path.basename(r.hashDir), "_", "update.lk");

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Take a remote's lock; false when a live process (this one included) holds it, or another machine (a master
 * sharing this cachedir: the lock names its machine id, as Salt's does). A lock of this machine whose process
 * is gone is taken over.
 */
export function takeLock(r: GitRemote): boolean {
  const f = lockFile(r);
  mkdirSync(path.dirname(f), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(f, "wx");
      writeSync(fd, `${process.pid}\n${machineId()}\n`);
      closeSync(fd);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    let pid = 0;
    let mach = "";
    try {
      const lines = readFileSync(f, "utf8").split("\n");
      pid = Number.parseInt(lines[0] ?? "", 10) || 0;
      mach = (lines[1] ?? "").trim();
    } catch {
      pid = 0;
    }
    if (mach && mach !== "brine" && mach !== machineId()) return false;
    if (pid && pidAlive(pid)) return false;
    log.warning(`Removing stale update lock for ${r.role} remote '${r.id}' (process ${pid || "unknown"} is not running)`);
    rmSync(f, { force: true });
  }
  return false;
}

function heldHere(f: string): boolean {
  try {
    const [pid, mach] = readFileSync(f, "utf8").split("\n");
    return Number(pid) === process.pid && (mach ?? "").trim() === machineId();
  } catch {
    return false;
  }
}

export function releaseLock(r: GitRemote): void {
  rmSync(lockFile(r), { force: true });
}

/** The machine id Salt names in its locks and lock messages (/etc/machine-id, as salt.utils.platform reads it). */
let machine: string | undefined;
export function machineId(): string {
  return (machine ??= readMachineId());
}

function readMachineId(): string {
  for (const f of ["/etc/machine-id", "/var/lib/dbus/machine-id"]) {
    try {
      const id = readFileSync(f, "utf8").trim();
      if (id) return id;
    } catch {
      // next
    }
  }
  return "no_machine_id_available";
}

/** Salt's GitBase.lock / clear_lock over the remotes whose URL matches `pattern` (fnmatch): [done, errors]. */
export function lockRemotes(cfg: MasterConfig, role: GitRole, pattern: unknown, set: boolean): [string[], string[]] {
  const done: string[] = [];
  const errors: string[] = [];
  for (const r of roleRemotes(cfg, role, false) ?? []) {
    if (pattern !== null && pattern !== undefined && pattern !== "" && !fnmatch(r.url, String(pattern))) continue;
    const f = lockFile(r);
    try {
      if (set) {
        // held by this master already (an earlier lock): set, as Salt answers when it re-takes its own lock
        if (!takeLock(r) && !heldHere(f)) {
          errors.push(`Update lock for ${role} remote '${r.id}' is held by another process`);
          continue;
        }
        done.push(`Set update lock for ${role} remote '${r.id}' on machine_id '${machineId()}'`);
      } else if (existsSync(f)) {
        rmSync(f, { recursive: true, force: true });
        done.push(`Removed update lock for ${role} remote '${r.id}' on machine_id '${machineId()}'`);
      }
    } catch (e) {
      errors.push(`Unable to ${set ? "set" : "remove"} update lock for ${r.url} (${f}): ${(e as Error).message} `);
    }
  }
  return [done, errors];
}

// --- one remote ---

const gitConfig = (r: GitRemote) => (r.sslVerify ? [] : ["http.sslVerify=false"]);

async function ensureClone(r: GitRemote): Promise<void> {
  if (existsSync(r.gitDir)) return;
  mkdirSync(path.dirname(r.gitDir), { recursive: true });
  await git(["init", "--quiet", path.dirname(r.gitDir)]);
  await git(["config", "remote.origin.url", r.url], { gitDir: r.gitDir });
  log.info(`${r.role}: initialised the cache of remote '${r.id}' in ${path.dirname(r.gitDir)}`);
}

async function fetch(r: GitRemote): Promise<void> {
  await git(["fetch", "--prune", "--quiet", "--no-tags", "--force", r.url, ...r.refspecs], { gitDir: r.gitDir, timeoutMs: gitFetchTimeoutMs, config: gitConfig(r) });
}

interface Ref {
  name: string;
  commit: string;
}

/** refs/remotes/origin/* and refs/tags/* with their commits (annotated tags peeled). */
async function listRefs(r: GitRemote): Promise<Ref[]> {
  const out = (await git(["for-each-ref", "--format=%(refname)%00%(objectname)%00%(*objectname)%00%(objecttype)%00%(*objecttype)", "refs/remotes/origin", "refs/tags"], { gitDir: r.gitDir })).toString("utf8");
  const refs: Ref[] = [];
  for (const line of out.split("\n")) {
    if (!line) continue;
    const [name, obj, peeled, type, ptype] = line.split("\0");
    const commit = type === "commit" ? obj : ptype === "commit" ? peeled : "";
    if (name && commit) refs.push({ name, commit });
  }
  return refs;
}

/** Objects for `rev:path` specs (cat-file --batch-check): spec → [sha, type] or null. */
async function resolveObjects(r: GitRemote, specs: string[]): Promise<Map<string, [string, string] | null>> {
  const out = new Map<string, [string, string] | null>();
  if (!specs.length) return out;
  const lines = (await git(["cat-file", "--batch-check=%(objectname) %(objecttype)"], { gitDir: r.gitDir, input: specs.join("\n") + "\n" })).toString("utf8").split("\n");
  specs.forEach((s, i) => {
    const l = lines[i] ?? "";
    const m = /^([0-9a-f]{40,64}) (\w+)$/.exec(l);
    out.set(s, m ? [m[1]!, m[2]!] : null);
  });
  return out;
}

const isHex = (s: string) => /^[0-9a-f]{4,64}$/i.test(s);

/** Salt's _get_envs_from_ref_paths plus the saltenv_revmap environments, whitelist/blacklist applied. */
export function gitfsEnvs(r: GitRemote, refs: Ref[]): string[] {
  const set = new Set<string>();
  const check = (rname: string) => {
    if (r.revmap[rname]) for (const e of r.revmap[rname]!) set.add(e);
    else if (rname === r.base) set.add("base");
    else if (!r.disableSaltenvMapping) set.add(rname);
  };
  if (isHex(r.base) && r.refTypes.includes("sha")) set.add("base");
  for (const ref of refs) {
    if (ref.name.startsWith("refs/remotes/origin/") && r.refTypes.includes("branch")) {
      const rname = ref.name.slice("refs/remotes/origin/".length);
      if (rname !== "HEAD") check(rname);
    } else if (ref.name.startsWith("refs/tags/") && r.refTypes.includes("tag")) check(ref.name.slice("refs/tags/".length));
  }
  for (const envs of Object.values(r.revmap)) for (const e of envs) set.add(e);
  return sortCodePoints([...set].filter((e) => envExposed(r, e)));
}

/** Salt's ref(tgt_env): the branch/tag name an environment stands for (all_saltenvs for every one), or null. */
export function refOf(r: GitRemote, env: string): string | null {
  const per = r.saltenv[env]?.ref;
  if (r.allSaltenvs !== undefined) return r.allSaltenvs;
  if (env === "base") return r.base;
  if (r.disableSaltenvMapping) return per ?? null;
  return per ?? env;
}

/** The commit of a ref name by ref_types order (branch, tag, sha). */
async function commitOf(r: GitRemote, ref: string, byName: Map<string, string>): Promise<string | null> {
  for (const t of r.refTypes) {
    if (t === "branch" && byName.has(`refs/remotes/origin/${ref}`)) return byName.get(`refs/remotes/origin/${ref}`)!;
    if (t === "tag" && byName.has(`refs/tags/${ref}`)) return byName.get(`refs/tags/${ref}`)!;
    if (t === "sha" && isHex(ref)) {
      const o = (await resolveObjects(r, [`${ref}^{commit}`])).get(`${ref}^{commit}`);
      if (o) return o[0];
    }
  }
  return null;
}

/** Check a tree out into base/brine-trees/<tree> with its manifest (no-op when already there). */
async function exportTree(r: GitRemote, base: string, tree: string): Promise<void> {
  const dir = treeDir(base, tree);
  if (existsSync(dir) && existsSync(`${dir}.json`)) {
    const t = new Date();
    utimesSync(dir, t, t);
    return;
  }
  mkdirSync(path.join(base, TREES_DIR), { recursive: true });
  const tmp = path.join(base, TREES_DIR, `.tmp-${tree}-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const index = `${tmp}.index`;
  mkdirSync(tmp);
  try {
    await git(["read-tree", tree], { gitDir: r.gitDir, env: { GIT_INDEX_FILE: index } });
    await git(["checkout-index", "--all", "--force", "--quiet"], { gitDir: r.gitDir, workTree: tmp, env: { GIT_INDEX_FILE: index } });
    const listing = (await git(["ls-tree", "-r", "-t", "-z", "--full-tree", tree], { gitDir: r.gitDir })).toString("utf8");
    const m: Manifest = { files: [], dirs: [], links: {} };
    for (const entry of listing.split("\0")) {
      if (!entry) continue;
      const tab = entry.indexOf("\t");
      const [mode, type] = entry.slice(0, tab).split(" ");
      const p = entry.slice(tab + 1);
      if (type === "tree") m.dirs.push(p);
      else if (type === "blob") {
        const md = Number.parseInt(mode!, 8);
        m.files.push([p, md]);
        if (mode === "120000") {
          try {
            m.links[p] = readlinkSync(path.join(tmp, p));
          } catch {
            // not checked out (core.symlinks off): listed as a file only
          }
        }
      }
    }
    m.files.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    m.dirs = sortCodePoints(m.dirs);
    writeAtomic(`${dir}.json`, JSON.stringify(m));
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
    rmSync(index, { force: true });
  }
}

export function readManifest(base: string, tree: string): Manifest | null {
  return readJson<Manifest>(`${treeDir(base, tree)}.json`);
}

/** Fetch one remote and work out its state; throws a BrineError GIT_FAILED when git fails. */
async function updateRemote(r: GitRemote, base: string): Promise<RemoteState> {
  await ensureClone(r);
  await fetch(r);
  const refs = await listRefs(r);
  const byName = new Map(refs.map((x) => [x.name, x.commit]));
  const st: RemoteState = { id: r.id, hash: path.basename(r.hashDir), envs: {}, fetched: Date.now() };
  const want: Array<[string, string, string, string]> = []; // env, commit, root, mountpoint
  const ANY = "\0any";
  if (r.role === "gitfs") {
    const fallback = r.fallback === undefined ? null : await commitOf(r, r.fallback, byName);
    for (const env of gitfsEnvs(r, refs)) {
      const ref = refOf(r, env);
      // Salt's get_tree: the environment's own ref by ref_types, else the fallback (never when no ref maps)
      const commit = ref === null ? null : ((await commitOf(r, ref, byName)) ?? fallback);
      if (!commit) continue;
      want.push([env, commit, r.saltenv[env]?.root ?? r.root, r.saltenv[env]?.mountpoint ?? r.mountpoint]);
    }
    const any = r.allSaltenvs !== undefined ? await commitOf(r, r.allSaltenvs, byName) : fallback;
    if (any) want.push([ANY, any, r.root, r.mountpoint]);
  } else {
    Object.assign(st, { branch: r.branch, env: r.env, base: r.base });
    const names = r.branch === "__env__" ? refs.filter((x) => x.name.startsWith("refs/remotes/origin/")).map((x) => x.name.slice(20)).filter((n) => n !== "HEAD") : [r.branch!];
    for (const extra of [r.fallback, r.allSaltenvs]) if (extra !== undefined && !names.includes(extra)) names.push(extra);
    if (names.length > envBranchesMax) log.error(`git_pillar remote '${r.id}' has ${names.length} branches; only the first ${envBranchesMax} (envBranchesMax) are checked out`);
    for (const name of names.slice(0, envBranchesMax)) {
      const commit = byName.get(`refs/remotes/origin/${name}`) ?? byName.get(`refs/tags/${name}`);
      if (commit) want.push([name, commit, r.root, ""]);
      else log.error(`Failed to checkout ${name} from git_pillar remote '${r.id}': remote ref does not exist`);
    }
  }
  const specs = want.map(([, commit, root]) => (root ? `${commit}:${root}` : `${commit}^{tree}`));
  const objs = await resolveObjects(r, specs);
  for (let i = 0; i < want.length; i++) {
    const [env, commit, root, mountpoint] = want[i]!;
    const o = objs.get(specs[i]!);
    let tree: string | null = o && o[1] === "tree" ? o[0] : null;
    if (!tree) log.error(`Root path '${root}' not present in ${r.role} remote '${r.id}' at ${env}, skipping.`);
    if (tree) {
      try {
        await exportTree(r, base, tree);
      } catch (e) {
        log.error(`${r.role}: could not check out ${env} of remote '${r.id}': ${(e as Error).message}`);
        tree = null;
      }
    }
    if (env === ANY) st.any = { commit, tree, mountpoint };
    else st.envs[env] = { commit, tree, mountpoint };
  }
  return st;
}

/** Remove trees no state refers to and unused for treeGraceMs; and temporary leftovers. */
function collectGarbage(base: string, state: RoleState, now: number): void {
  const dir = path.join(base, TREES_DIR);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  const used = new Set<string>();
  for (const r of state.remotes) for (const e of [...Object.values(r.envs), ...(r.any ? [r.any] : [])]) if (e.tree) used.add(e.tree);
  for (const n of names) {
    const tree = n.endsWith(".json") ? n.slice(0, -5) : n.startsWith(".tmp-") ? null : n;
    if (tree !== null && used.has(tree)) continue;
    try {
      if (now - statSync(path.join(dir, n)).mtimeMs < treeGraceMs) continue;
      rmSync(path.join(dir, n), { recursive: true, force: true });
    } catch {
      // gone meanwhile
    }
  }
}

export interface UpdateResult {
  /** remotes updated (fetched and checked out) */
  updated: string[];
  /** remotes skipped because another update holds their lock */
  locked: string[];
  /** remotes whose fetch or checkout failed */
  failed: string[];
  /** remotes whose refs moved (new commits, refs added or removed) */
  changedIds: string[];
  changed: boolean;
}

/** Which remotes an update takes: those `only` names (id or name), else those `select` or `due` accepts, else all. */
export interface UpdateSelection {
  only?: string[];
  select?: (r: GitRemote) => boolean;
  due?: (r: GitRemote) => boolean;
}

/**
 * Update the remotes of a role (all of them, or those `only` selects by id or name, or those `due` says).
 * Serialised per process: calls wait for each other.
 */
export async function updateRole(cfg: MasterConfig, role: GitRole, o: UpdateSelection = {}): Promise<UpdateResult> {
  const prev = chains.get(role) ?? Promise.resolve();
  const run = prev.then(() => doUpdate(cfg, role, o));
  chains.set(role, run.catch(() => undefined));
  return run;
}
const chains = new Map<GitRole, Promise<unknown>>();

async function doUpdate(cfg: MasterConfig, role: GitRole, o: UpdateSelection): Promise<UpdateResult> {
  const res: UpdateResult = { updated: [], locked: [], failed: [], changedIds: [], changed: false };
  const remotes = roleRemotes(cfg, role, false);
  if (!remotes) return res;
  const base = roleDir(cfg, role);
  mkdirSync(base, { recursive: true });
  const old = readState(base);
  const selectedOf = (r: GitRemote) => (o.only?.length ? o.only.includes(r.id) || (r.name !== undefined && o.only.includes(r.name)) : o.select ? o.select(r) : o.due ? o.due(r) : true);
  const chosen = remotes.filter(selectedOf);
  if (!chosen.length) return res;
  const byId = new Map((old?.remotes ?? []).map((r) => [r.id, r]));
  const fresh = new Map<string, RemoteState>();
  for (const r of chosen) {
    const before = byId.get(r.id);
    if (!takeLock(r)) {
      log.warning(`Update lock file is present for ${role} remote '${r.id}', skipping. If this warning persists, it is possible that the update process was interrupted, but the lock could also have been manually set. Removing ${lockFile(r)} or running 'salt-run fileserver.clear_lock' will allow updates to continue for this remote.`);
      res.locked.push(r.id);
      continue;
    }
    try {
      const st = await updateRemote(r, base);
      fresh.set(r.id, st);
      res.updated.push(r.id);
      if (JSON.stringify([st.envs, st.any]) !== JSON.stringify([before?.envs, before?.any])) {
        res.changed = true;
        res.changedIds.push(r.id);
      }
    } catch (e) {
      const msg = isBrineError(e, "GIT_FAILED") ? e.message : (e as Error).stack ?? String(e);
      log.error(`Exception caught while fetching ${role} remote '${r.id}': ${msg}`);
      res.failed.push(r.id);
    } finally {
      releaseLock(r);
    }
  }
  // the other remotes as the state file has them now: another thread (the runner, the timer) may have
  // updated some of them while this update ran
  const latest = new Map((readState(base)?.remotes ?? old?.remotes ?? []).map((r) => [r.id, r]));
  const next: RemoteState[] = [];
  for (const r of remotes) {
    const st = fresh.get(r.id) ?? latest.get(r.id);
    if (st) next.push(st);
  }
  if ((old?.remotes.length ?? 0) !== next.length) res.changed = true;
  const state: RoleState = { version: 1, updated: Date.now(), remotes: next };
  writeAtomic(path.join(base, STATE_FILE), JSON.stringify(state));
  collectGarbage(base, state, Date.now());
  if (res.changed) log.info(`${role}: updated (${res.updated.join(", ")})`);
  return res;
}

/**
 * Salt's clear_cache for a role: removes cachedir/<role> and cachedir/file_lists/<role>. Returns the errors
 * (an empty list: cleared). Waits for an update in progress.
 */
export async function clearRoleCache(cfg: MasterConfig, role: GitRole): Promise<string[]> {
  await (chains.get(role) ?? Promise.resolve());
  const errors: string[] = [];
  for (const d of [roleDir(cfg, role), path.join(path.dirname(roleDir(cfg, role)), "file_lists", role)]) {
    if (!existsSync(d)) continue;
    try {
      rmSync(d, { recursive: true, force: true });
    } catch (e) {
      errors.push(`Unable to delete ${d}: ${(e as Error).message}`);
    }
  }
  return errors;
}

/**
 * The periodic updates of the main thread: which remotes are due, remembered per process. The first call
 * updates everything (Salt updates gitfs and git_pillar when the master starts).
 */
export class GitUpdateSchedule {
  private readonly last = new Map<string, number>();
  private running = false;
  /** the update in progress, awaited by stop() */
  private current: Promise<void> | undefined;
  private stopped = false;

  constructor(private readonly cfg: MasterConfig) {}

  /** Roles with remotes configured (and not disabled by configuration errors, which are logged here once). */
  static roles(cfg: MasterConfig): GitRole[] {
    const out: GitRole[] = [];
    const backends = Array.isArray(cfg.fileserver_backend) ? cfg.fileserver_backend.map(String) : [];
    if ((backends.includes("gitfs") || backends.includes("git")) && roleRemotes(cfg, "gitfs")?.length) out.push("gitfs");
    if (gitPillarRemoteLists(cfg).length && roleRemotes(cfg, "git_pillar")?.length) out.push("git_pillar");
    return out;
  }

  tick(now: number, roles: GitRole[]): void {
    if (this.stopped || this.running || !roles.length) return;
    this.running = true;
    this.current = (async () => {
      for (const role of roles) {
        const global = Number((this.cfg as unknown as Record<string, unknown>)[`${role}_update_interval`]) || 60;
        const due = (r: GitRemote) => {
          const interval = (role === "gitfs" ? r.updateIntervalS : global) * 1000;
          const last = this.last.get(`${role}\0${r.id}`);
          if (last !== undefined && now - last < interval) return false;
          this.last.set(`${role}\0${r.id}`, now);
          return true;
        };
        try {
          await updateRole(this.cfg, role, { due });
        } catch (e) {
          log.error(`${role} update failed: ${(e as Error).stack ?? (e as Error).message}`);
        }
      }
    })().finally(() => (this.running = false));
  }

  /**
   * Starts no more updates and waits for the one running, so a stopping master leaves no git process writing
   * in its cachedir (each git command is bounded by its own timeout).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.current;
  }
}
