/**
 * Python string formatting for templates: `'{} {name}'.format(...)` and the `format` filter
 * (`'%s-%d'|format(a, b)`, Jinja's printf style). Supported: positional/named fields, `!r`/`!s`, and the
 * common specs (fill/align/width, `d`, `s`, `f` with precision, `x`, `o`, `b`); `%s %r %d %i %f %x %o %%`
 * with width/precision/flags `-0`. Anything else is formatted with `str()`.
 */
import { kwargsOf } from "./args.js";
import { pyRepr, pyStr } from "./pyrepr.js";

/** The numeric conversions shared by `{:spec}` and `%` formatting; null for a non-numeric type. */
function numberAs(n: number, type: string, precS: string | undefined): string | null {
  const prec = precS === undefined ? 6 : Number(precS);
  switch (type) {
    case "d":
    case "i":
    case "n":
      return String(Math.trunc(n));
    case "f":
    case "F":
      return n.toFixed(prec);
    case "e":
    case "E": {
      const s = n.toExponential(prec).replace(/e([+-])(\d)$/, "e$10$2");
      return type === "E" ? s.toUpperCase() : s;
    }
    case "%":
      return `${(n * 100).toFixed(prec)}%`;
    case "x":
      return Math.trunc(n).toString(16);
    case "X":
      return Math.trunc(n).toString(16).toUpperCase();
    case "o":
      return Math.trunc(n).toString(8);
    case "b":
      return Math.trunc(n).toString(2);
    default:
      return null;
  }
}

function applySpec(v: unknown, spec: string): string {
  const m = /^(?:(.)?([<>^=]))?([+\- ])?(#)?(0)?(\d+)?(,)?(?:\.(\d+))?([bcdeEfFgGnosxX%])?$/.exec(spec);
  if (!m) return pyStr(v);
  const [, fillCh, align, sign, , zero, widthS, comma, precS, type] = m;
  const n = typeof v === "number" || typeof v === "bigint" ? Number(v) : Number.NaN;
  let s = type === undefined || type === "s" ? null : numberAs(n, type, precS);
  if (s === null) {
    s = pyStr(v);
    if (precS !== undefined) s = s.slice(0, Number(precS));
  }
  if (comma && type !== undefined && "dfF".includes(type)) {
    const [i, f] = s.split(".");
    s = i!.replace(/\B(?=(\d{3})+(?!\d))/g, ",") + (f !== undefined ? `.${f}` : "");
  }
  if (sign === "+" && !Number.isNaN(n) && n >= 0) s = `+${s}`;
  else if (sign === " " && !Number.isNaN(n) && n >= 0) s = ` ${s}`;
  const width = widthS === undefined ? 0 : Number(widthS);
  if (s.length >= width) return s;
  const numeric = typeof v === "number" || typeof v === "bigint";
  const fill = fillCh ?? (zero ? "0" : " ");
  const al = align ?? (zero ? "=" : numeric ? ">" : "<");
  const pad = width - s.length;
  if (al === "<") return s + fill.repeat(pad);
  if (al === ">") return fill.repeat(pad) + s;
  if (al === "^") return fill.repeat(Math.floor(pad / 2)) + s + fill.repeat(pad - Math.floor(pad / 2));
  const sgn = /^[+\- ]/.test(s) ? s[0]! : "";
  return sgn + fill.repeat(pad) + s.slice(sgn.length);
}

function lookupField(field: string, pos: unknown[], named: Record<string, unknown>, auto: { i: number }): unknown {
  const m = /^([^.[]*)(.*)$/.exec(field)!;
  const head = m[1]!;
  let v: unknown = head === "" ? pos[auto.i++] : /^\d+$/.test(head) ? pos[Number(head)] : named[head];
  const rest = m[2]!;
  const re = /\.([^.[]+)|\[([^\]]+)\]/g;
  let r;
  while ((r = re.exec(rest))) {
    const key = r[1] ?? r[2]!;
    if (v === null || v === undefined) break;
    v = Array.isArray(v) && /^\d+$/.test(key) ? v[Number(key)] : (v as Record<string, unknown>)[key];
  }
  return v;
}

/** `str.format(*args, **kwargs)`. */
export function pyFormat(template: string, rawArgs: unknown[]): string {
  const { args, kwargs } = kwargsOf(rawArgs);
  const auto = { i: 0 };
  return template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (all, inner: string | undefined) => {
    if (all === "{{") return "{";
    if (all === "}}") return "}";
    const body = inner ?? "";
    const m = /^([^!:]*)(?:!([rsa]))?(?::(.*))?$/.exec(body);
    if (!m) return all;
    let v = lookupField(m[1]!, args, kwargs, auto);
    if (m[2] === "r") v = pyRepr(v);
    else if (m[2] === "s") v = pyStr(v);
    return applySpec(v, m[3] ?? "");
  });
}

/** Python `template % args` (printf style), as Jinja's `format` filter applies it. */
export function pyPercent(template: string, rawArgs: unknown[]): string {
  const { args, kwargs } = kwargsOf(rawArgs);
  let i = 0;
  return template.replace(/%(?:\(([^)]+)\))?([-0 +#]*)(\d+|\*)?(?:\.(\d+))?([sridfFeExXoc%])/g, (_all, name: string | undefined, flags: string, widthS: string | undefined, precS: string | undefined, conv: string) => {
    if (conv === "%") return "%";
    let width = widthS === "*" ? Number(args[i++]) : widthS === undefined ? 0 : Number(widthS);
    const src = name !== undefined ? (Object.keys(kwargs).length ? kwargs : (args[0] as Record<string, unknown>)) : undefined;
    const v = name !== undefined ? (src ?? {})[name] : args[i++];
    const n = Number(v);
    let s: string;
    if (conv === "s") s = precS === undefined ? pyStr(v) : pyStr(v).slice(0, Number(precS));
    else if (conv === "r") s = pyRepr(v);
    else if (conv === "c") s = String.fromCodePoint(n);
    else s = numberAs(n, conv, precS) ?? pyStr(v);
    if (flags.includes("+") && conv !== "s" && n >= 0) s = `+${s}`;
    if (width < 0) width = 0;
    if (s.length < width) {
      if (flags.includes("-")) s = s.padEnd(width);
      else if (flags.includes("0") && conv !== "s") s = (s.startsWith("-") ? "-" : "") + s.replace(/^-/, "").padStart(width - (s.startsWith("-") ? 1 : 0), "0");
      else s = s.padStart(width);
    }
    return s;
  });
}
