/**
 * Which minions sign in with protocol v3 (`cachedir/minion-v3/<id>`, an empty file written at the first
 * accepted v3 `_auth`). A v2 envelope carries no per-minion key: the shared AES key and a claimed `id` are
 * all it has, so any accepted minion could send a `_return` or `_pillar` in another's name. A 3007 minion
 * never sends one, so a v2 request naming a marked id is refused; the file outlives a restart, and goes
 * with the minion's key (keyless-purge.ts). Each thread remembers marks it saw (they are never taken back
 * while the key lives) and, for a second, ids it found unmarked.
 */
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";

/** How long a thread trusts "not marked" for an id, ms (a v2 minion's requests stat the file this often). */
export const v3UnmarkedTtlMs = 1000;
/** Ids remembered per thread, each way; past it the memory starts over (the files are the truth). */
export const v3MarksCachedMax = 200_000;

export class V3Marks {
  readonly dir: string;
  private readonly marked = new Set<string>();
  private readonly unmarked = new Map<string, number>();

  constructor(cachedir: string, private readonly now: () => number = Date.now) {
    this.dir = path.join(cachedir, "minion-v3");
  }

  /** Record that `id` signed in with v3 (idempotent; cheap once this thread knows it). */
  mark(id: string): void {
    if (this.marked.has(id)) return;
    try {
      writeFileSync(path.join(this.dir, id), "", { flag: "wx", mode: 0o600 });
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "ENOENT") {
        mkdirSync(this.dir, { recursive: true, mode: 0o700 });
        writeFileSync(path.join(this.dir, id), "", { flag: "w", mode: 0o600 });
      } else if (code !== "EEXIST") throw e;
    }
    this.remember(id);
  }

  /** True when `id` has signed in with v3 on this master (or one sharing its cachedir). */
  has(id: string): boolean {
    if (this.marked.has(id)) return true;
    const at = this.unmarked.get(id);
    if (at !== undefined && this.now() - at < v3UnmarkedTtlMs) return false;
    if (existsSync(path.join(this.dir, id))) {
      this.remember(id);
      return true;
    }
    if (this.unmarked.size >= v3MarksCachedMax) this.unmarked.clear();
    this.unmarked.set(id, this.now());
    return false;
  }

  /** Drop the marks of ids `keep` says no longer have a key; returns how many went. */
  purge(keep: (id: string) => boolean, max: number): number {
    let names: string[] = [];
    try {
      names = readdirSync(this.dir);
    } catch {
      return 0;
    }
    let n = 0;
    for (const id of names) {
      if (n >= max) break;
      if (keep(id)) continue;
      rmSync(path.join(this.dir, id), { force: true });
      this.marked.delete(id);
      n++;
    }
    return n;
  }

  private remember(id: string): void {
    if (this.marked.size >= v3MarksCachedMax) this.marked.clear();
    this.marked.add(id);
    this.unmarked.delete(id);
  }
}
