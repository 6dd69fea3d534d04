/**
 * Python's text forms of decoded values, as Salt's outputters print them: repr() (the raw outputter,
 * txt's non-string values, state comments that are not strings), str(), pprint.pformat() and
 * str.splitlines(). Values are what the wire decoder yields: null, booleans, numbers, bigints, strings,
 * Buffers (Python bytes), arrays and plain objects (Python dicts, in their insertion order).
 *
 * Known difference: msgpack floats with an integral value (1.0) are JS numbers like any integer, so they
 * print as `1` where Python prints `1.0`.
 */

/** Python's str.isprintable() per character: not Cc, Cf, Cs, Co, Cn, Zl, Zp, or Zs other than space. */
const NON_PRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]|(?! )\p{Zs}/u;

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, "0");
}

/** repr() of a str: Python picks ' unless the text has ' and no ". */
export function reprStr(s: string): string {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = q;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === "\\") out += "\\\\";
    else if (ch === q) out += "\\" + q;
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch === "\t") out += "\\t";
    else if (NON_PRINTABLE.test(ch)) out += c < 0x100 ? "\\x" + hex(c, 2) : c < 0x10000 ? "\\u" + hex(c, 4) : "\\U" + hex(c, 8);
    else out += ch;
  }
  return out + q;
}

/** repr() of bytes. */
export function reprBytes(b: Uint8Array): string {
  const hasSq = b.includes(0x27);
  const q = hasSq && !b.includes(0x22) ? '"' : "'";
  let out = "b" + q;
  for (const c of b) {
    if (c === 0x5c) out += "\\\\";
    else if (String.fromCharCode(c) === q) out += "\\" + q;
    else if (c === 0x0a) out += "\\n";
    else if (c === 0x0d) out += "\\r";
    else if (c === 0x09) out += "\\t";
    else if (c < 0x20 || c >= 0x7f) out += "\\x" + hex(c, 2);
    else out += String.fromCharCode(c);
  }
  return out + q;
}

/**
 * Whether a decoded number was an integer on the wire: the decoder gives integers beyond 2^53 as bigints, so
 * an integral number past that can only have been a float.
 */
export function isIntNumber(v: number): boolean {
  return Number.isInteger(v) && Math.abs(v) <= Number.MAX_SAFE_INTEGER;
}

/** repr() of a float, from JS's shortest round-trip digits laid out by Python's rules. */
export function reprFloat(v: number): string {
  if (Number.isNaN(v)) return "nan";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  if (Number.isInteger(v) && Math.abs(v) < 1e16) return `${v}.0`;
  const [mant, expText] = Math.abs(v).toExponential().split("e") as [string, string];
  const exp = Number(expText);
  const digits = mant.replace(".", "");
  const sign = v < 0 ? "-" : "";
  // Python's repr switches to exponent form below 1e-4 and from 1e16
  if (exp < -4 || exp >= 16) return expForm();
  if (exp < 0) return sign + "0." + "0".repeat(-exp - 1) + digits;
  if (digits.length <= exp + 1) return sign + digits + "0".repeat(exp + 1 - digits.length) + ".0";
  return sign + digits.slice(0, exp + 1) + "." + digits.slice(exp + 1);
  function expForm(): string {
    const m = digits.length > 1 ? digits[0] + "." + digits.slice(1) : digits;
    return sign + m + "e" + (exp < 0 ? "-" : "+") + String(Math.abs(exp)).padStart(2, "0");
  }
}

function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** Python repr() of a value. */
export function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return "None";
  if (v === true) return "True";
  if (v === false) return "False";
  if (typeof v === "bigint") return v.toString();
  if (typeof v === "number") return isIntNumber(v) ? String(v) : reprFloat(v);
  if (typeof v === "string") return reprStr(v);
  if (v instanceof Uint8Array) return reprBytes(v);
  if (Array.isArray(v)) return "[" + v.map(pyRepr).join(", ") + "]";
  if (isMap(v)) return "{" + Object.entries(v).map(([k, x]) => `${reprStr(k)}: ${pyRepr(x)}`).join(", ") + "}";
  return reprStr(String(v));
}

