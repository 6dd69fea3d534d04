/**
 * OAEP ciphertexts of the publish AES key and of a minion's session key, kept per minion between its
 * sign-ins. A returning minion's sign-in otherwise pays two RSA public-key operations for values that
 * have not changed since its last one. Re-sending an earlier ciphertext of the same plaintext to the
 * same key tells an eavesdropper only that the key did not change, which the reply's AES-key signature
 * (identical until rotation) already shows. An entry is used only while the minion's public key, the
 * plaintext and the padding algorithm all match; anything else re-encrypts.
 */
import type { KeyObject } from "node:crypto";
import { oaepEncrypt, type EncAlgo } from "../../shared/protocol/rsa.js";

/** Minions whose ciphertexts one request thread keeps (about 600 bytes each); the oldest go first. */
export const authCipherEntriesMax = 50_000;

interface Entry {
  pub: string;
  algo: EncAlgo;
  aesKey: string;
  aes: Buffer;
  sessionKey: string;
  session: Buffer;
}

export class AuthCipherCache {
  private readonly map = new Map<string, Entry>();

  constructor(private readonly entriesMax = authCipherEntriesMax) {}

  /** `{aes, session}` encrypted to `key` (the minion's public key, `pub` its PEM) with `algo`. */
  ciphertexts(id: string, pub: string, key: KeyObject, algo: EncAlgo, aesKey: string, sessionKey: string): { aes: Buffer; session: Buffer } {
    let e = this.map.get(id);
    if (e === undefined || e.pub !== pub || e.algo !== algo) {
      e = { pub, algo, aesKey, aes: oaepEncrypt(key, Buffer.from(aesKey, "latin1"), algo), sessionKey, session: oaepEncrypt(key, Buffer.from(sessionKey, "latin1"), algo) };
      this.remember(id, e);
      return e;
    }
    if (e.aesKey !== aesKey) {
      e.aesKey = aesKey;
      e.aes = oaepEncrypt(key, Buffer.from(aesKey, "latin1"), algo);
    }
    if (e.sessionKey !== sessionKey) {
      e.sessionKey = sessionKey;
      e.session = oaepEncrypt(key, Buffer.from(sessionKey, "latin1"), algo);
    }
    return e;
  }

  private remember(id: string, e: Entry): void {
    this.map.delete(id);
    if (this.map.size >= this.entriesMax) this.map.delete(this.map.keys().next().value!);
    this.map.set(id, e);
  }
}
