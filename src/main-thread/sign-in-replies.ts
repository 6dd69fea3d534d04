/**
 * A sign-in sent again is answered at once with the reply its first copy got, from the main thread, without
 * queueing or RSA work. Salt's minion sends one sign-in payload (one nonce) up to `auth_tries` times, `auth_timeout`
 * apart (salt/crypt.py `sign_in`): 3007.x on a new connection each try, 3006.8 on the same one once the late reply
 * to the try before has come. In a storm the reply to a try is often made after its minion stopped waiting for it;
 * the next try, with the very same bytes, then finds that reply here instead of waiting its turn in the clear lane
 * again (and timing out again). Pure core: the clock is given; the request port (request-port.ts) is its shell.
 *
 * What is remembered: the signed replies (`_clear_signed`, accept or refusal) of `_auth` requests, keyed by the
 * SHA-256 of the request's bytes (same id, nonce, key, token: the same question), for `signInReplyRememberMs`, and
 * only under the AES key generation the reply carries (a rotation forgets them all). Retry-later answers (stale,
 * gone, queue full) are not remembered. Bounded: `signInRepliesBytesMax` in all, the oldest go first.
 * What differs from Salt's master: a copy answered from here is not acted on again (no second `salt/auth` event,
 * no key file check): a key rejected or deleted within those 10 s still has the very sign-in it sent before
 * answered as it was (its reply opens only with that minion's private key).
 */
import { createHash } from "node:crypto";
import { CLEAR_SIGNED_HEAD } from "../workers/req-handler/replies.js";

/** How long a sign-in's reply is remembered, ms: past the minion's next try (auth_timeout 5 s, Salt's default). */
export const signInReplyRememberMs = 10_000;
/** Bytes of remembered replies in all (a sign-in reply is ~1.5 KiB: ~5,000 of them). */
export const signInRepliesBytesMax = 8 * 1024 * 1024;

/** `"cmd": "_auth"` as msgpack packs it (fixstr "cmd", fixstr "_auth"): the requests this applies to. */
const AUTH_MARK = Buffer.from([0xa3, 0x63, 0x6d, 0x64, 0xa5, 0x5f, 0x61, 0x75, 0x74, 0x68]);

interface Entry {
  reply: Buffer;
  at: number;
  generation: number;
}

export class SignInReplies {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;

  constructor(
    private readonly now: () => number,
    private readonly rememberMs = signInReplyRememberMs,
    private readonly bytesMax = signInRepliesBytesMax,
  ) {}

  /** The key of a request that is a sign-in (its bytes' SHA-256), or undefined for any other request. */
  keyOf(body: Buffer): string | undefined {
    if (body.indexOf(AUTH_MARK) < 0) return undefined;
    return createHash("sha256").update(body).digest("base64");
  }

  /** The reply the same sign-in got, still fresh under AES key `generation`, or undefined. */
  recall(key: string, generation: number): Buffer | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.generation !== generation || this.now() - e.at > this.rememberMs) {
      this.forget(key, e);
      return undefined;
    }
    return e.reply;
  }

  /** Remember `reply` for the sign-in `key` when it is a signed reply (not a retry-later answer). */
  remember(key: string, reply: Buffer, generation: number): void {
    if (reply.length > this.bytesMax || !reply.subarray(0, CLEAR_SIGNED_HEAD.length).equals(CLEAR_SIGNED_HEAD)) return;
    const old = this.entries.get(key);
    if (old) this.forget(key, old);
    const now = this.now();
    // oldest first (a Map iterates in insertion order): expired ones, then as many as the bound needs
    for (const [k, e] of this.entries) {
      if (now - e.at <= this.rememberMs && this.bytes + reply.length <= this.bytesMax) break;
      this.forget(k, e);
    }
    // a copy of its own: a reply from a worker may be a view of a larger buffer
    this.entries.set(key, { reply: Buffer.from(reply), at: now, generation });
    this.bytes += reply.length;
  }

  /**
   * Forgets the replies past their time, oldest first, and says how many: the request port calls it on a coarse
   * timer, so a storm's replies (up to `bytesMax` and an entry per minion) do not stay until the next sign-in.
   */
  expire(): number {
    const now = this.now();
    let n = 0;
    for (const [k, e] of this.entries) {
      if (now - e.at <= this.rememberMs) break;
      this.forget(k, e);
      n++;
    }
    return n;
  }

  get size(): number {
    return this.entries.size;
  }

  private forget(key: string, e: Entry): void {
    this.entries.delete(key);
    this.bytes -= e.reply.length;
  }
}
