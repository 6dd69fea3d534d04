/**
 * A genuine resend is answered, not refused as a replay: the replies of accepted AES requests, remembered for a
 * while by nonce, so that a copy of the same request gets the reply the first one got and is acted on once.
 * Pure core (no clock of its own, no I/O): the request workers say what each frame was (worker.ts, request.ts),
 * the main thread's request lane keeps this memory and answers the copies (src/main-thread/req-pool.ts).
 *
 * Why (docs/security.md, "A resend"): Salt's `_pillar` (crypted_transfer_decode_dictentry, 3006.8 and 3007.x)
 * sends the very same bytes again when its request times out (request_channel_timeout, 60 s, three tries);
 * 3006.8 after the first reply came back on the same socket, 3007.x at once on a new connection while the master
 * may still be working on the first. The nonce check refused that copy as a replay, so a slow master turned a late
 * pillar into "Exception getting pillar", where the Python master (no nonce check) renders it again.
 *
 * The request, as a key: the nonce (32 hex characters) and the first `resendTagBytes` of the HMAC-SHA256 tag
 * ending its sealed load (the decryption verified it, so two frames that passed it with one tag carry one
 * ciphertext, under one key). A copy is a frame whose nonce this master's set had already seen (or its decider had):
 * - its key is remembered with the same tag: answered with the remembered reply (acted on once);
 * - the nonce is remembered with another tag: a replay (or a re-sealing of a request already answered), refused;
 * - not remembered: the first may still be in flight here (a slow `_pillar`): the copy waits until every batch that
 *   was in flight when it came has finished (`wait`, `settleUnknown`), then, still unknown, it is refused as
 *   before (answered long ago and forgotten, seen before a restart), or, clustered, the other masters are asked
 *   for it (src/main-thread/cluster/resend-replies.ts: the one that answered the first remembers its reply).
 * A refused first request's reply is remembered too: the copy gets the same answer.
 *
 * Bounded: replies are kept `resendRememberMs` at most, `resendRepliesBytesMax` in all (the oldest go first), and
 * a reply over `resendReplyBytesMax` is not kept (its copy is refused as before).
 */

/** What a request worker says about a frame: its reply is to be remembered, or it is a copy to answer. */
export const MEMO_FRESH = 0;
export const MEMO_COPY = 1;
/** a request still waiting before it is handled (its kind is set when it is): nothing to remember or answer */
export const MEMO_NONE = 2;

/** How long an accepted request's reply is remembered, ms: Salt's `_pillar` tries three times, 60 s apart. */
export const resendRememberMs = 200_000;
/** Bytes of remembered replies per master, in all (the bound counts `entryOverheadBytes` per entry too). */
export const resendRepliesBytesMax = 32 * 1024 * 1024;
/** A reply larger than this many bytes is not remembered. */
export const resendReplyBytesMax = 1024 * 1024;
/** Bytes of the sealed load's HMAC tag that name a request beside its nonce. */
export const resendTagBytes = 16;
/** Bytes counted per entry beside its reply (the map entry, its key and tag strings, the queue slot). */
export const entryOverheadBytes = 200;

/** Hex characters of a nonce, then of the tag, in a memo key (`nonce + tag`). */
export const NONCE_HEX = 32;
export const TAG_HEX = resendTagBytes * 2;

/** What the memory says of a copy: its reply, a replay (same nonce, other bytes), or unknown here. */
export type Recall = { k: "reply"; reply: Uint8Array } | { k: "other" } | { k: "unknown" };

interface Entry {
  tag: string;
  reply: Uint8Array;
  at: number;
}

interface Waiter<T> {
  tag: string;
  who: T;
  /** the newest batch in flight when the copy came: once every batch up to it has finished, it is unknown */
  upTo: number;
}

/** A copy whose answer is now known: `reply` undefined means refused (a replay, or nothing remembered). */
export interface Answered<T> {
  who: T;
  reply: Uint8Array | undefined;
  why: "same" | "other" | "unknown";
  /** the copy's key (nonce and tag) */
  key: string;
}

export class NonceReplies<T> {
  private readonly entries = new Map<string, Entry>();
  /** nonces in the order remembered (a queue: `head` is the oldest still in it) */
  private order: string[] = [];
  private head = 0;
  private bytes = 0;
  private readonly waiters = new Map<string, Waiter<T>[]>();
  private waiting = 0;

