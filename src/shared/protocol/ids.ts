/** Minion id and jid validation: both become file or key names, so they are checked before any use. */
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
