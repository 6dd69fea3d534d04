/**
 * Salt sorts file lists with Python's `sorted()` on `str`, i.e. by code point. JS `<` on strings
 * compares UTF-16 code units, which differs for characters above U+FFFF; these helpers compare by code
 * point and filter a sorted list by a string prefix with a binary search.
 */

/** Compare two strings by Unicode code point (Python's str ordering). */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // a surrogate (D800–DFFF) encodes a code point above every BMP character, so it sorts last
    const sx = x >= 0xd800 && x <= 0xdfff;
    const sy = y >= 0xd800 && y <= 0xdfff;
    if (sx !== sy) return sx ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

export function sortCodePoints(items: Iterable<string>): string[] {
  return [...items].sort(compareCodePoints);
}

/** The items of a code-point-sorted list that start with `prefix` (Salt's `startswith` filter). */
export function withPrefix(sorted: readonly string[], prefix: string): string[] {
  if (prefix === "") return sorted.slice();
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareCodePoints(sorted[mid]!, prefix) < 0) lo = mid + 1;
    else hi = mid;
  }
  const out: string[] = [];
  for (let i = lo; i < sorted.length && sorted[i]!.startsWith(prefix); i++) out.push(sorted[i]!);
  return out;
}
