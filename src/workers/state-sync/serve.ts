/**
 * The serving side of a transfer (in the state-sync thread): a peer's manifest and fetch requests answered from a
 * Source (sources.ts, store-sources.ts). engine.ts routes a peer's request here once it has parsed it, found the
 * channel's source, scanned it for a first manifest request and written the key channels' probe; the pulling side and
 * the rest of the engine never call these.
 *
 * - manifest: `same` when the asker's digest is this master's; for an asker that reads them and a source with many
 *   items, a range summary (the top of a tree, or the flat summary of the previous version) instead of the first
 *   page, and a stretch's own summary when the asker descends the tree (range-tree.ts); else a page of at most
 *   pageItemsMax entries, in the compact form for an asker that reads it (`w`).
 * - get: whole items by path (the reply's pieces in the request's order, a whole item that does not fit what is left
 *   of the reply refused so that the puller fetches it by ranges) or ranges with their sha256, at most chunkBytesMax of
 *   data a reply; each path checked against the channel's confinement first.
 * Replies deflated for an asker that reads them (`z`, wire.ts), never a large item's range.
 */
import { batchItemsMax, chunkBytesMax, pageItemsMax, summaryPathBytesMax, wireForm, type PeerMsg, type Piece } from "./messages.js";
import { checkItemPath, entryToWire, type Channel } from "./manifest.js";
import { flatRangeItems, summarize, summaryItemsMin, summaryToWire, treeRangeItems } from "./range-tree.js";
import type { Source } from "./sources.js";
import { sha256 } from "./dir-install.js";
import { packReply } from "./wire.js";

type ManifestMsg = Extract<PeerMsg, { op: "manifest" }>;
type GetMsg = Extract<PeerMsg, { op: "get" }>;

/** A manifest request's answer; `probe`: the shared-directory token for a first request of a key channel (engine.ts writeProbe). */
export async function serveManifest(src: Source, m: ManifestMsg, probe: string | undefined, z: boolean): Promise<Uint8Array> {
  const range = { ...(typeof m.from === "string" ? { from: m.from } : {}), ...(typeof m.to === "string" ? { to: m.to } : {}) };
  const first = m.after === undefined && range.from === undefined;
  // the same live content on both sides (a digest is "" for banks, never equal): no page needed
  if (first && typeof m.digest === "string" && m.digest !== "" && m.digest === src.digest()) return packReply({ same: true, entries: [], more: false, ...(probe ? { probe } : {}) }, z);
  // many items, and an asker that reads range summaries: the summary instead of the first page (the top of a
  // tree for an asker that reads trees, `t: 1`; the flat summary of the previous version for one that does not)
  if (first && m.r === 1 && src.entries && src.count && src.count() > summaryItemsMin) {
    const n = src.count();
    const sum = summarize(src.entries(), m.t === 1 ? treeRangeItems(n) : flatRangeItems(n));
    if (sum.reduce((n, x) => n + x.a.length, 0) <= summaryPathBytesMax) return packReply({ sum: summaryToWire(sum), ...(probe ? { probe } : {}) }, z);
  }
  // a stretch of a tree the asker descends: its summary, cut for the entries the asker was told it holds
  if (m.sub === 1 && range.from !== undefined && src.entries) {
    const c = typeof m.c === "number" && Number.isSafeInteger(m.c) && m.c > 0 ? m.c : (src.count?.() ?? 1);
    return packReply({ sum: summaryToWire(summarize(src.entries(range), treeRangeItems(c))) }, z);
  }
  const n = typeof m.n === "number" && m.n > 0 ? Math.min(m.n, pageItemsMax) : pageItemsMax;
  const pg = await src.page(typeof m.after === "string" ? m.after : undefined, n, range);
  // the compact forms only for an asker that reads them (a master of an earlier version during a rolling upgrade does not)
  const compact = m.w === wireForm;
  return packReply({ entries: compact ? pg.entries.map(entryToWire) : pg.entries, more: pg.more, ...(probe ? { probe } : {}), ...(compact ? { w: wireForm } : {}) }, z);
}

/** A fetch request's answer: a piece per item asked, in the request's order. */
export async function serveGet(src: Source, ch: Channel, m: GetMsg, z: boolean): Promise<Uint8Array> {
  if (!Array.isArray(m.items) || m.items.length > batchItemsMax) throw new Error("malformed fetch request");
  const pieces: Piece[] = [];
  let total = 0;
  for (const item of m.items as unknown[]) {
    const whole = typeof item === "string";
    const it = (whole ? { p: item } : item) as Record<string, unknown>;
    const p = typeof it?.p === "string" ? it.p : "";
    const off = !whole && Number.isInteger(it?.off) && (it.off as number) >= 0 ? (it.off as number) : 0;
    // a whole item is read one byte past what is left of this reply, to tell one that does not fit
    const len = !whole && Number.isInteger(it?.len) && (it.len as number) >= 0 ? Math.min(it.len as number, chunkBytesMax) : chunkBytesMax - total + 1;
    const at = whole ? {} : { off };
    const c = checkItemPath(ch, p);
    if ("error" in c) {
      pieces.push({ p, ...at, error: `refused path: ${c.error}` });
      continue;
    }
    if (whole ? len <= 1 : total + len > chunkBytesMax) {
      pieces.push({ p, ...at, error: "more than one reply carries; ask again" });
      continue;
    }
    try {
      const data = await src.read(p, whole ? undefined : typeof it.h === "string" ? it.h : "", off, len);
      if (whole && data.byteLength >= len) {
        // a whole item does not fit what is left of this reply: the puller fetches it by ranges
        pieces.push({ p, error: "more than one reply carries; ask again" });
        continue;
      }
      total += data.byteLength;
      pieces.push(whole ? { data } : { p, off, data, ph: sha256(data) });
    } catch (e) {
      pieces.push({ p, ...at, error: (e as Error).message });
    }
  }
  // whole small items (keys, small files) deflated for an asker that reads it; a large item's range is not (wire.ts)
  return packReply({ pieces }, z && (m.items as unknown[]).every((it) => typeof it === "string"));
}
