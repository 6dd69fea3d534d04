/**
 * A small least-recently-used map for compiled patterns.
 *
 * Targets arrive from users and minions, so the set of distinct patterns is unbounded; a plain Map would
 * grow for the life of the master. A JS Map iterates in insertion order, so re-inserting on every hit and
 * evicting the first key gives LRU behaviour without a linked list.
 */
export class BoundedCache<K, V> {
  readonly #entries = new Map<K, V>();
  readonly #limit: number;
  /** the most recently used key: hits on it (the common case in a loop over minions) skip reordering */
  #newest: K | undefined;

  /** @param limit how many entries to keep; at least 1. */
  constructor(limit: number) {
    this.#limit = Math.max(1, Math.floor(limit));
  }

  get(key: K): V | undefined {
    const value = this.#entries.get(key);
    if (value !== undefined && key !== this.#newest) {
      // refresh recency: move the key to the end of the iteration order
      this.#entries.delete(key);
      this.#entries.set(key, value);
      this.#newest = key;
    }
    return value;
  }

  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    this.#newest = key;
    while (this.#entries.size > this.#limit) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.#entries.delete(oldest.value);
    }
  }

  /** Returns the cached value, or computes, stores and returns it. */
  getOrCompute(key: K, compute: (key: K) => V): V {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const value = compute(key);
    this.set(key, value);
    return value;
  }

  get size(): number {
    return this.#entries.size;
  }
}
