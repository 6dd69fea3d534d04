/** Minion id and jid validation (both become file or key names, so they are checked before any use), and Salt's id order. */
import { minionIdBytesMax } from "./limits.js";

/**
 * Salt's valid_id: no '/', '\' or NUL, and `pki_dir/<id>` must be a direct child of pki_dir
 * (which rules out "", "." and ".."). We also bound the length (it is a file name).
 */
export function validId(id: unknown): id is string {
  if (typeof id !== "string" || id.length === 0) return false;
  if (id === "." || id === "..") return false;
  if (id.includes("/") || id.includes("\\") || id.includes("\0")) return false;
  return Buffer.byteLength(id, "utf8") <= minionIdBytesMax;
}

/** A jid from a minion or a client: exactly 20 digits (or 20 digits + "_suffix" for unique_jid). */
const JID_RE = /^\d{20}(?:_[A-Za-z0-9]{1,32})?$/;
export function validJid(jid: unknown): jid is string {
  return typeof jid === "string" && JID_RE.test(jid);
}

/**
 * Salt's id order: `a.lower()` against `b.lower()`, then code units for ids equal but for case. ASCII ids
 * (nearly all) are folded in place without a lowered copy.
 */
export function compareIds(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x > 0x7f || y > 0x7f) return compareLowered(a, b);
    if (x >= 0x41 && x <= 0x5a) x += 0x20;
    if (y >= 0x41 && y <= 0x5a) y += 0x20;
    if (x !== y) return x - y;
  }
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}

function compareLowered(a: string, b: string): number {
  const la = a.toLowerCase();
  const lb = b.toLowerCase();
  if (la !== lb) return la < lb ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/** `ids` sorted in Salt's id order (a new array). */
export function sortIds(ids: Iterable<string>): string[] {
  return [...ids].sort(compareIds);
}
