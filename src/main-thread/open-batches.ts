/**
 * The batches of one request lane whose replies are not all answered: a pure core (no I/O, no clock of its
 * own: times are passed in). The lane (req-pool.ts) asks it, for every result and every part (BatchPart)
 * that comes back, which requests the replies answer, so each request gets exactly one reply: from its batch's
 * result, from a part, or, when its worker is gone, an error.
 *
 * A batch is open from its dispatch until every frame is answered. Its result either carries every reply
 * (`complete`), or is one of the batch's numbered messages with its parts: those are applied in their
 * number's order (`inOrder`: a part and a result come on two channels, with no order between them, and a
 * reply must never go before the effects of an earlier message), each answering the frames it names
 * (`answer`); a result that ends the task before the last reply says so (`release`). A failed task answers what is left with an error (`fail`);
 * a released batch whose parts stop coming (its worker died after the task ended) is answered with an error
 * after `replyOwedMsMax` (`expire`).
 */

interface Open<T> {
  /** the tag of each frame (a request's tag is never undefined), undefined once answered */
  tags: (T | undefined)[];
  left: number;
  /** the number of the next message to apply, and those that came early */
  next: number;
  early?: Map<number, unknown>;
  /** when its task ended with replies still owed (ms), undefined while it runs */
  releasedAt?: number;
}

export class OpenBatches<T> {
  private readonly open = new Map<number, Open<T>>();

  /** A batch goes to its worker: one tag per frame, in frame order. */
  add(batch: number, tags: T[]): void {
    this.open.set(batch, { tags, left: tags.length, next: 0 });
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
  answer(batch: number, indices: number[]): (T | undefined)[] {
    const b = this.open.get(batch);
    if (!b) return indices.map(() => undefined);
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

  /**
   * Message `seq` of `batch` came: the messages that can be applied now, in order (none while an earlier one is
   * missing; it and every one held behind it when it comes). A closed batch's message is applied at once (its
   * frames were answered with an error; its effects still go).
   */
  inOrder<M>(batch: number, seq: number, msg: M): M[] {
    const b = this.open.get(batch);
    if (!b) return [msg];
    if (seq !== b.next) {
      (b.early ??= new Map()).set(seq, msg);
      return [];
    }
    const out: M[] = [msg];
    b.next++;
    while (b.early?.has(b.next)) {
      out.push(b.early.get(b.next) as M);
      b.early.delete(b.next++);
    }
    return out;
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

  /** The oldest batch still open (batches are numbered in dispatch order), undefined when none is. */
  oldest(): number | undefined {
    for (const batch of this.open.keys()) return batch;
    return undefined;
  }

  /** Released batches that still owe replies (the sweep runs while there are any). */
  get released(): number {
    let n = 0;
    for (const b of this.open.values()) if (b.releasedAt !== undefined) n++;
    return n;
  }
}