/** Python str() of a value: text as itself, everything else as its repr(). */
export function pyStr(v: unknown): string {
  return typeof v === "string" ? v : pyRepr(v);
}

/** Python's str.splitlines(): every line boundary Python knows, no trailing empty line. */
export function splitLines(s: string): string[] {
  const lines = s.split(/\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]/);
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/**
 * pprint.pformat(v) as Python 3.11 lays it out (width 80, dicts sorted by key): a value whose repr fits is
 * printed whole; otherwise a list or dict gets one element per line under its opening bracket, and a long
 * string is cut at whitespace into adjacent literals (in parentheses at the top level).
 */
export function pformat(v: unknown, width = 80): string {
  const sortedEntries = (m: Record<string, unknown>): [string, unknown][] => Object.entries(m).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const flat = (x: unknown): string => {
    if (Array.isArray(x)) return "[" + x.map(flat).join(", ") + "]";
    if (isMap(x)) return "{" + sortedEntries(x).map(([k, y]) => `${reprStr(k)}: ${flat(y)}`).join(", ") + "}";
    return pyRepr(x);
  };
  let out = "";
  const fmt = (x: unknown, indent: number, allowance: number, level: number): void => {
    const rep = flat(x);
    if (rep.length <= width - indent - allowance) {
      out += rep;
      return;
    }
    level += 1;
    if (isMap(x) && Object.keys(x).length) {
      out += "{";
      const items = sortedEntries(x);
      const ind = indent + 1;
      items.forEach(([k, y], i) => {
        const last = i === items.length - 1;
        const kr = reprStr(k);
        out += kr + ": ";
        fmt(y, ind + kr.length + 2, last ? allowance + 1 : 1, level);
        if (!last) out += ",\n" + " ".repeat(ind);
      });
      out += "}";
    } else if (Array.isArray(x) && x.length) {
      out += "[";
      const ind = indent + 1;
      x.forEach((y, i) => {
        const last = i === x.length - 1;
        if (i) out += ",\n" + " ".repeat(ind);
        fmt(y, ind, last ? allowance + 1 : 1, level);
      });
      out += "]";
    } else if (typeof x === "string" && x.length) {
      out += pformatStr(x, indent, allowance, level, width);
    } else out += rep;
  };
  fmt(v, 0, 0, 0);
  return out;
}

/** pprint's _pprint_str: a long string cut at whitespace into literals that fit. */
function pformatStr(s: string, indent0: number, allowance0: number, level: number, width: number): string {
  let indent = indent0;
  let allowance = allowance0;
  if (level === 1) {
    indent += 1;
    allowance += 1;
  }
  const lines = s.match(/[^\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]*(?:\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]|$)/g)!.filter((l) => l !== "");
  const chunks: string[] = [];
  let maxWidth1 = width - indent;
  const maxWidth = width - indent;
  let rep = "";
  lines.forEach((line, i) => {
    rep = reprStr(line);
    if (i === lines.length - 1) maxWidth1 -= allowance;
    if (rep.length <= maxWidth1) chunks.push(rep);
    else {
      const parts = line.match(/\S*\s*/g)!.filter((p, j, all) => !(p === "" && j === all.length - 1));
      let maxWidth2 = maxWidth;
      let current = "";
      parts.forEach((part, j) => {
        const candidate = current + part;
        if (j === parts.length - 1 && i === lines.length - 1) maxWidth2 -= allowance;
        if (reprStr(candidate).length > maxWidth2) {
          if (current) chunks.push(reprStr(current));
          current = part;
        } else current = candidate;
      });
      if (current) chunks.push(reprStr(current));
    }
  });
  if (chunks.length === 1) return rep;
  const body = chunks.join("\n" + " ".repeat(indent));
  return level === 1 ? "(" + body + ")" : body;
}
