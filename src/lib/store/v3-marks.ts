/**
 * Which minions sign in with protocol v3 (`cachedir/minion-v3/<id>`, an empty file written at the first
 * accepted v3 `_auth`). A v2 envelope carries no per-minion key: the shared AES key and a claimed `id` are
 * all it has, so any accepted minion could send a `_return` or `_pillar` in another's name. A 3007 minion
 * never sends one, so a v2 request naming a marked id is refused; the file outlives a restart, and goes
 * with the minion's key (keyless-purge.ts). Each thread remembers marks it saw (they are never taken back
 * while the key lives) and, for a second, ids it found unmarked.
 *
 * In a cluster the marks travel with the cache-sync records (`v3` in src/shared/sync-records.ts): a mark a
 * request worker makes is reported through `track()` and sent to every peer with its batch result, a peer's
 * mark is written by the mirror thread (`applyPeer`), and a master that was away pulls the marks made since
 * (`list`, the file's mtime being when it was made). Without that, in a cluster whose masters do not share
 * `cachedir`, a v2 frame forged in a v3 minion's name would be refused only by the masters it signed in to.
 */
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { validId } from "../../shared/protocol/ids.js";

/** How long a thread trusts "not marked" for an id, ms (a v2 minion's requests stat the file this often). */
export const v3UnmarkedTtlMs = 1000;
/** Ids remembered per thread, each way; past it the memory starts over (the files are the truth). */
export const v3MarksCachedMax = 200_000;
/** How long the sorted listing of the marks is reused across the chunks of one bulk sync, ms. */
const listingTtlMs = 10_000;

export class V3Marks {
  readonly dir: string;
  private readonly marked = new Set<string>();
  private readonly unmarked = new Map<string, number>();
  private onMarked: ((id: string, t: number) => void) | undefined;
  private listing: { at: number; ids: string[] } | undefined;

  constructor(cachedir: string, private readonly now: () => number = Date.now) {
    this.dir = path.join(cachedir, "minion-v3");
  }

  /** Calls `onMarked` for each mark this object writes (not for one already there, nor a peer's). */
  track(onMarked: (id: string, t: number) => void): void {
    this.onMarked = onMarked;
  }

  /** Record that `id` signed in with v3 (idempotent; cheap once this thread knows it). */
  mark(id: string): void {
    if (this.marked.has(id)) return;
    if (this.write(id)) this.onMarked?.(id, this.now());
    this.remember(id);
  }

  /** A peer's mark: written when absent; true when it was new here. */
  applyPeer(id: string): boolean {
    if (!validId(id)) return false;
    const made = this.write(id);
    this.remember(id);
    return made;
  }

  /**
   * Marks for a peer's bulk sync, in id order after `after`: at most `max` ids looked at, those made at or after
   * `sinceMs` kept (with when they were made). `next`: the id to resume after; undefined when done. The sorted
   * listing is reused for listingTtlMs across the chunks of one sync (`fresh` at its first chunk).
   */
  list(after: string | undefined, max: number, sinceMs: number, fresh: boolean): { marks: { id: string; t: number }[]; next: string | undefined } {
    const t0 = this.now();
    if (fresh || !this.listing || t0 - this.listing.at > listingTtlMs) {
      let names: string[] = [];
      try {
        names = readdirSync(this.dir).filter(validId).sort();
      } catch {
        // no mark yet
      }
      this.listing = { at: t0, ids: names };
    }
    const ids = this.listing.ids;
    let i = 0;
    if (after !== undefined) {
      let lo = 0;
      let hi = ids.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (ids[mid]! <= after) lo = mid + 1;
        else hi = mid;
      }
      i = lo;
    }
    const marks: { id: string; t: number }[] = [];
    const end = Math.min(ids.length, i + max);
    for (; i < end; i++) {
      const id = ids[i]!;
      let t: number;
      try {
        t = Math.floor(statSync(path.join(this.dir, id)).mtimeMs);
      } catch {
        continue; // purged meanwhile
      }
      if (t >= sinceMs) marks.push({ id, t });
    }
    return { marks, next: end < ids.length ? ids[end - 1] : undefined };
  }

  /** Creates the mark file; true when it did not exist. */
  private write(id: string): boolean {
    try {
      writeFileSync(path.join(this.dir, id), "", { flag: "wx", mode: 0o600 });
      return true;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === "EEXIST") return false;
      if (code !== "ENOENT") throw e;
    }
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    try {
      writeFileSync(path.join(this.dir, id), "", { flag: "wx", mode: 0o600 });
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === "EEXIST") return false;
      throw e;
    }
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
