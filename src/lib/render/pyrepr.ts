/**
 * Python's text forms of template values, so `{{ value }}` prints what Jinja prints under Salt:
 * `str()` for output (None, True/False, `[1, 'a']`, `{'k': 'v'}`) and `repr()` inside containers (one
 * implementation with targeting: src/lib/targeting/pystr.ts), and `json.dumps` with Python's separators for
 * the `json` filter.
 */
import { pyFloat } from "../targeting/pystr.js";

export { pyRepr, pyStr, pyStrRepr } from "../targeting/pystr.js";

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !Buffer.isBuffer(v) && !(v instanceof Uint8Array);
}

function jsonStr(s: string, ensureAscii: boolean): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"') out += '\\"';
    else if (ch === "\\") out += "\\\\";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (ch === "\b") out += "\\b";
    else if (ch === "\f") out += "\\f";
    else if (c < 0x20) out += `\\u${c.toString(16).padStart(4, "0")}`;
    else if (ensureAscii && c > 0x7e) {
      for (let i = 0; i < ch.length; i++) out += `\\u${ch.charCodeAt(i).toString(16).padStart(4, "0")}`;
    } else out += ch;
  }
  return out + '"';
}

export interface PyJsonOptions {
  sortKeys?: boolean;
  indent?: number | null;
  ensureAscii?: boolean;
}

/** Python `json.dumps` (separators `, ` and `: `, or `,` + newline with indent). */
export function pyJson(v: unknown, o: PyJsonOptions = {}, level = 0): string {
  const indent = o.indent ?? null;
  const ensureAscii = o.ensureAscii ?? true;
  if (v === null || v === undefined) return "null";
  if (v === true) return "true";
  if (v === false) return "false";
  if (typeof v === "number") return Number.isFinite(v) ? (Number.isInteger(v) ? String(v) : pyFloat(v)) : Number.isNaN(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
  if (typeof v === "bigint") return String(v);
  if (typeof v === "string") return jsonStr(v, ensureAscii);
  if (Buffer.isBuffer(v) || v instanceof Uint8Array) return jsonStr(Buffer.from(v).toString("utf8"), ensureAscii);
  const nl = indent === null ? "" : `\n${" ".repeat(indent * (level + 1))}`;
  const end = indent === null ? "" : `\n${" ".repeat(indent * level)}`;
  const sep = indent === null ? ", " : ",";
  if (Array.isArray(v)) {
    if (v.length === 0) return "[]";
    return `[${nl}${v.map((x) => pyJson(x, o, level + 1)).join(sep + nl)}${end}]`;
  }
  if (isPlainObject(v)) {
    let keys = Object.keys(v);
    if (keys.length === 0) return "{}";
    if (o.sortKeys) keys = keys.sort();
    return `{${nl}${keys.map((k) => `${jsonStr(k, ensureAscii)}: ${pyJson(v[k], o, level + 1)}`).join(sep + nl)}${end}}`;
  }
  return jsonStr(String(v), ensureAscii);
}
