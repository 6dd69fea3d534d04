/**
 * The Python methods Salt templates call on values (`name.upper()`, `items.append(x)`,
 * `data.items()`, `conf.get('k', 'd')`…), with Python semantics where JS differs (`replace` replaces
 * every occurrence, `split()` splits on runs of whitespace, `strip(chars)`…).
 * Lookups only ever reach own data properties or these tables, never a JS prototype
 * (`constructor`, `__proto__`), so templates cannot reach Function.
 */
import { pyEqual, isDict } from "../pillar/merge.js";
import { kwargsOf, type Kwargs } from "./args.js";
import { pyFormat } from "./pyformat.js";

type Method = (self: never, ...args: unknown[]) => unknown;

/** A Python exception a method raises ("KeyError: 'x'"): its text is Python's, shown in Salt's render error; not a BrineError. */
class PyError extends Error {}

function idx(len: number, i: unknown): number {
  const n = Number(i);
  return n < 0 ? len + n : n;
}

function stripChars(s: string, chars: unknown, left: boolean, right: boolean): string {
  const set = typeof chars === "string" ? new Set([...chars]) : null;
  const strip = (c: string) => (set ? set.has(c) : /\s/.test(c));
  const a = [...s];
  let i = 0;
  let j = a.length;
  if (left) while (i < j && strip(a[i]!)) i++;
  if (right) while (j > i && strip(a[j - 1]!)) j--;
  return a.slice(i, j).join("");
}

function pySplit(s: string, sep: unknown, maxsplit: unknown): string[] {
  const max = maxsplit === undefined || maxsplit === null ? -1 : Number(maxsplit);
  if (sep === undefined || sep === null) {
    const out: string[] = [];
    let rest = s.replace(/^\s+/, "");
    while (rest.length) {
      if (max >= 0 && out.length === max) {
        out.push(rest);
        return out;
      }
      const m = /\s+/.exec(rest);
      if (!m) {
        out.push(rest);
        break;
      }
      out.push(rest.slice(0, m.index));
      rest = rest.slice(m.index + m[0].length);
    }
    return out;
  }
  const d = String(sep);
  if (d === "") throw new PyError("ValueError: empty separator");
  const parts = s.split(d);
  if (max < 0 || parts.length <= max + 1) return parts;
  return [...parts.slice(0, max), parts.slice(max).join(d)];
}

function pyRsplit(s: string, sep: unknown, maxsplit: unknown): string[] {
  const max = maxsplit === undefined || maxsplit === null ? -1 : Number(maxsplit);
  if (max < 0) return pySplit(s, sep, -1);
  if (sep === undefined || sep === null) {
    const words = pySplit(s, null, -1);
    if (words.length <= max + 1) return words;
    // keep the original spacing of the unsplit head
    const tail = words.slice(words.length - max);
    let head = s.replace(/\s+$/, "");
    for (let k = tail.length - 1; k >= 0; k--) head = head.slice(0, head.lastIndexOf(tail[k]!)).replace(/\s+$/, "");
    return [head, ...tail];
  }
  const d = String(sep);
  const parts = s.split(d);
  if (parts.length <= max + 1) return parts;
  return [parts.slice(0, parts.length - max).join(d), ...parts.slice(parts.length - max)];
}

function startsOrEnds(s: string, arg: unknown, ends: boolean): boolean {
  const list = Array.isArray(arg) ? arg : [arg];
  return list.some((p) => (ends ? s.endsWith(String(p)) : s.startsWith(String(p))));
}

