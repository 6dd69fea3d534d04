/**
 * Resident memory of a process by owner, from the text of /proc/<pid>/smaps (pure: the caller reads the file).
 * Categories: each LMDB environment (`data.mdb` mappings, by directory), the brk heap (glibc's main malloc
 * arena), anonymous mappings (V8 heaps, glibc's per-thread arenas, libzmq's and OpenSSL's allocations made
 * from non-main threads, thread stacks that have no name), named stacks, and file-backed code and data.
 */
export interface SmapsSummary {
  /** resident kB per category: "lmdb <dir>", "brk heap", "anonymous", "stack", "files" */
  residentKb: Record<string, number>;
  totalKb: number;
}

const header = /^[0-9a-f]+-[0-9a-f]+\s+\S+\s+\S+\s+\S+\s+\S+\s*(.*)$/;

export function categoryOf(pathname: string): string {
  if (pathname === "") return "anonymous";
  if (pathname === "[heap]") return "brk heap";
  if (pathname.startsWith("[stack")) return "stack";
  if (pathname.startsWith("[")) return "kernel";
  if (pathname.endsWith("/data.mdb") || pathname.endsWith("/data.mdb (deleted)")) return `lmdb ${pathname.slice(0, pathname.lastIndexOf("/data.mdb"))}`;
  return "files";
}

export function summarizeSmaps(text: string): SmapsSummary {
  const residentKb: Record<string, number> = {};
  let cat = "anonymous";
  let totalKb = 0;
  for (const line of text.split("\n")) {
    const h = header.exec(line);
    if (h) {
      cat = categoryOf(h[1]!.trim());
      continue;
    }
    if (line.startsWith("Rss:")) {
      const kb = Number(/^Rss:\s+(\d+)\s*kB/.exec(line)?.[1] ?? NaN);
      if (!Number.isFinite(kb)) continue;
      residentKb[cat] = (residentKb[cat] ?? 0) + kb;
      totalKb += kb;
    }
  }
  return { residentKb, totalKb };
}
