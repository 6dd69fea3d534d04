/**
 * The publish AES key, shared by every thread through a SharedArrayBuffer so that a rotation made by
 * the main thread is seen by all request workers and the publisher at their next request, without a
 * message round to each.
 *
 * Layout (Int32 words): [0] seq (seqlock: odd while writing), [1] generation, [2] key length,
 * then the key string's ASCII bytes. Writers: the main thread only. Readers retry while seq is odd or
 * changed under them; a 76-byte copy makes that window tiny.
 */
import { BrineError } from "./errors.js";

const keyBytesMax = 128;
const HEADER_WORDS = 3;
const readRetriesMax = 10_000;

export class SharedSecrets {
  readonly sab: SharedArrayBuffer;
  private readonly words: Int32Array;
  private readonly bytes: Uint8Array;
  private cachedGen = -1;
  private cachedKey = "";

  constructor(sab?: SharedArrayBuffer) {
    this.sab = sab ?? new SharedArrayBuffer(HEADER_WORDS * 4 + keyBytesMax);
    this.words = new Int32Array(this.sab, 0, HEADER_WORDS);
    this.bytes = new Uint8Array(this.sab, HEADER_WORDS * 4, keyBytesMax);
  }

  /** Main thread only. */
  setAesKey(key: string): number {
    const b = Buffer.from(key, "latin1");
    if (b.length > keyBytesMax) throw new BrineError("CRYPTICLE_FORMAT", "key string too long");
    Atomics.add(this.words, 0, 1);
    this.bytes.fill(0);
    this.bytes.set(b);
    Atomics.store(this.words, 2, b.length);
    const gen = Atomics.add(this.words, 1, 1) + 1;
    Atomics.add(this.words, 0, 1);
    return gen;
  }

  generation(): number {
    return Atomics.load(this.words, 1);
  }

  /** The current key and its generation; the string is cached per generation. */
  aesKey(): { key: string; generation: number } {
    for (let i = 0; i < readRetriesMax; i++) {
      const s1 = Atomics.load(this.words, 0);
      if (s1 & 1) continue;
      const gen = Atomics.load(this.words, 1);
      if (gen === this.cachedGen) return { key: this.cachedKey, generation: gen };
      const len = Atomics.load(this.words, 2);
      const key = Buffer.from(this.bytes.slice(0, len)).toString("latin1");
      if (Atomics.load(this.words, 0) === s1) {
        this.cachedGen = gen;
        this.cachedKey = key;
        return { key, generation: gen };
      }
    }
    throw new BrineError("CRYPTICLE_FORMAT", "shared AES key unreadable (writer stalled)");
  }
}
