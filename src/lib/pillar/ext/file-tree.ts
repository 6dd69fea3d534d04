/**
 * The `file_tree` external pillar (salt/pillar/file_tree.py): every file under `<root_dir>/hosts/<minion_id>/`
 * becomes a pillar key (directories nest), after the files under `<root_dir>/nodegroups/<group>/` of each
 * nodegroup the minion is in. Parameters as Salt's: `root_dir` (a relative one is taken below each
 * pillar_roots directory of the pillarenv, which must then be set), `follow_dir_links` (False),
 * `keep_newline` (False, True, or a list of globs of paths relative to the host/nodegroup directory),
 * `template` (False; True renders each file through `render_default` with the renderer black/whitelists),
 * `debug`.
 *
 * Values are the files' bytes (Salt sends Python bytes, which a minion receives as bytes), or the
 * rendered data with `template: True`; one trailing newline is dropped unless `keep_newline` keeps it.
 * Subdirectories become mappings (an empty one `{}`); a symlinked directory is an empty mapping unless
 * `follow_dir_links`. Brine refuses the ids `.` and `..` (they would name the hosts directory or the root).
 * Bounds: `fileTreeEntriesMax` entries and `fileTreeDepthMax` levels per directory tree, files up to
 * `fileTreeFileBytesMax` (beyond: an error line in the log, the rest is skipped).
 */
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import path from "node:path";
import { getLogger } from "../../../shared/log.js";
import { fnmatch } from "../../targeting/fnmatch.js";
import { JinjaEnv } from "../../render/jinja.js";
import { renderPipe } from "../../render/pipe.js";
import { makeSaltFuncs } from "../../render/salt-funcs.js";
import { normalizeRoots } from "../../fileserver/paths.js";
import { mergeRecurse, type Data } from "../merge.js";
import { registerExtPillar, type ExtPillarContext, type ExtPillarResult } from "../ext-pillar.js";

const log = getLogger("brine.pillar");

export const fileTreeEntriesMax = 100_000;
export const fileTreeDepthMax = 64;
export const fileTreeFileBytesMax = 64 * 1024 * 1024;

interface TreeOpts {
  followDirLinks: boolean;
  keepNewline: boolean | unknown[];
  template: boolean;
  renderDefault: string;
  blacklist: string[];
  whitelist: string[];
  ctx: ExtPillarContext;
}

function stripNewline(prefix: string, name: string, keep: boolean | unknown[]): boolean {
  if (typeof keep === "boolean") return !keep;
  const full = prefix === "." ? `./${name}`.slice(2) : path.posix.join(prefix, name);
  for (const p of keep) if (fnmatch(full, String(p))) return false;
  return true;
}

function render(file: string, contents: Buffer, o: TreeOpts): unknown {
  const text = contents.toString("utf8");
  const first = text.split("\n", 1)[0] ?? "";
  // Salt's template_shebang with no default renderer: an empty pipe, and compile_template answers {}
  if (!o.renderDefault && !(first.startsWith("#!") && !first.startsWith("#!/"))) return {};
  const jinja = new JinjaEnv((name) => (name === file ? { path: file, sig: "", read: () => text } : null));
  return renderPipe({
    text,
    file,
    name: file,
    defaultPipe: o.renderDefault,
    jinja,
    context: { salt: makeSaltFuncs({ id: o.ctx.minionId, grains: o.ctx.grains, pillar: {}, opts: o.ctx.cfg as unknown as Data }), grains: o.ctx.grains, opts: o.ctx.cfg, pillar: {}, saltenv: "base", sls: "" },
    blacklist: o.blacklist,
    whitelist: o.whitelist,
  });
}

/** Salt's _construct_pillar for one directory. */
function construct(top: string, o: TreeOpts): Data {
  const pillar: Data = {};
  let entries = 0;
  const walk = (dir: string, node: Data, prefix: string, depth: number, seen: Set<string>) => {
    if (depth > fileTreeDepthMax) return log.error(`file_tree: ${dir} is deeper than fileTreeDepthMax (${fileTreeDepthMax}); skipped`);
    let names;
    try {
      names = readdirSync(dir, { withFileTypes: true });
    } catch (e) {
      return log.error(`${dir}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const d of names) {
      if (++entries > fileTreeEntriesMax) return log.error(`file_tree: ${top} has more than fileTreeEntriesMax (${fileTreeEntriesMax}) entries; the rest is skipped`);
      const full = path.join(dir, d.name);
      let isDir = d.isDirectory();
      if (d.isSymbolicLink()) {
        try {
          isDir = statSync(full).isDirectory();
        } catch {
          isDir = false;
        }
      }
      if (isDir) {
        const sub: Data = {};
        node[d.name] = sub;
        if (d.isSymbolicLink() && !o.followDirLinks) continue;
        let real: string;
        try {
          real = realpathSync(full);
        } catch {
          continue;
        }
        if (seen.has(real)) {
          log.error(`file_tree: ${full} loops back to ${real}; not followed`);
          continue;
        }
        seen.add(real);
        walk(full, sub, prefix === "." ? d.name : `${prefix}/${d.name}`, depth + 1, seen);
        seen.delete(real);
        continue;
      }
      let st;
      try {
        st = statSync(full);
      } catch {
        st = null;
      }
      if (!st || !st.isFile()) {
        log.error(`file_tree: ${full}: not a regular file`);
        continue;
      }
      if (st.size > fileTreeFileBytesMax) {
        log.error(`file_tree: ${full} is larger than fileTreeFileBytesMax (${fileTreeFileBytesMax} bytes); skipped`);
        continue;
      }
      let contents: Buffer;
      try {
        contents = readFileSync(full);
      } catch (e) {
        log.error(`file_tree: Error reading ${full}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
        continue;
      }
      if (contents.length && contents[contents.length - 1] === 0x0a && stripNewline(prefix, d.name, o.keepNewline)) contents = contents.subarray(0, -1);
      node[d.name] = o.template ? render(full, contents, o) : contents;
    }
  };
  let realTop: string;
  try {
    realTop = realpathSync(top);
  } catch {
    return pillar;
  }
  walk(top, pillar, ".", 0, new Set([realTop]));
  return pillar;
}

