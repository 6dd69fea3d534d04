/**
 * The master's RSA key pair in pki_dir: `master.pem` (PKCS#1, mode 0400) and `master.pub` (SPKI, 0644),
 * generated at first start with `keysize` bits and e = 65537, loaded unchanged from an existing Salt
 * pki directory. Regenerating an existing key would lock out every pinned minion, so a missing
 * `master.pub` is re-derived from `master.pem`, never the reverse.
 */
import { generateKeyPair, generateKeyPairSync, createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { cleanKey } from "../protocol/pem.js";

export interface MasterKeyPair {
  /** PKCS#1 PEM text of the private key */
  privatePem: string;
  /** SPKI PEM text as stored */
  publicPem: string;
  /** clean_key(publicPem): what minions pin and compare */
  publicClean: string;
}

function exportPems(privateKey: KeyObject, publicKey: KeyObject): { privatePem: string; publicPem: string } {
  return {
    privatePem: privateKey.export({ type: "pkcs1", format: "pem" }) as string,
    publicPem: publicKey.export({ type: "spki", format: "pem" }) as string,
  };
}

export function generateRsaPem(bits: number): { privatePem: string; publicPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: bits, publicExponent: 65537 });
  return exportPems(privateKey, publicKey);
}

/** generateRsaPem off the calling thread (libuv's pool): a 4096-bit key takes seconds, a request worker must not stall. */
export function generateRsaPemAsync(bits: number): Promise<{ privatePem: string; publicPem: string }> {
  return new Promise((resolve, reject) => {
    generateKeyPair("rsa", { modulusLength: bits, publicExponent: 65537 }, (err, publicKey, privateKey) => {
      if (err) reject(err);
      else resolve(exportPems(privateKey, publicKey));
    });
  });
}

export function loadOrCreateKeyPair(dir: string, name: string, bits: number): MasterKeyPair & { created: boolean } {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const pemPath = path.join(dir, `${name}.pem`);
  const pubPath = path.join(dir, `${name}.pub`);
  let created = false;
  if (!existsSync(pemPath)) {
    const { privatePem, publicPem } = generateRsaPem(bits);
    writeFileSync(pemPath, privatePem, { mode: 0o400 });
    chmodSync(pemPath, 0o400);
    writeFileSync(pubPath, publicPem, { mode: 0o644 });
    created = true;
  }
  const privatePem = readFileSync(pemPath, "utf8");
  if (!existsSync(pubPath)) {
    const pub = createPublicKey(createPrivateKey(privatePem)).export({ type: "spki", format: "pem" }) as string;
    writeFileSync(pubPath, pub, { mode: 0o644 });
  }
  const publicPem = readFileSync(pubPath, "utf8");
  return { privatePem, publicPem, publicClean: cleanKey(publicPem), created };
}
