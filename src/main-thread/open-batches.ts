/**
 * The batches of one request lane whose replies are not all answered: a pure core (no I/O, no clock of its
 * own: times are passed in). The lane (req-pool.ts) asks it, for every result and every part (BatchPart)
 * that comes back, which requests the replies answer, so each request gets exactly one reply: from its batch's
 * result, from a part, or, when its worker is gone, an error.
 *
 * A batch is open from its dispatch until every frame is answered. Its result either carries every reply
 * (`complete`), or says they went in parts (`release`: the task ended, possibly before some of its parts), or
 * carries the last replies after a number of parts (`final`: applied once that many parts were, `partsSeen`);
 * a part answers the frames it names (`answer`). A failed task answers what is left with an error (`fail`);
 * a released batch whose parts stop coming (its worker died after the task ended) is answered with an error
 * after `replyOwedMsMax` (`expire`).
 */

interface Open<T> {
  /** the tag of each frame (a request's tag is never undefined), undefined once answered */
  tags: (T | undefined)[];
  left: number;
  /** parts applied so far */
  parts: number;
  /** when its task ended with replies still owed (ms), undefined while it runs */
  releasedAt?: number;
}

export class OpenBatches<T> {
  private readonly open = new Map<number, Open<T>>();

  /** A batch goes to its worker: one tag per frame, in frame order. */
  add(batch: number, tags: T[]): void {
    this.open.set(batch, { tags, left: tags.length, parts: 0 });
  }

  /** Its result carries every reply: the tags in frame order (empty if the batch is unknown or answered). */
  complete(batch: number): T[] {
    const b = this.open.get(batch);
    if (!b) return [];
    this.open.delete(batch);
    if (b.left !== b.tags.length) throw new Error(`batch ${batch}: a full result after ${b.tags.length - b.left} replies went in parts`);
    return b.tags as T[];
  }

  /**
   * A part answers `indices`: for each, its tag, or undefined when it is not owed (answered already, or its
   * batch closed by an error: its request had its one reply).
   */
  answer(batch: number, indices: number[], part = true): (T | undefined)[] {
    const b = this.open.get(batch);
    if (!b) return indices.map(() => undefined);
    if (part) b.parts++;
    const out = indices.map((index) => {
      const tag = b.tags[index];
      if (tag === undefined) return undefined;
      b.tags[index] = undefined;
      b.left--;
      return tag;
    });
    if (b.left === 0) this.open.delete(batch);
    return out;
  }

  /** Parts applied for `batch` (Infinity once it is closed: a final result waits for nothing then). */
  partsSeen(batch: number): number {
    return this.open.get(batch)?.parts ?? Infinity;
  }

  /** Its task ended, replies going in parts; true when some are still owed (the caller sweeps later). */
  release(batch: number, nowMs: number): boolean {
    const b = this.open.get(batch);
    if (!b) return false;
    b.releasedAt = nowMs;
    return true;
  }

  /** Its task failed (the worker died): the tags of the frames not answered yet; the batch closes. */
  fail(batch: number): T[] {
    const b = this.open.get(batch);
    if (!b) return [];
    this.open.delete(batch);
    return b.tags.filter((t): t is T => t !== undefined);
  }

  /**
   * Every frame still owed by a batch released at or before `beforeMs` (all released ones with Infinity):
   * those batches close; a running batch is not touched (its task's end or failure answers it).
   */
  expire(beforeMs: number): T[] {
    const out: T[] = [];
    for (const [batch, b] of this.open) {
      if (b.releasedAt === undefined || b.releasedAt > beforeMs) continue;
      this.open.delete(batch);
      for (const t of b.tags) if (t !== undefined) out.push(t);
    }
    return out;
  }

  /** Released batches that still owe replies (the sweep runs while there are any). */
  get released(): number {
    let n = 0;
    for (const b of this.open.values()) if (b.releasedAt !== undefined) n++;
    return n;
  }
}
