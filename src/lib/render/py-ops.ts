/**
 * Python semantics for values inside the nunjucks runtime (slices, member lookup through the Python
 * method tables only, comparisons, + * % and `in` as Python does them, StrictUndefined errors).
 * jinja.ts installs these into the nunjucks runtime (they use its SafeString and markSafe).
 */
import nunjucksDefault from "nunjucks";
import { FilterError } from "./filters.js";
import { isDict, pyEqual } from "../pillar/merge.js";
import { pyPercent } from "./pyformat.js";
import { DICT_METHODS, LIST_METHODS, STRING_METHODS } from "./pymethods.js";
import { pyStr } from "./pyrepr.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const nj = nunjucksDefault as any;
const runtime = nj.runtime;

/** Jinja's StrictUndefined and `raise` errors: their names select Salt's wording of the render error (jinja.ts), not BrineErrors. */
export class UndefinedError extends Error {
  override name = "UndefinedError";
}
export class TemplateRaise extends Error {
  override name = "TemplateRaise";
}

// ---------------------------------------------------------------------------------------------------
// Python semantics in the nunjucks runtime (installed once per thread; nunjucks is only used here)

export const hasOwn = (o: object, k: PropertyKey) => Object.prototype.hasOwnProperty.call(o, k);

export function pySlice(obj: unknown, start: unknown, stop: unknown, step: unknown): unknown {
  const seq: unknown[] | string = typeof obj === "string" ? obj : Array.isArray(obj) ? obj : [];
  const chars = typeof seq === "string" ? [...seq] : seq;
  const n = chars.length;
  const st = step === null || step === undefined ? 1 : Number(step);
  if (st === 0) throw new FilterError("slice step cannot be zero");
  const norm = (v: unknown, dflt: number, lo: number, hi: number) => {
    if (v === null || v === undefined) return dflt;
    let x = Number(v);
    if (x < 0) x += n;
    return Math.min(Math.max(x, lo), hi);
  };
  const out: unknown[] = [];
  if (st > 0) {
    const a = norm(start, 0, 0, n);
    const b = norm(stop, n, 0, n);
    for (let i = a; i < b; i += st) out.push(chars[i]);
  } else {
    const a = norm(start, n - 1, -1, n - 1);
    const b = norm(stop, -1, -1, n - 1);
    for (let i = a; i > b; i += st) out.push(chars[i]);
  }
  return typeof seq === "string" ? out.join("") : out;
}

export function bindMethod(table: Record<string, (self: never, ...a: unknown[]) => unknown>, name: string, self: unknown) {
  const m = table[name]!;
  return (...args: unknown[]) => m(self as never, ...args);
}

export function memberLookup(obj: unknown, key: unknown, ...slice: unknown[]): unknown {
  if (slice.length === 2) return pySlice(obj, key, slice[0], slice[1]);
  if (obj === undefined) throw new UndefinedError(`is undefined (while looking up attribute '${String(key)}')`);
  if (obj === null) return undefined;
  if (obj instanceof runtime.SafeString) obj = String(obj);
  const k = typeof key === "number" ? key : String(key);
  if (typeof obj === "string") {
    if (typeof k === "number" || /^-?\d+$/.test(k)) {
      const chars = [...obj];
      const i = Number(k) < 0 ? chars.length + Number(k) : Number(k);
      return chars[i];
    }
    return hasOwn(STRING_METHODS, k) ? bindMethod(STRING_METHODS, k, obj) : undefined;
  }
  if (Array.isArray(obj)) {
    if (typeof k === "number" || /^-?\d+$/.test(k)) {
      const i = Number(k) < 0 ? obj.length + Number(k) : Number(k);
      return obj[i];
    }
    return hasOwn(LIST_METHODS, k) ? bindMethod(LIST_METHODS, k, obj) : undefined;
  }
  if (Buffer.isBuffer(obj)) return typeof k === "number" || /^\d+$/.test(k) ? obj[Number(k)] : undefined;
  if (typeof obj === "object" || typeof obj === "function") {
    const o = obj as Record<string, unknown>;
    if (hasOwn(o, k)) {
      const v = o[k as string];
      return typeof v === "function" && !isDict(v) ? (...args: unknown[]) => (v as (...a: unknown[]) => unknown).apply(o, args) : v;
    }
    if (typeof k === "string" && isDict(o) && hasOwn(DICT_METHODS, k)) return bindMethod(DICT_METHODS, k, o);
    return undefined;
  }
  return undefined;
}

