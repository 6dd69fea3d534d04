/**
 * RSA operations Salt uses, on cached KeyObjects (parsing a PEM costs more than the decrypt itself:
 * reference-points A3, 713/s vs 2,475/s).
 *
 * - OAEP (SHA-1 or SHA-224, same hash for MGF1, no label) carries 76-char key strings.
 * - PKCS#1 v1.5 signatures (SHA-1 or SHA-224) sign clear replies, pillar and publishes.
 * - X9.31 "private encrypt" lives in x931.ts.
 */
import { constants, createPrivateKey, createPublicKey, privateDecrypt, publicEncrypt, sign, verify, type KeyObject } from "node:crypto";
import { BrineError } from "../errors.js";

export type EncAlgo = "OAEP-SHA1" | "OAEP-SHA224";
export type SigAlgo = "PKCS1v15-SHA1" | "PKCS1v15-SHA224";
export const ENC_ALGOS: readonly EncAlgo[] = ["OAEP-SHA1", "OAEP-SHA224"];
export const SIG_ALGOS: readonly SigAlgo[] = ["PKCS1v15-SHA1", "PKCS1v15-SHA224"];
export const DEFAULT_ENC_ALGO: EncAlgo = "OAEP-SHA1";
export const DEFAULT_SIG_ALGO: SigAlgo = "PKCS1v15-SHA1";

export function isEncAlgo(v: unknown): v is EncAlgo {
  return typeof v === "string" && (ENC_ALGOS as readonly string[]).includes(v);
}
export function isSigAlgo(v: unknown): v is SigAlgo {
  return typeof v === "string" && (SIG_ALGOS as readonly string[]).includes(v);
}

const oaepHash = (a: EncAlgo) => (a === "OAEP-SHA224" ? "sha224" : "sha1");
const sigHash = (a: SigAlgo) => (a === "PKCS1v15-SHA224" ? "sha224" : "sha1");

/** Bounded cache of parsed keys, keyed by the PEM text. Oldest entries go first when full. */
class KeyCache {
  private readonly map = new Map<string, KeyObject>();
  constructor(private readonly entriesMax: number) {}
  get(pem: string, parse: (pem: string) => KeyObject): KeyObject {
    let k = this.map.get(pem);
    if (k === undefined) {
      k = parse(pem);
      if (this.map.size >= this.entriesMax) this.map.delete(this.map.keys().next().value!);
      this.map.set(pem, k);
    }
    return k;
  }
}

/** One entry per accepted minion plus the master's own keys; 100k minions fit. */
export const keyCacheEntriesMax = 200_000;
const publicKeys = new KeyCache(keyCacheEntriesMax);
const privateKeys = new KeyCache(64);

export function publicKey(pem: string): KeyObject {
  return publicKeys.get(pem, (p) => {
    try {
      return createPublicKey(p);
    } catch (e) {
      throw new BrineError("RSA_BAD_KEY", (e as Error).message);
    }
  });
}

export function privateKey(pem: string): KeyObject {
  return privateKeys.get(pem, (p) => {
    try {
      return createPrivateKey(p);
    } catch (e) {
      throw new BrineError("RSA_BAD_KEY", (e as Error).message);
    }
  });
}

export function oaepEncrypt(key: KeyObject, data: Buffer, algo: EncAlgo = DEFAULT_ENC_ALGO): Buffer {
  return publicEncrypt({ key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: oaepHash(algo) }, data);
}

export function oaepDecrypt(key: KeyObject, data: Buffer, algo: EncAlgo = DEFAULT_ENC_ALGO): Buffer {
  try {
    return privateDecrypt({ key, padding: constants.RSA_PKCS1_OAEP_PADDING, oaepHash: oaepHash(algo) }, data);
  } catch (e) {
    throw new BrineError("RSA_DECRYPT", (e as Error).message);
  }
}

export function rsaSign(key: KeyObject, data: Buffer, algo: SigAlgo = DEFAULT_SIG_ALGO): Buffer {
  return sign(sigHash(algo), data, { key, padding: constants.RSA_PKCS1_PADDING });
}

export function rsaVerify(key: KeyObject, data: Buffer, sig: Buffer, algo: SigAlgo = DEFAULT_SIG_ALGO): boolean {
  try {
    return verify(sigHash(algo), data, { key, padding: constants.RSA_PKCS1_PADDING }, sig);
  } catch {
    return false;
  }
}
