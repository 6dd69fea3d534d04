/**
 * The master's RSA key pair in pki_dir: `master.pem` (PKCS#1, mode 0400) and `master.pub` (SPKI, 0644),
 * generated at first start with `keysize` bits and e = 65537, loaded unchanged from an existing Salt
 * pki directory. Regenerating an existing key would lock out every pinned minion, so a missing
 * `master.pub` is re-derived from `master.pem`, never the reverse.
 */
import { generateKeyPair, generateKeyPairSync, createPrivateKey, createPublicKey, type KeyObject } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { cleanKey } from "../../shared/protocol/pem.js";
import { BrineError } from "../../shared/errors.js";

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
  // parsed here, before the master says "ready": a garbage key file used to surface only in the request
  // threads, after "ready", as an uncaught RSA_BAD_KEY
  let derivedPub: string;
  try {
    const key = createPrivateKey(privatePem);
    if (key.asymmetricKeyType !== "rsa") throw new Error(`it holds a ${key.asymmetricKeyType} key`);
    derivedPub = createPublicKey(key).export({ type: "spki", format: "pem" }) as string;
  } catch (e) {
    throw new BrineError(
      "MASTER_KEY_INVALID",
      `${pemPath}: ${(e as Error).message}. Restore it from a backup (minions pin the master's public key), or move ${pemPath} and ${pubPath} aside to have a new pair generated and every minion's cached master key (minion_master.pub) replaced.`,
    );
  }
  if (!existsSync(pubPath)) writeFileSync(pubPath, derivedPub, { mode: 0o644 });
  const publicPem = readFileSync(pubPath, "utf8");
  let pubMatches = false;
  try {
    pubMatches = createPublicKey(publicPem).export({ type: "spki", format: "der" }).equals(createPublicKey(derivedPub).export({ type: "spki", format: "der" }));
  } catch {
    pubMatches = false;
  }
  if (!pubMatches) throw new BrineError("MASTER_KEY_INVALID", `${pubPath} is not the public half of ${pemPath}. Remove ${pubPath}: the master derives it again from ${pemPath} at its next start.`);
  return { privatePem, publicPem, publicClean: cleanKey(publicPem), created };
}
