/**
 * Path safety for the roots fileserver: turning what a minion sent (`path`, `saltenv`) into a
 * relative path and the list of root directories it may be looked up in, or "missing".
 *
 * Rules (Salt's `Fileserver.find_file` + `roots.find_file`, made strict):
 * - `path` must be a string; a leading `|` escapes it (no `?query` parsing), otherwise `a?saltenv=x`
 *   selects the environment as Salt does (other query keys are ignored);
 * - absolute paths, NUL bytes, any `..` component, an empty or `.` path are missing;
 * - unknown environments are missing; `__env__` roots serve any environment whose name is a safe
 *   single path component (the name is substituted into the root path);
 * - the file's real path (after symlinks) must stay inside the real path of the root it was found in
 *   (checked by the caller with `isInside`), so a symlink that leaves the root is missing.
 * Nothing here touches the filesystem.
 */
import path from "node:path";

/** Longest request path accepted (bytes of UTF-16 code units); longer is missing. PATH_MAX is 4096. */
export const requestPathCharsMax = 4096;
/** Longest environment name accepted. */
export const saltenvCharsMax = 255;

export interface RequestPath {
  /** normalised, relative, `/`-separated */
  rel: string;
  /** environment named in a `?saltenv=` suffix, if any */
  saltenv?: string;
}

/** Parse and normalise a requested relative path; `null` means "missing". */
export function parseRequestPath(raw: unknown): RequestPath | null {
  if (typeof raw !== "string" || raw.length === 0 || raw.length > requestPathCharsMax) return null;
  let p = raw;
  let saltenv: string | undefined;
  if (p.startsWith("|")) {
    p = p.slice(1);
  } else if (p.includes("?")) {
    const q = p.indexOf("?");
    const query = p.slice(q + 1);
    p = p.slice(0, q);
    for (const comp of query.split("&")) {
      const eq = comp.indexOf("=");
      if (eq < 0) continue;
      if (comp.slice(0, eq) === "saltenv") saltenv = comp.slice(eq + 1);
    }
  }
  const rel = normalizeRel(p);
  if (rel === null) return null;
  return saltenv === undefined ? { rel } : { rel, saltenv };
}

/** Normalise a relative path; `null` for absolute, NUL, `..` anywhere, or nothing left. */
export function normalizeRel(p: string): string | null {
  if (p.length === 0 || p.includes("\0") || p.startsWith("/")) return null;
  const parts = p.split("/");
  if (parts.includes("..")) return null;
  const kept = parts.filter((c) => c !== "" && c !== ".");
  if (kept.length === 0) return null;
  return kept.join("/");
}

/** An environment name as a string (Salt does `str(saltenv)`), or null when it cannot be one. */
export function envName(v: unknown): string | null {
  if (typeof v === "string") return v.length <= saltenvCharsMax && !v.includes("\0") ? v : null;
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  return null;
}

/** Whether an environment name may be substituted into an `__env__` root path. */
export function isSafeEnvComponent(env: string): boolean {
  return env.length > 0 && env !== "." && env !== ".." && !/[/\\\0]/.test(env);
}

/** Normalised `{env: [root…]}` from a `file_roots`/`pillar_roots` option; malformed entries dropped. */
export function normalizeRoots(v: unknown): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (typeof v !== "object" || v === null || Array.isArray(v)) return out;
  for (const [env, roots] of Object.entries(v as Record<string, unknown>)) {
    const list = (Array.isArray(roots) ? roots : typeof roots === "string" ? [roots] : []).filter(
      (r): r is string => typeof r === "string" && r.length > 0 && !r.includes("\0"),
    );
    out.set(env, list.map((r) => path.resolve(r)));
  }
  return out;
}

/**
 * The roots serving `saltenv`, in order (first root wins), or null for an unknown environment.
 * `__env__` roots stand in for an environment not configured by name.
 */
export function rootsFor(roots: ReadonlyMap<string, string[]>, saltenv: string): string[] | null {
  const direct = roots.get(saltenv);
  if (direct) return direct;
  const any = roots.get("__env__");
  if (!any || !isSafeEnvComponent(saltenv)) return null;
  return any.map((r) => r.split("__env__").join(saltenv));
}

/** True when `p` is `root` itself or below it (both absolute and normalised). */
export function isInside(root: string, p: string): boolean {
  if (p === root) return true;
  const base = root.endsWith(path.sep) ? root : root + path.sep;
  return p.startsWith(base);
}
