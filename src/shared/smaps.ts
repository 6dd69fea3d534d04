/**
 * Resident memory of a process by owner, from the text of /proc/<pid>/smaps (pure: the caller reads the file).
 * Categories: each LMDB environment (`data.mdb` mappings, by directory), the brk heap (glibc's main malloc
 * arena), glibc's other malloc arenas (each thread that mallocs gets one: a heap reserved as 64 MiB aligned to
 * 64 MiB, its used part read-write and the rest PROT_NONE), the other anonymous mappings (V8 heaps, large
 * malloc chunks glibc maps on their own, thread stacks that have no name), named stacks, and file-backed code
 * and data.
 */
export interface SmapsSummary {
  /** resident kB per category: "lmdb <dir>", "brk heap", "malloc arenas", "anonymous", "stack", "files" */
  residentKb: Record<string, number>;
  totalKb: number;
}

const header = /^([0-9a-f]+)-([0-9a-f]+)\s+(\S+)\s+\S+\s+\S+\s+\S+\s*(.*)$/;

/** glibc's reservation for one heap of a non-main malloc arena (HEAP_MAX_SIZE on 64-bit), bytes. */
export const arenaHeapBytes = 64 * 1024 * 1024;

export function categoryOf(pathname: string): string {
  if (pathname === "") return "anonymous";
  if (pathname === "[heap]") return "brk heap";
  if (pathname.startsWith("[stack")) return "stack";
  if (pathname.startsWith("[")) return "kernel";
  if (pathname.endsWith("/data.mdb") || pathname.endsWith("/data.mdb (deleted)")) return `lmdb ${pathname.slice(0, pathname.lastIndexOf("/data.mdb"))}`;
  return "files";
}

interface Mapping {
  start: number;
  end: number;
  perms: string;
  cat: string;
  rssKb: number;
}

/**
 * Marks glibc's arena heaps among the anonymous mappings: one that starts on a 64 MiB boundary and, with the
 * PROT_NONE anonymous mappings right after it, ends exactly 64 MiB later (V8 maps its pages 256 KiB-aligned and
 * never leaves such a tail; a large malloc chunk is mapped on its own, unaligned).
 */
function markArenas(maps: Mapping[]): void {
  for (let i = 0; i < maps.length; i++) {
    const m = maps[i]!;
    if (m.cat !== "anonymous" || !m.perms.startsWith("rw") || m.start % arenaHeapBytes !== 0) continue;
    let end = m.end;
    for (let j = i + 1; j < maps.length && end < m.start + arenaHeapBytes; j++) {
      const n = maps[j]!;
      if (n.start !== end || n.cat !== "anonymous" || !n.perms.startsWith("---")) break;
      end = n.end;
    }
    if (end === m.start + arenaHeapBytes) m.cat = "malloc arenas";
  }
}

export function summarizeSmaps(text: string): SmapsSummary {
  const maps: Mapping[] = [];
  for (const line of text.split("\n")) {
    const h = header.exec(line);
    if (h) {
      maps.push({ start: parseInt(h[1]!, 16), end: parseInt(h[2]!, 16), perms: h[3]!, cat: categoryOf(h[4]!.trim()), rssKb: 0 });
      continue;
    }
    if (line.startsWith("Rss:") && maps.length) {
      const kb = Number(/^Rss:\s+(\d+)\s*kB/.exec(line)?.[1] ?? NaN);
      if (Number.isFinite(kb)) maps.at(-1)!.rssKb += kb;
    }
  }
  markArenas(maps);
  const residentKb: Record<string, number> = {};
  let totalKb = 0;
  for (const m of maps) {
    residentKb[m.cat] = (residentKb[m.cat] ?? 0) + m.rssKb;
    totalKb += m.rssKb;
  }
  return { residentKb, totalKb };
}
