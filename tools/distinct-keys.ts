/**
 * Distinct RSA public keys in PEM, as minions make them, made fast: a real 2048-bit key's DER with a fresh random
 * modulus each (making real keys costs ~50 ms each). Not product: what the state-sync bench and tests pull, so that
 * deflate gains on them what it would on real keys (one key written n times would deflate to nothing). Each parses
 * as an RSA public key (OpenSSL does not check the modulus's factors).
 */
import { createPublicKey, generateKeyPairSync, randomBytes } from "node:crypto";

export function distinctMinionKeys(n: number): Buffer[] {
  const der = createPublicKey(generateKeyPairSync("rsa", { modulusLength: 2048, publicKeyEncoding: { type: "spki", format: "pem" }, privateKeyEncoding: { type: "pkcs1", format: "pem" } }).publicKey).export({ type: "spki", format: "der" });
  // the modulus: INTEGER of 257 bytes (0x02 0x82 0x01 0x01), its leading zero, then 256 bytes
  const at = der.indexOf(Buffer.from([0x02, 0x82, 0x01, 0x01, 0x00])) + 5;
  return Array.from({ length: n }, () => {
    const d = Buffer.from(der);
    randomBytes(256).copy(d, at);
    d[at]! |= 0x80;
    return Buffer.from(createPublicKey({ key: d, format: "der", type: "spki" }).export({ type: "spki", format: "pem" }) as string);
  });
}
