/**
 * A directory channel's walk for its scan (DirSource in sources.ts): the files of its roots in the manifest's order,
 * one directory's names sorted at a time — in memory up to dirNamesInMemoryMax, a larger directory (the accepted
 * keys of a big fleet) through the channel's scratch database, which LMDB keeps in order — so a scan's memory stays
 * bounded whatever a directory's size. Symlinks, devices, partial files, names a peer would refuse and files over
 * itemBytesMax are not carried.
 */
import { lstatSync, type Dir, type Stats } from "node:fs";
import { opendir } from "node:fs/promises";
import { getLogger } from "../../shared/log.js";
import { LogBudget } from "../../shared/log-budget.js";
import { itemBytesMax, PART_PREFIX, SKIPPED_DIRS, byPath, checkItemPath, longKeyHashHex, manifestKey, type Channel } from "./manifest.js";
import { inDir } from "./dir-install.js";
import { dirNamesInMemoryMax, scanWriteBatch, walkDb, type ScratchDb } from "./manifest-store.js";

const log = getLogger("brine.cluster.state-sync");

/** Walk items between two turns of the event loop (a scan with synchronous calls still lets the thread's messages in), count. */
const walkItemsPerTurn = 256;

/** One file a root walk found, with its lstat; `key`: its manifest key, set by inKeyOrder. */
export interface Found {
  p: string;
  full: string;
  st: Stats;
  key?: string;
}

export const collisions = new LogBudget(5, 60_000, (line) => log.warning(line), "state-sync long paths");

/** Long paths sharing one key prefix that a scan reorders at once (more are not carried, logged), count. */
const longGroupItemsMax = 1024;

/**
 * A walk (in path order) in the manifest's order, each item with its manifest key: the two differ only between long
 * paths sharing their key prefix (manifest.ts manifestKey), which are contiguous in path order; such a group is
 * held and sorted by key (at most longGroupItemsMax of them).
 */
export async function* inKeyOrder(ch: Channel, walk: AsyncGenerator<Found>): AsyncGenerator<Found & { key: string }> {
  let group: (Found & { key: string })[] = [];
  let groupPrefix = "";
  const flush = function* () {
    if (group.length > 1) group.sort((a, b) => byPath(a.key, b.key));
    yield* group;
    group = [];
  };
  for await (const f of walk) {
    const key = manifestKey(f.p);
    // the walk's own object gets its key: a copy an item (`{ ...f, key }`) was the largest part of what a scan
    // promoted to the old generation (a scan of 10k files: 4.0 MiB promoted with the copy, 2.8 without)
    f.key = key;
    if (key === f.p) {
      if (group.length) yield* flush();
      yield f as Found & { key: string };
      continue;
    }
    const prefix = key.slice(0, -(longKeyHashHex + 1));
    if (prefix !== groupPrefix) yield* flush();
    groupPrefix = prefix;
    if (group.length >= longGroupItemsMax) {
      collisions.line(`state-sync ${ch}: ${f.full} is not carried: more than ${longGroupItemsMax} paths share its first ${prefix.length} characters`);
      continue;
    }
    group.push(f as Found & { key: string });
  }
  yield* flush();
}

/** The walks of one directory channel (its scratch keys under `<channel>/`). */
export class DirWalk {
  constructor(
    private readonly ch: Channel,
    /** where a directory of more than dirNamesInMemoryMax names is sorted (none: in memory, whatever its size) */
    private readonly scratch: ScratchDb | undefined,
    /** throws when the channel's source is stopped (DirSource.writable) */
    private readonly writable: () => void,
    private readonly stopped: () => boolean,
  ) {}

  /** Several roots of one prefix merged in order; the first root wins a path they both have. */
  async *mergeRoots(walks: AsyncGenerator<Found>[]): AsyncGenerator<Found> {
    const heads = await Promise.all(walks.map((g) => g.next()));
    for (;;) {
      let best = -1;
      for (let i = 0; i < heads.length; i++) {
        const h = heads[i]!;
        if (h.done) continue;
        if (best < 0 || byPath(h.value.p, (heads[best]!.value as Found).p) < 0) best = i;
      }
      if (best < 0) return;
      const f = heads[best]!.value as Found;
      yield f;
      for (let i = 0; i < heads.length; i++) if (!heads[i]!.done && (heads[i]!.value as Found).p === f.p) heads[i] = await walks[i]!.next();
    }
  }

