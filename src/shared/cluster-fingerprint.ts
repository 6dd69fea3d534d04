/**
 * `cluster_pub_fingerprint`: how an operator pins the cluster key a joining master may trust. The text is what
 * `salt-key -F` prints on a master holding the cluster key (its `cluster.pub:` line: Salt's pem_finger with
 * `hash_type`, hex pairs joined by colons), or the same hex without colons, in any case.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { BrineError } from "./errors.js";
import { pemFinger } from "./protocol/pem.js";

/**
 * `cluster_pub_fingerprint` as an operator gives it: `salt-key -F`'s text (hex pairs joined by colons) or the
 * same hex without colons, any case. Throws CLUSTER_CONFIG for anything else.
 */
export function normalizeFingerprint(text: string): string {
  const hex = text.trim().toLowerCase().replace(/:/g, "");
  if (!/^[0-9a-f]+$/.test(hex) || hex.length < 32 || hex.length % 2 !== 0) {
    throw new BrineError("CLUSTER_CONFIG", `cluster_pub_fingerprint ${JSON.stringify(text)} is not a fingerprint: give the cluster.pub line of \`salt-key -F\` on a master of the cluster (hex pairs joined by colons), or the same hex without colons`);
  }
  return hex;
}

/**
 * Whether `pem` is the key `pinned` names: Salt's pem_finger of it with `hashType` (what `salt-key -F` prints);
 * a SHA-256 of the whole PEM text (Salt 3008's own cluster_pub_matches_fingerprint) matches too. Constant time.
 */
export function fingerprintMatches(pem: string, pinned: string, hashType: string): boolean {
  const want = Buffer.from(normalizeFingerprint(pinned), "hex");
  const candidates = [pemFinger(pem, hashType).replace(/:/g, ""), createHash("sha256").update(pem, "utf8").digest("hex")];
  let ok = false;
  for (const c of candidates) {
    const got = Buffer.from(c, "hex");
    if (got.length === want.length && timingSafeEqual(got, want)) ok = true;
  }
  return ok;
}
