/**
 * Where a reactor map's SLS reference points (Salt's render_reaction: `salt://` through the file server, then a
 * filesystem glob): `salt://path` is looked up in file_roots `base` (the first root holding it), an absolute or
 * relative path is taken as is, and a glob (`*`, `?`, `[...]`) in the last path segment lists the matching files,
 * sorted. Missing files give [] (the caller logs Salt's "File missing or not found").
 */
import { readdirSync, statSync } from "node:fs";
import path from "node:path";
import { fnmatchToRegExp } from "../lib/targeting/index.js";

const GLOB = /[*?[]/;

function isFile(f: string): boolean {
  try {
    return statSync(f).isFile();
  } catch {
    return false;
  }
}

export function expandSlsRef(ref: string, baseRoots: readonly string[]): string[] {
  if (ref.startsWith("salt://")) {
    const rel = ref.slice("salt://".length).replace(/^\/+/, "");
    for (const root of baseRoots) {
      const found = expandSlsRef(path.join(root, rel), []);
      if (found.length) return found;
    }
    return [];
  }
  const base = path.basename(ref);
  if (!GLOB.test(base)) return isFile(ref) ? [ref] : [];
  const dir = path.dirname(ref);
  const re = fnmatchToRegExp(base);
  try {
    return readdirSync(dir)
      .filter((n) => re.test(n) && isFile(path.join(dir, n)))
      .sort()
      .map((n) => path.join(dir, n));
  } catch {
    return [];
  }
}
