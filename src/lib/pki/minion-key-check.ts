/**
 * Is this what a minion may present as its public key? Only an RSA public key — SubjectPublicKeyInfo
 * (`BEGIN PUBLIC KEY`, what Salt writes) or PKCS#1 (`BEGIN RSA PUBLIC KEY`) PEM, one block, nothing
 * around it — with the configured exponent and modulus bounds (src/workers/req-handler/minion-policy.ts). Node's
 * createPublicKey alone would take a private key PEM (and derive its public half), an EC key or a
 * certificate, and Salt stores whatever `pub` holds in `minions_pre`.
 */
import type { KeyObject } from "node:crypto";
import { parsePublicKey } from "../../shared/protocol/rsa.js";
import { cleanKey } from "../../shared/protocol/pem.js";
import type { MinionPolicy } from "../../workers/req-handler/minion-policy.js";

const PEM_BLOCK = /^-----BEGIN (RSA PUBLIC KEY|PUBLIC KEY)-----\n([A-Za-z0-9+/=\n]+)\n-----END \1-----$/;

export type KeyCheck = { ok: true; key: KeyObject } | { ok: false; why: string };

/**
 * `parse` turns the cleaned PEM into a key: parsePublicKey by default (not cached: a spray of new keys fills no
 * cache); a caller whose PEM is a key it already holds (a returning minion's accepted key) passes its cached parse.
 */
export function checkMinionPublicKey(pem: string, policy: Pick<MinionPolicy, "keyBitsMin" | "keyBitsMax" | "keyExponent">, parse: (clean: string) => KeyObject = parsePublicKey): KeyCheck {
  const clean = cleanKey(pem);
  const m = PEM_BLOCK.exec(clean);
  if (!m) return { ok: false, why: "not one RSA public key PEM block" };
  let key: KeyObject;
  try {
    key = parse(clean);
  } catch (e) {
    return { ok: false, why: `unparsable (${(e as Error).message})` };
  }
  if (key.asymmetricKeyType !== "rsa") return { ok: false, why: `a ${key.asymmetricKeyType} key, not RSA` };
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  const e = key.asymmetricKeyDetails?.publicExponent;
  if (e !== BigInt(policy.keyExponent)) return { ok: false, why: `public exponent ${String(e)} (only ${policy.keyExponent} is taken)` };
  if (bits < policy.keyBitsMin || bits > policy.keyBitsMax) return { ok: false, why: `${bits}-bit modulus (${policy.keyBitsMin}..${policy.keyBitsMax} taken)` };
  return { ok: true, key };
}
