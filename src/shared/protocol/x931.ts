/**
 * ANSI X9.31 raw RSA "private encrypt" / "public decrypt" (OpenSSL RSA_X931_PADDING), which Salt uses
 * for the minion `tok` and the auth reply's AES-key signature. Node has no X9.31 mode, so the block is
 * built here and the modular exponentiation is done by OpenSSL with RSA_NO_PADDING (CRT, fast).
 *
 * Block for a k-byte modulus and message M, j = k − |M| − 2 ≥ 0:
 *   j = 0: 6A ‖ M ‖ CC        otherwise: 6B ‖ (j−1)×BB ‖ BA ‖ M ‖ CC
 * Sign outputs min(s, n − s); recovery flips m to n − m when m mod 16 ≠ 12.
 */
import { constants, privateEncrypt, publicDecrypt, type KeyObject } from "node:crypto";
import { BrineError } from "../errors.js";

const modulusCache = new WeakMap<KeyObject, { n: bigint; k: number }>();

function modulus(key: KeyObject): { n: bigint; k: number } {
  let m = modulusCache.get(key);
  if (!m) {
    const jwk = key.export({ format: "jwk" }) as { n?: string };
    if (!jwk.n) throw new BrineError("RSA_BAD_KEY", "not an RSA key");
    const bytes = Buffer.from(jwk.n, "base64url");
    m = { n: BigInt("0x" + bytes.toString("hex")), k: bytes.length };
    modulusCache.set(key, m);
  }
  return m;
}

function toBytes(v: bigint, k: number): Buffer {
  return Buffer.from(v.toString(16).padStart(k * 2, "0"), "hex");
}

function toBig(b: Buffer): bigint {
  return b.length === 0 ? 0n : BigInt("0x" + b.toString("hex"));
}

export function x931Sign(priv: KeyObject, msg: Buffer): Buffer {
  const { n, k } = modulus(priv);
  const j = k - msg.length - 2;
  if (j < 0) throw new BrineError("X931_FORMAT", "message too long for the modulus");
  const em = Buffer.alloc(k);
  if (j === 0) {
    em[0] = 0x6a;
  } else {
    em[0] = 0x6b;
    em.fill(0xbb, 1, j);
    em[j] = 0xba;
  }
  msg.copy(em, j + 1);
  em[k - 1] = 0xcc;
  const s = toBig(privateEncrypt({ key: priv, padding: constants.RSA_NO_PADDING }, em));
  const alt = n - s;
  return toBytes(s < alt ? s : alt, k);
}

/** Recover M from an X9.31 signature; throws X931_FORMAT when the block is not valid. */
export function x931Recover(pub: KeyObject, sig: Buffer): Buffer {
  const { n, k } = modulus(pub);
  if (sig.length !== k) throw new BrineError("X931_FORMAT", `signature is ${sig.length} bytes, modulus ${k}`);
  if (toBig(sig) >= n) throw new BrineError("X931_FORMAT", "signature out of range");
  let m = toBig(publicDecrypt({ key: pub, padding: constants.RSA_NO_PADDING }, sig));
  if (m % 16n !== 12n) m = n - m;
  const em = toBytes(m, k);
  if (em[k - 1] !== 0xcc) throw new BrineError("X931_FORMAT", "bad trailer");
  if (em[0] === 0x6a) return em.subarray(1, k - 1);
  if (em[0] !== 0x6b) throw new BrineError("X931_FORMAT", "bad header");
  let i = 1;
  while (i < k - 1 && em[i] === 0xbb) i++;
  if (i === 1 || em[i] !== 0xba) throw new BrineError("X931_FORMAT", "bad padding");
  return em.subarray(i + 1, k - 1);
}

/** True when sig recovers to exactly `expected` (used for the minion `tok`, which must be b"salt"). */
export function x931Verify(pub: KeyObject, sig: Buffer, expected: Buffer): boolean {
  try {
    return x931Recover(pub, sig).equals(expected);
  } catch {
    return false;
  }
}