  /** scratch key prefixes handed out (nested walks of large directories each get their own) */
  private scratchSeq = 0;

  /** Removes the scratch keys in [start, end), scanWriteBatch per transaction. */
  clearScratch(start: string, end: string): void {
    const db = this.scratch!;
    for (;;) {
      const keys = [...db.getKeys({ start, end, limit: scanWriteBatch })] as string[];
      if (!keys.length) return;
      db.transactionSync(() => {
        for (const k of keys) db.removeSync(k);
      });
    }
  }

  /**
   * The names of `dir` in the manifest's order, a directory's as `<name>/` (its items are `<name>/…`, so it sorts
   * so among its siblings). Up to dirNamesInMemoryMax names are sorted in memory; a larger directory (the accepted
   * keys of a big fleet: 100k names) is read in batches into the scratch database, which LMDB keeps in the same
   * order (UTF-8 byte order), and read back a batch at a time: memory stays bounded whatever the directory's size.
   */
  private async *sortedNames(dir: string): AsyncGenerator<string> {
    let d: Dir;
    try {
      d = await opendir(dir, { bufferSize: 256 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") log.warning(`state-sync ${this.ch}: cannot read ${dir}: ${(e as Error).message}`);
      return;
    }
    const names: string[] = [];
    let spilled: string | undefined;
    const spill = () => {
      this.writable();
      const db = this.scratch!;
      const pre = (spilled ??= `${this.ch}/${(this.scratchSeq++).toString(36)}/`);
      db.transactionSync(() => {
        for (const n of names) db.putSync(pre + n, 1);
      });
      names.length = 0;
    };
    try {
      for await (const ent of d) {
        names.push(ent.isDirectory() ? `${ent.name}/` : ent.name);
        if (this.scratch && names.length >= dirNamesInMemoryMax) spill();
      }
    } catch (e) {
      log.warning(`state-sync ${this.ch}: cannot read ${dir}: ${(e as Error).message}`);
      if (spilled) this.clearScratch(spilled, `${spilled.slice(0, -1)}0`);
      return;
    }
    if (spilled === undefined) {
      yield* names.sort(byPath);
      return;
    }
    if (names.length) spill();
    try {
      for (const [k] of walkDb(this.scratch!, { start: spilled, end: `${spilled.slice(0, -1)}0` })) yield k.slice(spilled.length);
    } finally {
      if (!this.stopped()) this.clearScratch(spilled, `${spilled.slice(0, -1)}0`);
    }
  }

  /** names the walks have looked at (a turn of the event loop every walkItemsPerTurn) */
  private walked = 0;

  /** Walks `dir` (item prefix `prefix`) in the manifest's order; `depth` > 0 limits how deep (keys: 1, the files of one directory). */
  async *walk(dir: string, prefix: string, depth: number): AsyncGenerator<Found> {
    for await (const n of this.sortedNames(dir)) {
      const isDir = n.endsWith("/");
      const name = isDir ? n.slice(0, -1) : n;
      if (name.startsWith(PART_PREFIX)) continue;
      const p = `${prefix}/${name}`;
      const full = inDir(dir, name);
      if (isDir) {
        if (depth !== 1 && !SKIPPED_DIRS.has(name)) yield* this.walk(full, p, depth > 1 ? depth - 1 : 0);
        continue;
      }
      if (++this.walked % walkItemsPerTurn === 0) await new Promise<void>((r) => setImmediate(r));
      let st: Stats;
      try {
        st = lstatSync(full);
      } catch {
        continue; // gone meanwhile
      }
      if (!st.isFile()) continue; // symlinks and devices are not carried
      if ("error" in checkItemPath(this.ch, p)) continue; // a name a peer would refuse (a hidden key file …)
      if (st.size > itemBytesMax) {
        log.warning(`state-sync ${this.ch}: ${full} is larger than ${itemBytesMax} bytes; not carried`);
        continue;
      }
      yield { p, full, st };
    }
  }
}