/** Salt's _ext_pillar for one root directory. */
function forRoot(ctx: ExtPillarContext, root: string, o: TreeOpts, debug: boolean): Data {
  let isDir = false;
  try {
    isDir = statSync(root).isDirectory();
  } catch {
    isDir = false;
  }
  if (!isDir) {
    log.error(`file_tree: root_dir ${root} does not exist or is not a directory`);
    return {};
  }
  let ngroup: Data = {};
  const ngDir = path.join(root, "nodegroups");
  const groups = (ctx.cfg.nodegroups ?? {}) as Record<string, unknown>;
  if (existsSync(ngDir) && Object.keys(groups).length) {
    let names: string[] = [];
    try {
      names = readdirSync(ngDir).sort();
    } catch {
      names = [];
    }
    for (const g of names) {
      if (!Object.prototype.hasOwnProperty.call(groups, g)) continue;
      if (!ctx.matches(`N@${g}`)) continue;
      ngroup = mergeRecurse(ngroup, construct(path.join(ngDir, g), o));
    }
  } else if (debug) log.debug("file_tree: no nodegroups found in master configuration");
  const hostDir = path.join(root, "hosts", ctx.minionId);
  if (!existsSync(hostDir)) {
    if (debug) log.debug(`file_tree: no pillar data for minion ${ctx.minionId} found in file tree directory ${hostDir}`);
    return ngroup;
  }
  if (!statSync(hostDir).isDirectory()) {
    log.error(`file_tree: ${hostDir} exists, but is not a directory`);
    return ngroup;
  }
  return mergeRecurse(ngroup, construct(hostDir, o));
}

const strList = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : typeof v === "string" ? [v] : []);

function fileTree(ctx: ExtPillarContext, args: unknown[], kwargs: Record<string, unknown>): ExtPillarResult {
  const names = ["root_dir", "follow_dir_links", "debug", "keep_newline", "render_default", "renderer_blacklist", "renderer_whitelist", "template"];
  const a: Record<string, unknown> = {};
  names.forEach((n, i) => (a[n] = n in kwargs ? kwargs[n] : args[i]));
  const rootDir = a.root_dir;
  if (!rootDir || typeof rootDir !== "string") {
    log.error("file_tree: no root_dir specified");
    return {};
  }
  if (ctx.minionId === "." || ctx.minionId === "..") throw new Error(`file_tree: the minion id ${ctx.minionId} cannot name a hosts directory`);
  const keepNewline = a.keep_newline ?? false;
  if (typeof keepNewline !== "boolean" && !Array.isArray(keepNewline)) {
    log.error(`file_tree: keep_newline must be either True/False or a list of file globs. Skipping this ext_pillar for root_dir ${rootDir}`);
    return {};
  }
  let dirs: string[];
  if (!path.isAbsolute(rootDir)) {
    const env = ctx.pillarenv;
    if (env === null) {
      log.error("file_tree: root_dir is relative but pillarenv is not set");
      return {};
    }
    const envRoots = normalizeRoots(ctx.cfg.pillar_roots).get(env);
    if (!envRoots) {
      log.error(`file_tree: root_dir is relative but no pillar_roots are specified  for pillarenv ${env}`);
      return {};
    }
    dirs = [];
    for (const r of envRoots) {
      const d = path.normalize(path.join(r, rootDir));
      if (dirs[dirs.length - 1] !== d) dirs.push(d);
    }
  } else dirs = [rootDir];
  const o: TreeOpts = {
    followDirLinks: a.follow_dir_links === true,
    keepNewline,
    template: a.template === true,
    renderDefault: typeof a.render_default === "string" ? a.render_default : "",
    blacklist: strList(a.renderer_blacklist),
    whitelist: strList(a.renderer_whitelist),
    ctx,
  };
  let result: Data = {};
  for (const d of dirs) result = mergeRecurse(result, forRoot(ctx, d, o, a.debug === true));
  return result;
}

registerExtPillar("file_tree", { run: fileTree });