export const STRING_METHODS: Record<string, Method> = {
  upper: (s: string) => s.toUpperCase(),
  lower: (s: string) => s.toLowerCase(),
  title: (s: string) => s.toLowerCase().replace(/(^|[^A-Za-z0-9])([a-z])/g, (_m, a: string, b: string) => a + b.toUpperCase()),
  capitalize: (s: string) => (s ? s[0]!.toUpperCase() + s.slice(1).toLowerCase() : s),
  swapcase: (s: string) => [...s].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join(""),
  strip: (s: string, chars?: unknown) => stripChars(s, chars, true, true),
  lstrip: (s: string, chars?: unknown) => stripChars(s, chars, true, false),
  rstrip: (s: string, chars?: unknown) => stripChars(s, chars, false, true),
  split: (s: string, sep?: unknown, max?: unknown) => {
    const kw = kwargsOf([sep, max]);
    return pySplit(s, kw.kwargs.sep ?? kw.args[0], kw.kwargs.maxsplit ?? kw.args[1]);
  },
  rsplit: (s: string, sep?: unknown, max?: unknown) => {
    const kw = kwargsOf([sep, max]);
    return pyRsplit(s, kw.kwargs.sep ?? kw.args[0], kw.kwargs.maxsplit ?? kw.args[1]);
  },
  splitlines: (s: string) => s.split(/\r\n|\r|\n/).filter((_x, i, a) => i < a.length - 1 || a[i] !== ""),
  startswith: (s: string, p: unknown) => startsOrEnds(s, p, false),
  endswith: (s: string, p: unknown) => startsOrEnds(s, p, true),
  replace: (s: string, old: unknown, neu: unknown, count?: unknown) => {
    const o = String(old);
    const n = String(neu);
    if (count === undefined || Number(count) < 0) return s.split(o).join(n);
    let out = s;
    let from = 0;
    for (let k = 0; k < Number(count); k++) {
      const at = out.indexOf(o, from);
      if (at < 0) break;
      out = out.slice(0, at) + n + out.slice(at + o.length);
      from = at + n.length;
    }
    return out;
  },
  join: (s: string, items: unknown) => (Array.isArray(items) ? items.map(String).join(s) : isDict(items) ? Object.keys(items).join(s) : [...String(items)].join(s)),
  find: (s: string, sub: unknown) => s.indexOf(String(sub)),
  rfind: (s: string, sub: unknown) => s.lastIndexOf(String(sub)),
  index: (s: string, sub: unknown) => {
    const i = s.indexOf(String(sub));
    if (i < 0) throw new PyError("ValueError: substring not found");
    return i;
  },
  count: (s: string, sub: unknown) => (String(sub) === "" ? s.length + 1 : s.split(String(sub)).length - 1),
  format: (s: string, ...args: unknown[]) => pyFormat(s, args),
  isdigit: (s: string) => /^\d+$/.test(s),
  isnumeric: (s: string) => /^\d+$/.test(s),
  isdecimal: (s: string) => /^\d+$/.test(s),
  isalpha: (s: string) => /^\p{L}+$/u.test(s),
  isalnum: (s: string) => /^[\p{L}\d]+$/u.test(s),
  isspace: (s: string) => /^\s+$/.test(s),
  islower: (s: string) => /[a-z]/.test(s) && s === s.toLowerCase(),
  isupper: (s: string) => /[A-Z]/.test(s) && s === s.toUpperCase(),
  zfill: (s: string, w: unknown) => {
    const sign = s.startsWith("-") || s.startsWith("+") ? s[0]! : "";
    return sign + s.slice(sign.length).padStart(Number(w) - sign.length, "0");
  },
  ljust: (s: string, w: unknown, f?: unknown) => s.padEnd(Number(w), f === undefined ? " " : String(f)),
  rjust: (s: string, w: unknown, f?: unknown) => s.padStart(Number(w), f === undefined ? " " : String(f)),
  center: (s: string, w: unknown, f?: unknown) => {
    const fill = f === undefined ? " " : String(f);
    const total = Math.max(0, Number(w) - s.length);
    const left = Math.floor(total / 2) + (total % 2 && Number(w) % 2 ? 1 : 0);
    return fill.repeat(left) + s + fill.repeat(total - left);
  },
  partition: (s: string, sep: unknown) => {
    const d = String(sep);
    const i = s.indexOf(d);
    return i < 0 ? [s, "", ""] : [s.slice(0, i), d, s.slice(i + d.length)];
  },
  rpartition: (s: string, sep: unknown) => {
    const d = String(sep);
    const i = s.lastIndexOf(d);
    return i < 0 ? ["", "", s] : [s.slice(0, i), d, s.slice(i + d.length)];
  },
  encode: (s: string) => s,
  decode: (s: string) => s,
};

