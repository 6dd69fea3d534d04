/**
 * OAEP ciphertexts of the publish AES key and of a minion's session key, kept per minion between its
 * sign-ins. A returning minion's sign-in otherwise pays two RSA public-key operations for values that
 * have not changed since its last one. Re-sending an earlier ciphertext of the same plaintext to the
 * same key tells an eavesdropper only that the key did not change, which the reply's AES-key signature
 * (identical until rotation) already shows. An entry is used only while the minion's public key (its tag in the
 * master's accepted-key table: it changes exactly when the key's text does), the plaintext and the padding
 * algorithm all match; anything else re-encrypts. A key with no tag (0) is encrypted to and not kept.
 *
 * The ciphertexts are kept as latin1 strings, not Buffers: a 256-byte Buffer kept per minion is an ArrayBuffer of
 * its own (its backing store, its V8 objects: ~820 B of RSS measured on this box) where the string is ~270 B of V8
 * heap, and every sign-in thread keeps two per minion it served (issue 17). A sign-in gets Buffers made anew (~1 µs).
 */
import type { KeyObject } from "node:crypto";
import { oaepEncrypt, type EncAlgo } from "../../shared/protocol/rsa.js";

/**
 * Minions whose ciphertexts one sign-in thread keeps (~680 B of V8 heap each with its entry, and the session key's
 * string); the oldest go first. A kept pair saves two OAEP public-key operations (~40 µs of a ~2 ms sign-in) only
 * when the minion signs in again before the AES key rotates: the bench's re-sign-in rounds (200 minions) and a
 * reconnect storm of a fleet that fits. Past it a re-sign-in encrypts again; at 5,000 minions the pairs of every
 * minion cost ~0.8 KB per minion (issue 17), bounded here to ~0.7 MB a thread.
 */
export const authCipherEntriesMax = 1_024;

interface Entry {
  /** the minion key's tag (AcceptedKey.tag), not its text: one copy of a minion's key per master (issue 17) */
  keyTag: number;
  algo: EncAlgo;
  aesKey: string;
  /** the ciphertexts' bytes, latin1 */
  aes: string;
  sessionKey: string;
  session: string;
}

const seal = (key: KeyObject, plain: string, algo: EncAlgo): string => oaepEncrypt(key, Buffer.from(plain, "latin1"), algo).toString("latin1");

export class AuthCipherCache {
  private readonly map = new Map<string, Entry>();

  constructor(private readonly entriesMax = authCipherEntriesMax) {}

  /** `{aes, session}` encrypted to `key` (the minion's public key, `keyTag` its accepted key's tag; 0: not kept) with `algo`. */
  ciphertexts(id: string, keyTag: number, key: KeyObject, algo: EncAlgo, aesKey: string, sessionKey: string): { aes: Buffer; session: Buffer } {
    let e = this.map.get(id);
    if (e === undefined || e.keyTag !== keyTag || keyTag === 0 || e.algo !== algo) {
      e = { keyTag, algo, aesKey, aes: seal(key, aesKey, algo), sessionKey, session: seal(key, sessionKey, algo) };
      if (keyTag !== 0) this.remember(id, e);
      else this.map.delete(id);
    } else {
      if (e.aesKey !== aesKey) {
        e.aesKey = aesKey;
        e.aes = seal(key, aesKey, algo);
      }
      if (e.sessionKey !== sessionKey) {
        e.sessionKey = sessionKey;
        e.session = seal(key, sessionKey, algo);
      }
      this.remember(id, e); // used last: the last to go
    }
    return { aes: Buffer.from(e.aes, "latin1"), session: Buffer.from(e.session, "latin1") };
  }

  private remember(id: string, e: Entry): void {
    this.map.delete(id);
    if (this.map.size >= this.entriesMax) this.map.delete(this.map.keys().next().value!);
    this.map.set(id, e);
  }
}
