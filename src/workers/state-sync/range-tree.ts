import { ContentDigest, byManifest, type Channel, type ManifestEntry } from "./manifest.js";

/**
 * Range summaries, sans I/O (issue 15): how a resync finds what differs between two masters' manifests without
 * sending either whole. The engine (engine.ts) does the asking; the decisions are here, table-tested in
 * test/state-sync/range-tree.test.ts, which also counts the bytes of a whole resync over these functions.
 *
 * A **summary** cuts a stretch of the server's manifest into ranges of consecutive items, each sent as its first
 * path, the digest of its live content (manifest.ts ContentDigest: paths, hashes, modes; no stamps, no tombstones)
 * and how many entries it holds. The puller digests its own items over the same ranges (the server's cut, so the two
 * sides need not agree on boundaries) and goes on only with the ranges that differ.
 *
 * **A tree of summaries** (this version): the first summary cuts the whole manifest into treeFanout ranges; a
 * differing range of more than leafItemsMax entries is asked for as a summary of its own (`sub: 1`, cut again into
 * treeFanout ranges), a smaller one is paged, and so is one where this master holds nothing live (a join: nothing
 * there can match, and its summaries would cost about as much as its entries). A one-item change at n items costs about log_16(n / 32) summaries of 16
 * ranges and one page of at most 32 entries: at 100k items four requests of under a kilobyte each and one page
 * (about 6 KiB in all with the item; test/state-sync/range-tree.test.ts), where the flat summary of the previous
 * version (about √n ranges, then the √n entries of the range: 316 + 317 at 100k) cost about 40 KiB. Its price is
 * round trips: about log_16(n / 32) + 2 instead of 2, each a few hundred microseconds between masters.
 *
 * Why a tree of range digests and not the sender's change journal since the last version the receiver acknowledged:
 * the tree needs no state between two masters (a master restarted, wiped, or seen for the first time resyncs the
 * same way; nothing to keep per peer, nothing to expire, no version numbers to agree on across three or more
 * masters that each change keys), its cost is bounded by what differs whatever happened before, and it is the same
 * code as the join. A journal would send the one change in one round trip, but needs a durable per-channel log, a
 * cursor per peer, and a fallback to the full comparison whenever the log was trimmed or the peer is new: that
 * fallback is this tree anyway.
 *
 * Compatibility: a puller says it reads summaries with `r: 1` and trees with `t: 1`. A server of the previous
 * version ignores `t` and sends its flat summary (ranges without counts: each differing range is paged, as before);
 * a puller of the previous version sends no `t` and gets the flat summary (flatRangeItems: about √n ranges), which it
 * reads as before (the count it does not know is a third element it ignores).
 */

/** One range of a summary. */
export interface SummaryRange {
  /** the range's first path (it ends before the next range's first path; the last one where the summarised stretch ends) */
  a: string;
  /** sha256 of its live content (ContentDigest), lowercase hex */
  h: string;
  /** entries in the range, tombstones included (absent in a summary from a server of the previous version) */
  c?: number;
}

/** Ranges a tree summary cuts a stretch into, count. */
export const treeFanout = 16;
/** A differing range of at most this many entries is paged, not summarised again, count. */
export const leafItemsMax = 32;
/** Nested summaries a walk descends at most (16^8 × 32 entries: far beyond any manifest), count. */
export const treeDepthMax = 8;
/** A manifest this small is sent as pages, never summarised (the summary would not be cheaper), entries. */
export const summaryItemsMin = 256;
/** Fewest entries in a range of a flat summary (the previous version's, for its pullers), count. */
export const rangeItemsMin = 32;
/** Most ranges in one summary, count (a flat summary of a bigger manifest gets longer ranges). */
export const rangesMax = 4096;

/** Entries in one range of a flat summary (the previous version's) of `n` entries: about √n, at least rangeItemsMin, at most rangesMax ranges. */
export function flatRangeItems(n: number): number {
  return Math.max(rangeItemsMin, Math.ceil(Math.sqrt(n)), Math.ceil(n / rangesMax));
}

/** Entries in one range of a tree summary of a stretch of `n` entries: at most treeFanout ranges. */
export function treeRangeItems(n: number): number {
  return Math.max(1, Math.ceil(n / treeFanout));
}

/** The summary of `entries` (the server's, in the manifest's order), `perRange` entries a range (the last one may hold fewer). */
export function summarize(entries: Iterable<ManifestEntry>, perRange: number): SummaryRange[] {
  const out: SummaryRange[] = [];
  let cur: { a: string; d: ContentDigest; c: number } | undefined;
  const close = () => cur && out.push({ a: cur.a, h: cur.d.hex(), c: cur.c });
  for (const e of entries) {
    if (!cur || cur.c >= perRange) {
      close();
      cur = { a: e.p, d: new ContentDigest(), c: 0 };
    }
    cur.d.add(e);
    cur.c++;
  }
  close();
  return out;
}

/** A stretch of a manifest: from `from` (inclusive; absent: the start) to `to` (exclusive; absent: the end). */
export interface Stretch {
  from?: string;
  to?: string;
}

/**
 * The ranges of a summary whose content differs here, as stretches with the server's count and how many live items
 * this master holds there (`here`): `local` is this master's manifest over the summarised stretch `within`, in order
 * (items before the first range are not the server's and need nothing from it).
 */
