/**
 * RSA operations Salt uses, on cached KeyObjects (parsing a PEM costs more than the decrypt itself:
 * reference-points A3, 713/s vs 2,475/s). A public key's PEM is parsed by walking its DER to a JWK (~10 µs,
 * against ~150 µs through OpenSSL 3's decoders), so a thread's cache of parsed public keys is small and bounded.
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

/** Bounded cache of parsed keys, keyed by the PEM text; the least recently used goes first when full. */
class KeyCache {
  private readonly map = new Map<string, KeyObject>();
  constructor(private readonly entriesMax: number) {}
  get(pem: string, parse: (pem: string) => KeyObject): KeyObject {
    let k = this.map.get(pem);
    if (k !== undefined) {
      this.map.delete(pem);
      this.map.set(pem, k);
      return k;
    }
    k = parse(pem);
    if (this.map.size >= this.entriesMax) this.map.delete(this.map.keys().next().value!);
    this.map.set(pem, k);
    return k;
  }
  /** The parsed key of `pem` if held, without parsing it or changing the order of use. */
  peek(pem: string): KeyObject | undefined {
    return this.map.get(pem);
  }
  get size(): number {
    return this.map.size;
  }
}

/**
 * Parsed public keys one thread keeps (count). Not one per minion: a miss is rebuilt from the PEM text the
 * caller holds in ~10 µs (parsePublicKey), so a thread keeps the keys it used last, never a KeyObject (~0.9 KB
 * of native memory each) for every minion it ever served (issue 17: five request threads each kept one per
 * minion, up to 200,000). Small because a miss is cheap where a minion's key is needed: a sign-in (the token's
 * encryption, beside two private-key operations), a `_pillar` reply sent private (beside a signature), a tok not
 * yet verified.
 */
export const publicKeyCacheEntriesMax = 256;
const publicKeys = new KeyCache(publicKeyCacheEntriesMax);
const privateKeys = new KeyCache(64);

/** Public keys this thread holds parsed now (tests). */
export function cachedPublicKeys(): number {
  return publicKeys.size;
}

const PUBLIC_PEM = /^-----BEGIN (RSA PUBLIC KEY|PUBLIC KEY)-----\r?\n([A-Za-z0-9+/=\r\n]+?)\r?\n-----END \1-----\s*$/;
/** AlgorithmIdentifier of rsaEncryption with its NULL parameters, as every RSA SubjectPublicKeyInfo carries it */
const RSA_ALGORITHM = Buffer.from("300d06092a864886f70d0101010500", "hex");

/** One DER element's content at `at` with tag `tag`: [content start, end], or undefined unless minimally encoded. */
function derElement(b: Buffer, at: number, tag: number, end: number): [number, number] | undefined {
  if (at + 2 > end || b[at] !== tag) return undefined;
  let len = b[at + 1]!;
  let pos = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 3 || pos + n > end || b[pos] === 0) return undefined;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + b[pos + i]!;
    pos += n;
    if (len < 0x80) return undefined; // the short form was due
  }
  return pos + len <= end ? [pos, pos + len] : undefined;
}

/** A positive, minimally encoded DER INTEGER's magnitude bytes as base64url, or undefined. */
function derPositive(b: Buffer, [start, end]: [number, number]): string | undefined {
  if (end <= start || b[start]! & 0x80) return undefined;
  let s = start;
  if (b[s] === 0) {
    if (end - s < 2 || !(b[s + 1]! & 0x80)) return undefined;
    s++;
  }
  return b.toString("base64url", s, end);
}

/**
 * The JWK of an RSA public key PEM in canonical DER (SubjectPublicKeyInfo or PKCS#1), or undefined for anything
 * else: what createPublicKey would decode from the same bytes, found by walking the DER instead of OpenSSL 3's
 * decoder search (~150 µs per PEM on this box; a JWK key is built in ~8 µs).
 */
export function rsaPublicJwk(pem: string): { kty: "RSA"; n: string; e: string } | undefined {
  const m = PUBLIC_PEM.exec(pem);
  if (!m) return undefined;
  const b64 = m[2]!.replace(/\r?\n/g, "");
  const der = Buffer.from(b64, "base64");
  if (der.toString("base64") !== b64) return undefined; // only canonical base64 (no stray padding or bits)
  let rsa: [number, number] | undefined = [0, der.length];
  if (m[1] === "PUBLIC KEY") {
    const spki = derElement(der, 0, 0x30, der.length);
    if (!spki || spki[1] !== der.length) return undefined;
    const algoEnd = spki[0] + RSA_ALGORITHM.length;
    if (algoEnd > spki[1] || !RSA_ALGORITHM.equals(der.subarray(spki[0], algoEnd))) return undefined;
    const bits = derElement(der, algoEnd, 0x03, spki[1]);
    if (!bits || bits[1] !== spki[1] || der[bits[0]] !== 0) return undefined; // no unused bits
    rsa = [bits[0] + 1, bits[1]];
  }
  const seq = derElement(der, rsa[0], 0x30, rsa[1]);
  if (!seq || seq[1] !== rsa[1]) return undefined;
  const nEl = derElement(der, seq[0], 0x02, seq[1]);
  const eEl = nEl && derElement(der, nEl[1], 0x02, seq[1]);
  if (!nEl || !eEl || eEl[1] !== seq[1]) return undefined;
  const n = derPositive(der, nEl);
  const e = derPositive(der, eEl);
  return n !== undefined && e !== undefined ? { kty: "RSA", n, e } : undefined;
}

/**
 * A public key from its PEM, not cached: from its JWK when the PEM is an RSA key in canonical DER, else by
 * OpenSSL's own decoding (which then accepts or refuses it exactly as before).
 */
export function parsePublicKey(pem: string): KeyObject {
  try {
    const jwk = rsaPublicJwk(pem);
    return jwk ? createPublicKey({ key: jwk, format: "jwk" }) : createPublicKey(pem);
  } catch (e) {
    throw new BrineError("RSA_BAD_KEY", (e as Error).message);
  }
}

/** A public key from its PEM, through this thread's bounded cache of the keys it used last. */
export function publicKey(pem: string): KeyObject {
  return publicKeys.get(pem, parsePublicKey);
}

/** The parsed public key of `pem` when this thread holds it, else undefined (nothing is parsed). */
export function cachedPublicKey(pem: string): KeyObject | undefined {
  return publicKeys.peek(pem);
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
