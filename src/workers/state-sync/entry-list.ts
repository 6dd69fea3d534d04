/**
 * The live entries of one manifest page that a pull fetches, held as bytes (sans I/O; issue 15, "memory stays flat
 * whatever the bank's size").
 *
 * Why: a page's items are fetched over many requests (up to pageItemsMax items, a batch of batchItemsMax at a time,
 * requestsInFlightMax in flight), and the pull allocates ~4 KiB an item meanwhile (replies, installs). Everything
 * that stays alive across that stretch survives two of V8's scavenges (the state-sync thread's young generation is
 * small: stateSyncHeapLimits) and is promoted to the old generation, where it stays as garbage until the next
 * mark-compact. With a page of decoded objects (the CBOR maps, the hashes as hex strings, the diff's lists, the
 * batches' lists) that was ~350 bytes an item promoted, so the thread's heap grew with a pull's length until V8's
 * next mark-compact, 8 MiB or so above what is live (bench/RESULTS.md, sessions 11 and 13).
 *
 * An EntryList keeps a page's entries in a handful of buffers that it reuses from page to page (paths as UTF-8,
 * hashes as their 32 bytes, sizes, stamps and modes in typed arrays, offsets), so what lives across a page's fetches
 * is the same few objects whatever the page's length and the pull's; an entry is made again (`at`) where it is used,
 * in a synchronous stretch, and dies young.
 */
import type { ManifestEntry } from "./manifest.js";

/** Bytes of a sha256. */
const hashBytes = 32;

export class EntryList {
  private n = 0;
  private cap = 0;
  private pathBytes = Buffer.alloc(0);
  /** path i is pathBytes[ends[i - 1] ?? 0, ends[i]) */
  private ends = new Uint32Array(0);
  private sizes = new Float64Array(0);
  private stamps = new Float64Array(0);
  private modes = new Uint16Array(0);
  private hashes = Buffer.alloc(0);

  get length(): number {
    return this.n;
  }

  /** Replaces what the list holds with `entries` (live entries, as validEntry passes them: sha256 in hex, mode ≤ 0o7777). */
  load(entries: readonly ManifestEntry[]): void {
    const n = entries.length;
    if (n > this.cap) {
      this.cap = Math.max(n, this.cap * 2);
      this.ends = new Uint32Array(this.cap);
      this.sizes = new Float64Array(this.cap);
      this.stamps = new Float64Array(this.cap);
      this.modes = new Uint16Array(this.cap);
      this.hashes = Buffer.alloc(this.cap * hashBytes);
    }
    let bytes = 0;
    for (const e of entries) bytes += Buffer.byteLength(e.p, "utf8");
    if (bytes > this.pathBytes.byteLength) this.pathBytes = Buffer.alloc(Math.max(bytes, this.pathBytes.byteLength * 2));
    let at = 0;
    for (let i = 0; i < n; i++) {
      const e = entries[i]!;
      if (e.d) throw new Error(`an EntryList holds live entries only (${e.p} is a tombstone)`);
      at += this.pathBytes.write(e.p, at, "utf8");
      this.ends[i] = at;
      this.sizes[i] = e.s;
      this.stamps[i] = e.t;
      this.modes[i] = e.m;
      if (this.hashes.write(e.h, i * hashBytes, hashBytes, "hex") !== hashBytes) throw new Error(`${e.p}: not a sha256 in hex`);
    }
    this.n = n;
  }

  /** Item i's size, bytes (no entry made). */
  size(i: number): number {
    this.check(i);
    return this.sizes[i]!;
  }

  /** Item i's path. */
  path(i: number): string {
    this.check(i);
    return this.pathBytes.toString("utf8", i === 0 ? 0 : this.ends[i - 1]!, this.ends[i]!);
  }

  /** Item i as an entry of its own (made now: keep it no longer than the synchronous stretch that uses it). */
  at(i: number): ManifestEntry {
    return { p: this.path(i), s: this.sizes[i]!, h: this.hashes.toString("hex", i * hashBytes, (i + 1) * hashBytes), m: this.modes[i]!, t: this.stamps[i]! };
  }

  private check(i: number): void {
    if (!(i >= 0 && i < this.n)) throw new RangeError(`entry ${i} of ${this.n}`);
  }
}