export const LIST_METHODS: Record<string, Method> = {
  append: (l: unknown[], x: unknown) => {
    l.push(x);
    return null;
  },
  extend: (l: unknown[], xs: unknown) => {
    if (Array.isArray(xs)) l.push(...xs);
    else if (typeof xs === "string") l.push(...xs);
    else if (isDict(xs)) l.push(...Object.keys(xs));
    return null;
  },
  insert: (l: unknown[], i: unknown, x: unknown) => {
    l.splice(Math.max(0, Math.min(l.length, idx(l.length, i))), 0, x);
    return null;
  },
  pop: (l: unknown[], i?: unknown) => {
    if (l.length === 0) throw new PyError("IndexError: pop from empty list");
    const at = i === undefined ? l.length - 1 : idx(l.length, i);
    if (at < 0 || at >= l.length) throw new PyError("IndexError: pop index out of range");
    return l.splice(at, 1)[0];
  },
  remove: (l: unknown[], x: unknown) => {
    const at = l.findIndex((y) => pyEqual(y, x));
    if (at < 0) throw new PyError("ValueError: list.remove(x): x not in list");
    l.splice(at, 1);
    return null;
  },
  index: (l: unknown[], x: unknown) => {
    const at = l.findIndex((y) => pyEqual(y, x));
    if (at < 0) throw new PyError("ValueError: x is not in list");
    return at;
  },
  count: (l: unknown[], x: unknown) => l.filter((y) => pyEqual(y, x)).length,
  reverse: (l: unknown[]) => {
    l.reverse();
    return null;
  },
  sort: (l: unknown[]) => {
    l.sort((a, b) => (String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0));
    return null;
  },
  copy: (l: unknown[]) => l.slice(),
  clear: (l: unknown[]) => {
    l.length = 0;
    return null;
  },
};

export const DICT_METHODS: Record<string, Method> = {
  items: (d: Record<string, unknown>) => Object.entries(d),
  iteritems: (d: Record<string, unknown>) => Object.entries(d),
  keys: (d: Record<string, unknown>) => Object.keys(d),
  iterkeys: (d: Record<string, unknown>) => Object.keys(d),
  values: (d: Record<string, unknown>) => Object.values(d),
  itervalues: (d: Record<string, unknown>) => Object.values(d),
  get: (d: Record<string, unknown>, k: unknown, dflt: unknown = null) => {
    const key = String(k);
    return Object.prototype.hasOwnProperty.call(d, key) ? d[key] : dflt;
  },
  has_key: (d: Record<string, unknown>, k: unknown) => Object.prototype.hasOwnProperty.call(d, String(k)),
  update: (d: Record<string, unknown>, ...args: unknown[]) => {
    const { args: pos, kwargs } = kwargsOf(args);
    for (const src of pos) {
      if (isDict(src)) Object.assign(d, src);
      else if (Array.isArray(src)) for (const p of src) if (Array.isArray(p) && p.length === 2) d[String(p[0])] = p[1];
    }
    Object.assign(d, kwargs);
    return null;
  },
  setdefault: (d: Record<string, unknown>, k: unknown, dflt: unknown = null) => {
    const key = String(k);
    if (!Object.prototype.hasOwnProperty.call(d, key)) d[key] = dflt;
    return d[key];
  },
  pop: (d: Record<string, unknown>, k: unknown, ...rest: unknown[]) => {
    const key = String(k);
    if (Object.prototype.hasOwnProperty.call(d, key)) {
      const v = d[key];
      delete d[key];
      return v;
    }
    if (rest.length) return rest[0];
    throw new PyError(`KeyError: '${key}'`);
  },
  popitem: (d: Record<string, unknown>) => {
    const keys = Object.keys(d);
    if (!keys.length) throw new PyError("KeyError: popitem(): dictionary is empty");
    const k = keys[keys.length - 1]!;
    const v = d[k];
    delete d[k];
    return [k, v];
  },
  copy: (d: Record<string, unknown>) => ({ ...d }),
  clear: (d: Record<string, unknown>) => {
    for (const k of Object.keys(d)) delete d[k];
    return null;
  },
};

export type { Kwargs };
