/** PEM text handling as Salt does it: clean_key comparison and pem_finger fingerprints. */
import { createHash } from "node:crypto";

/** Trim, split into lines, join with "\n", no trailing newline (Salt's clean_key). */
export function cleanKey(pem: string): string {
  return pem
    .trim()
    .split(/\r?\n/)
    .map((l) => l.trim())
    .join("\n");
}

/**
 * Salt's pem_finger: hash of the PEM body lines (without the BEGIN/END lines, blank lines dropped),
 * newlines included, printed as lowercase hex with ':' every two characters.
 */
export function pemFinger(pem: string, hashType = "sha256"): string {
  const lines = pem.split("\n").filter((l) => l.trim() !== "");
  const body = lines.slice(1, -1).map((l) => l + "\n").join("");
  const hex = createHash(hashType).update(body, "utf8").digest("hex");
  return hex.match(/.{2}/g)!.join(":");
}