export function differingRanges(summary: readonly SummaryRange[], local: Iterable<ManifestEntry>, within: Stretch = {}): (Stretch & { from: string; c?: number; here: number })[] {
  const out: (Stretch & { from: string; c?: number; here: number })[] = [];
  const it = local[Symbol.iterator]();
  let next = it.next();
  while (summary.length && !next.done && byManifest(next.value.p, summary[0]!.a) < 0) next = it.next();
  for (let i = 0; i < summary.length; i++) {
    const to = summary[i + 1]?.a ?? within.to;
    const d = new ContentDigest();
    let here = 0;
    while (!next.done && (to === undefined || byManifest(next.value.p, to) < 0)) {
      d.add(next.value);
      if (!next.value.d) here++;
      next = it.next();
    }
    if (d.hex() === summary[i]!.h) continue;
    const r = summary[i]!;
    out.push({ from: r.a, ...(to !== undefined ? { to } : {}), ...(r.c !== undefined ? { c: r.c } : {}), here });
  }
  return out;
}

/** What a puller does next: page a stretch, or ask the server to summarise it (`c` entries there, `depth` summaries deep). */
export type WalkStep = ({ k: "page" } & Stretch & { from: string }) | ({ k: "sub"; c: number; depth: number } & Stretch & { from: string });

/**
 * The puller's walk down a tree of summaries, depth first and in the manifest's order, so at most treeFanout steps
 * a level are pending (memory does not grow with the manifest). `local(stretch)` reads this master's manifest over a
 * stretch. Feed the first summary with add(summary, 0), then take next() until it is undefined: a `page` step is
 * paged and applied, a `sub` step asked (subRequest) and its summary fed with add(summary, step.depth, step).
 * Neighbouring stretches to page are joined into one.
 */
export class SummaryWalk {
  /** pending steps, the next one last */
  private readonly stack: WalkStep[] = [];

  constructor(private readonly local: (s: Stretch) => Iterable<ManifestEntry>) {}

  /** A summary of the stretch `within` (the whole manifest for the first), `depth` summaries below the first (parent's depth; 0 for the first). */
  add(summary: readonly SummaryRange[], parentDepth: number, within: Stretch = {}): void {
    for (const r of summary) {
      if ((within.from !== undefined && byManifest(r.a, within.from) < 0) || (within.to !== undefined && byManifest(r.a, within.to) >= 0)) throw new Error("malformed range summary: a range outside the stretch asked");
    }
    const depth = parentDepth + 1;
    const steps: WalkStep[] = [];
    for (const d of differingRanges(summary, this.local(within), within)) {
      const last = steps.at(-1);
      // a stretch with nothing live here (a join) is paged whole: no part of it can match, its summaries would cost as much as its entries
      if (d.c !== undefined && d.c > leafItemsMax && depth < treeDepthMax && d.here > 0) steps.push({ k: "sub", from: d.from, ...(d.to !== undefined ? { to: d.to } : {}), c: d.c, depth });
      else if (last?.k === "page" && last.to === d.from) {
        if (d.to === undefined) delete last.to;
        else last.to = d.to;
      } else steps.push({ k: "page", from: d.from, ...(d.to !== undefined ? { to: d.to } : {}) });
    }
    for (let i = steps.length - 1; i >= 0; i--) this.stack.push(steps[i]!);
  }

  next(): WalkStep | undefined {
    return this.stack.pop();
  }
}

/** The request for a sub-summary of a step's stretch. */
export function subRequest(ch: Channel, s: WalkStep & { k: "sub" }): { op: "manifest"; ch: Channel; n: number; sub: 1; from: string; to?: string; c: number } {
  return { op: "manifest", ch, n: 0, sub: 1, from: s.from, ...(s.to !== undefined ? { to: s.to } : {}), c: s.c };
}

/** A summary as it travels: `[first path, sha256 as its 32 bytes, entries]` per range. */
export function summaryToWire(sum: readonly SummaryRange[]): [string, Uint8Array, number][] {
  return sum.map((x) => [x.a, Buffer.from(x.h, "hex"), x.c ?? 0]);
}

/** A summary as received, checked (in order, each range's hash 32 bytes, its count a whole number when present); throws when malformed. */
export function summaryFromWire(raw: unknown): SummaryRange[] {
  if (!Array.isArray(raw)) throw new Error("malformed range summary");
  if (raw.length > rangesMax) throw new Error(`malformed range summary: more than ${rangesMax} ranges`);
  const out: SummaryRange[] = [];
  for (const x of raw as unknown[]) {
    if (!Array.isArray(x) || typeof x[0] !== "string" || !(x[1] instanceof Uint8Array) || x[1].byteLength !== 32) throw new Error("malformed range summary");
    if (x[2] !== undefined && !(Number.isSafeInteger(x[2]) && (x[2] as number) >= 0)) throw new Error("malformed range summary: a count that is not a whole number");
    if (out.length && byManifest(out.at(-1)!.a, x[0]) >= 0) throw new Error("malformed range summary: ranges out of order");
    out.push({ a: x[0], h: Buffer.from(x[1]).toString("hex"), ...(x[2] !== undefined ? { c: x[2] as number } : {}) });
  }
  return out;
}
