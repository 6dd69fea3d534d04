/**
 * Python's text forms of values, for targeting and for templates (src/lib/render/): `str()` and `repr()` of a
 * decoded value, and `str.split()`.
 *
 * `pyStr` is Python's `str()` of a decoded msgpack value, which Salt's `subdict_match` applies before
 * comparing a grain or pillar value with a pattern (`True` not `true`, `None` not `null`, `{'a': 1}`).
 *
 * Values here come from msgpack, so the JS types are: string, number, bigint, boolean, null/undefined,
 * Uint8Array (bytes), arrays, plain objects. A JS number does not say whether it was a Python int or
 * float; integral numbers print as ints, which is what grains and pillar nearly always hold.
 */

/** Nesting printed before `...` (levels). Bounds the work on hostile, deeply nested pillar data. */
export const pyReprDepthMax = 32;

export function isDict(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object") return false;
  if (Array.isArray(value) || ArrayBuffer.isView(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** Python's repr of a float (an integral number prints as an int: grains and pillar nearly always hold ints). */
export function pyFloat(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (Number.isInteger(x)) return Number.isSafeInteger(x) ? String(x) : BigInt(x).toString();
  const abs = Math.abs(x);
  // Python's repr switches to exponent form below 1e-4, JS below 1e-6; both use the shortest digits
  if (abs < 1e-4) {
    const [mant, exp] = x.toExponential().split("e") as [string, string];
    const sign = exp.startsWith("-") ? "-" : "+";
    const digits = exp.replace(/^[+-]/, "").padStart(2, "0");
    return `${mant}e${sign}${digits}`;
  }
  return String(x);
}

/** Python's `repr()` of a str: single quotes unless the text has `'` and no `"`. */
export function pyStrRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    const cp = ch.codePointAt(0)!;
    if (ch === quote || ch === "\\") out += `\\${ch}`;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${cp.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return out + quote;
}

function pyBytesRepr(b: Uint8Array): string {
  let hasSingle = false;
  let hasDouble = false;
  for (const byte of b) {
    if (byte === 0x27) hasSingle = true;
    if (byte === 0x22) hasDouble = true;
  }
  const quote = hasSingle && !hasDouble ? '"' : "'";
  let out = "b" + quote;
  for (const byte of b) {
    const ch = String.fromCharCode(byte);
    if (ch === quote || ch === "\\") out += `\\${ch}`;
    else if (byte === 0x0a) out += "\\n";
    else if (byte === 0x0d) out += "\\r";
    else if (byte === 0x09) out += "\\t";
    else if (byte < 0x20 || byte >= 0x7f) out += `\\x${byte.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return out + quote;
}

function repr(value: unknown, depth: number): string {
  if (typeof value === "string") return pyStrRepr(value);
  return convert(value, depth);
}

function convert(value: unknown, depth: number): string {
  if (value === null || value === undefined) return "None";
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number") return pyFloat(value);
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "string") return value;
  if (depth >= pyReprDepthMax) return "...";
  if (value instanceof Uint8Array) return pyBytesRepr(value);
  if (Array.isArray(value)) return `[${value.map((v) => repr(v, depth + 1)).join(", ")}]`;
  if (isDict(value)) {
    const items = Object.entries(value).map(([k, v]) => `${pyStrRepr(k)}: ${repr(v, depth + 1)}`);
    return `{${items.join(", ")}}`;
  }
  if (typeof value === "function") return "<function>";
  return String(value);
}

/** `repr(value)` as Python would print it. */
export function pyRepr(value: unknown): string {
  return repr(value, 0);
}

/** `str(value)` as Python would print it. */
export function pyStr(value: unknown): string {
  return convert(value, 0);
}

/** What Python's `str.split()` treats as whitespace (JS `\s` differs: it has U+FEFF, lacks U+001C–1F, U+0085). */
const PY_WHITESPACE_RUN = /[\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/;

/** Python `text.split()`: words separated by runs of whitespace, no empty words. */
export function pySplit(text: string): string[] {
  return text.split(PY_WHITESPACE_RUN).filter((w) => w !== "");
}