  constructor(
    private readonly rememberMs = resendRememberMs,
    private readonly bytesMax = resendRepliesBytesMax,
    private readonly replyBytesMax = resendReplyBytesMax,
  ) {}

  /** Bytes held now (replies and the per-entry overhead). */
  get heldBytes(): number {
    return this.bytes;
  }

  get size(): number {
    return this.entries.size;
  }

  /** Copies waiting for a first reply. */
  get waitingCopies(): number {
    return this.waiting;
  }

  /**
   * The reply to an accepted request (`key`: nonce and tag); `reply` must be a copy of its own (the memory keeps
   * it). Returns the copies that were waiting for it, now answered.
   */
  remember(key: string, reply: Uint8Array, nowMs: number): Answered<T>[] {
    const nonce = key.slice(0, NONCE_HEX);
    const tag = key.slice(NONCE_HEX);
    const answered = this.answerWaiting(nonce, tag, reply);
    this.expire(nowMs);
    if (reply.byteLength > this.replyBytesMax || this.entries.has(nonce)) return answered;
    this.entries.set(nonce, { tag, reply, at: nowMs });
    this.order.push(nonce);
    this.bytes += reply.byteLength + entryOverheadBytes;
    while (this.bytes > this.bytesMax && this.drop()) {
      /* the oldest go first */
    }
    return answered;
  }

  /** What the memory has for a copy with `key`. */
  recall(key: string, nowMs: number): Recall {
    this.expire(nowMs);
    const e = this.entries.get(key.slice(0, NONCE_HEX));
    if (!e) return { k: "unknown" };
    return e.tag === key.slice(NONCE_HEX) ? { k: "reply", reply: e.reply } : { k: "other" };
  }

  /** A copy nothing is remembered for: it waits for its first's reply, or for every batch up to `upTo` to finish. */
  wait(key: string, who: T, upTo: number): void {
    const nonce = key.slice(0, NONCE_HEX);
    let list = this.waiters.get(nonce);
    if (!list) this.waiters.set(nonce, (list = []));
    list.push({ tag: key.slice(NONCE_HEX), who, upTo });
    this.waiting++;
  }

  /**
   * The oldest batch still in flight is `oldestOpen` (undefined: none): the copies that waited only for batches
   * before it are unknown here, refused.
   */
  settleUnknown(oldestOpen: number | undefined): Answered<T>[] {
    if (this.waiting === 0) return [];
    const out: Answered<T>[] = [];
    for (const [nonce, list] of this.waiters) {
      const keep = list.filter((w) => {
        if (oldestOpen !== undefined && w.upTo >= oldestOpen) return true;
        out.push({ who: w.who, reply: undefined, why: "unknown", key: nonce + w.tag });
        return false;
      });
      if (keep.length) this.waiters.set(nonce, keep);
      else this.waiters.delete(nonce);
    }
    this.waiting -= out.length;
    return out;
  }

  /** Every waiting copy, refused (the master stops). */
  abandon(): Answered<T>[] {
    const out: Answered<T>[] = [];
    for (const [nonce, list] of this.waiters) for (const w of list) out.push({ who: w.who, reply: undefined, why: "unknown", key: nonce + w.tag });
    this.waiters.clear();
    this.waiting = 0;
    return out;
  }

  private answerWaiting(nonce: string, tag: string, reply: Uint8Array): Answered<T>[] {
    if (this.waiting === 0) return [];
    const list = this.waiters.get(nonce);
    if (!list) return [];
    this.waiters.delete(nonce);
    this.waiting -= list.length;
    return list.map((w) => ({ who: w.who, reply: w.tag === tag ? reply : undefined, why: w.tag === tag ? ("same" as const) : ("other" as const), key: nonce + w.tag }));
  }

  private expire(nowMs: number): void {
    while (this.head < this.order.length) {
      const e = this.entries.get(this.order[this.head]!);
      if (e && nowMs - e.at < this.rememberMs) break;
      this.drop();
    }
  }

  /** Forget the oldest entry; false when there is none. */
  private drop(): boolean {
    if (this.head >= this.order.length) return false;
    const nonce = this.order[this.head++]!;
    const e = this.entries.get(nonce);
    if (e) {
      this.entries.delete(nonce);
      this.bytes -= e.reply.byteLength + entryOverheadBytes;
    }
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
    return true;
  }
}
