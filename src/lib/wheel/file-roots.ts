/**
 * Salt's wheel `file_roots` and `pillar_roots` modules (read side): `list_roots`, `list_env`, `find`, `read`
 * over the master's `file_roots` / `pillar_roots` option as configured (root paths as written; an unknown
 * environment gives an empty answer). A path must stay inside its root after symlinks (Salt's clean_path
 * with subdir=True; Salt's pillar_roots.find skips that check, brine does not). `write` is not provided. Walks and reads are bounded (listEnvEntriesMax, fileRootsReadBytesMax): past them the call fails
 * with a CommandExecutionError rather than building an answer no client can take.
 */
import { openSync, readSync, closeSync, readdirSync, realpathSync, statSync, readFileSync, type Dirent } from "node:fs";
import path from "node:path";
import { isInside } from "../fileserver/paths.js";
import { wheelModule } from "./define.js";
import { CommandExecutionError } from "./salt-errors.js";
import type { WheelContext } from "./types.js";

/** Entries (files and directories) one list_env/list_roots call may report, in all. */
export const listEnvEntriesMax = 200_000;
/** Largest file `file_roots.read` returns, bytes. */
export const fileRootsReadBytesMax = 16 * 1024 * 1024;

type Tree = { [name: string]: Tree | "f" };

type RootsOption = "file_roots" | "pillar_roots";

function rootsOf(ctx: WheelContext, opt: RootsOption, saltenv: unknown): string[] {
  const fr = ctx.cfg[opt] as unknown;
  if (typeof fr !== "object" || fr === null || typeof saltenv !== "string" || !Object.hasOwn(fr, saltenv)) return [];
  const roots = (fr as Record<string, unknown>)[saltenv];
  return (Array.isArray(roots) ? roots : []).filter((r): r is string => typeof r === "string" && r !== "");
}

function envsOf(ctx: WheelContext, opt: RootsOption): string[] {
  const fr = ctx.cfg[opt] as unknown;
  return typeof fr === "object" && fr !== null ? Object.keys(fr) : [];
}

function isDirFollowing(full: string, d: Dirent): boolean {
  if (d.isDirectory()) return true;
  if (!d.isSymbolicLink()) return false;
  try {
    return statSync(full).isDirectory();
  } catch {
    return false;
  }
}

/** os.walk(root) without following symlinks, as nested dicts: a directory is {}, a file "f" (names sorted). */
function walk(dir: string, into: Tree, budget: { left: number }): void {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const d of entries) {
    if (--budget.left < 0) throw new CommandExecutionError(`more than ${listEnvEntriesMax} entries under the file roots (listEnvEntriesMax)`);
    const full = path.join(dir, d.name);
    if (isDirFollowing(full, d)) {
      const sub: Tree = {};
      into[d.name] = sub;
      // a symlinked directory is listed, not entered (os.walk's followlinks=False)
      if (d.isDirectory()) walk(full, sub, budget);
    } else {
      into[d.name] = "f";
    }
  }
}

function listEnv(ctx: WheelContext, opt: RootsOption, saltenv: unknown, budget = { left: listEnvEntriesMax }): Record<string, Tree> {
  const ret: Record<string, Tree> = {};
  for (const root of rootsOf(ctx, opt, saltenv)) {
    ret[root] = {};
    walk(root, ret[root], budget);
  }
  return ret;
}

function realOrNull(p: string): string | null {
  try {
    return realpathSync(p);
  } catch {
    return null;
  }
}

/** Salt's is_text on the first 512 bytes: no NUL, and UTF-8 or at most 30% non-text bytes. */
function isText(file: string): boolean {
  const buf = Buffer.alloc(512);
  const fd = openSync(file, "r");
  let n: number;
  try {
    n = readSync(fd, buf, 0, 512, 0);
  } finally {
    closeSync(fd);
  }
  const block = buf.subarray(0, n);
  if (block.includes(0)) return false;
  if (n === 0) return true;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(block);
    return true;
  } catch {
    // not UTF-8: count the bytes outside printable ASCII and \n\r\t\f\b
  }
  let nontext = 0;
  for (const b of block) if (!((b >= 32 && b < 127) || b === 10 || b === 13 || b === 9 || b === 12 || b === 8)) nontext++;
  return nontext / n <= 0.3;
}

function find(ctx: WheelContext, opt: RootsOption, rel: unknown, saltenv: unknown): Record<string, "txt" | "bin">[] {
  if (typeof rel !== "string" || rel.includes("\0")) return [];
  const ret: Record<string, "txt" | "bin">[] = [];
  for (const root of rootsOf(ctx, opt, saltenv)) {
    const full = path.join(root, rel);
    const realRoot = realOrNull(path.resolve(root));
    const real = realOrNull(path.resolve(root, rel));
    if (realRoot === null || real === null || !isInside(realRoot, real)) continue;
    try {
      if (!statSync(real).isFile()) continue;
      ret.push({ [full]: isText(real) ? "txt" : "bin" });
    } catch {
      // vanished or unreadable: not found
    }
  }
  return ret;
}

function rootsModule(opt: RootsOption) {
  return wheelModule(opt, {
    list_roots: {
      params: [],
      run(ctx) {
        const budget = { left: listEnvEntriesMax };
        return Object.fromEntries(envsOf(ctx, opt).map((env) => [env, [listEnv(ctx, opt, env, budget)]]));
      },
    },
    list_env: {
      params: ["saltenv"],
      run: (ctx, kw) => listEnv(ctx, opt, kw.saltenv ?? "base"),
    },
    find: {
      params: ["path", "saltenv"],
      required: 1,
      run: (ctx, kw) => find(ctx, opt, kw.path, kw.saltenv ?? "base"),
    },
    read: {
      params: ["path", "saltenv"],
      required: 1,
      run(ctx, kw) {
        const ret: Record<string, string>[] = [];
        for (const hit of find(ctx, opt, kw.path, kw.saltenv ?? "base")) {
          const [full, form] = Object.entries(hit)[0];
          if (form !== "txt") continue;
          if (statSync(full).size > fileRootsReadBytesMax) throw new CommandExecutionError(`${full} is larger than ${fileRootsReadBytesMax} bytes (fileRootsReadBytesMax)`);
          ret.push({ [full]: readFileSync(full, "utf8") });
        }
        return ret;
      },
    },
  });
}

export const FILE_ROOTS_FUNCTIONS = rootsModule("file_roots");
export const PILLAR_ROOTS_FUNCTIONS = rootsModule("pillar_roots");