export function suppressValue(val: unknown, autoescape: boolean): unknown {
  if (val === undefined) throw new UndefinedError("an undefined value was printed");
  if (val instanceof runtime.SafeString) return val;
  const s = pyStr(val);
  return autoescape ? nj.lib.escape(s) : s;
}

export function ensureDefined(val: unknown, lineno: number, colno: number, name?: string): unknown {
  if (val === undefined) {
    const e = new nj.lib.TemplateError(`Jinja variable ${name ? `'${name}' ` : ""}is undefined`, lineno, colno);
    (e as { brineUndefined?: boolean }).brineUndefined = true;
    throw e;
  }
  return val;
}

/** Jinja iteration of a single loop variable: a dict gives its keys. */
export function pyIter(v: unknown): unknown {
  return isDict(v) ? Object.keys(v) : v;
}

/** Jinja's `==`/`!=` compare values (dicts, lists) as Python does; chains mean `a < b and b < c`. */
export function pyCompare(operands: unknown[], ops: string[]): boolean {
  for (let i = 0; i < ops.length; i++) {
    const a = operands[i] as never;
    const b = operands[i + 1] as never;
    let ok: boolean;
    switch (ops[i]) {
      case "==":
        ok = pyEqual(a, b);
        break;
      case "!=":
        ok = !pyEqual(a, b);
        break;
      case "===":
        ok = a === b;
        break;
      case "!==":
        ok = a !== b;
        break;
      case "<":
        ok = a < b;
        break;
      case ">":
        ok = a > b;
        break;
      case "<=":
        ok = a <= b;
        break;
      default:
        ok = a >= b;
    }
    if (!ok) return false;
  }
  return true;
}

/** Python's `+`: lists concatenate, numbers add, strings join. */
export function pyAdd(a: unknown, b: unknown): unknown {
  if (Array.isArray(a) && Array.isArray(b)) return [...a, ...b];
  return (a as never) + (b as never);
}

/** Python's `*`: a string or list times an integer repeats it. */
export function pyMul(a: unknown, b: unknown): unknown {
  const rep = (x: unknown, n: unknown) => (typeof x === "string" ? x.repeat(Math.max(0, Number(n))) : Array.from({ length: Math.max(0, Number(n)) }, () => x as unknown[]).flat());
  if ((typeof a === "string" || Array.isArray(a)) && typeof b === "number") return rep(a, b);
  if ((typeof b === "string" || Array.isArray(b)) && typeof a === "number") return rep(b, a);
  return (a as number) * (b as number);
}

/** Python's `%`: printf-style formatting when the left side is a string. */
export function pyMod(a: unknown, b: unknown): unknown {
  if (typeof a === "string") return pyPercent(a, Array.isArray(b) ? b : [b]);
  return (a as number) % (b as number);
}

/** `{% set ns.attr = value %}` (Jinja's namespace assignment). */
export function pySetAttr(obj: unknown, key: string, value: unknown): string {
  if (!isDict(obj)) throw new FilterError(`cannot assign attribute '${key}' on a non-namespace value`);
  obj[key] = value;
  return "";
}

/** Python's `in`: substring, list membership by value, own dict keys. */
export function pyIn(key: unknown, container: unknown): boolean {
  if (typeof container === "string") return container.includes(String(key));
  if (Array.isArray(container)) return container.some((x) => pyEqual(x, key));
  if (isDict(container)) return hasOwn(container, String(key));
  throw new FilterError(`argument of type '${container === null || container === undefined ? "NoneType" : typeof container}' is not iterable`);
}

/**
 * Jinja's lexer keeps `}}` inside an open `{` as two closing braces (`{{ f({'a': {'b': 1}}) }}`,
 * `{% set d = {'a': {}} %}`); nunjucks ends the tag there. Count braces per tag.
 */
