/**
 * Jinja filters and tests that nunjucks lacks or defines differently, and the Salt filters operators
 * use (salt/utils/jinja.py, salt/utils/data.py, salt/utils/hashutils.py…). Registered by jinja.ts.
 */
import { createHash, createHmac, randomUUID } from "node:crypto";
import { getLogger } from "../../shared/log.js";
import { deepCopy, isDict, pyEqual, traverse } from "../pillar/merge.js";
import { bindArgs, kwargsOf } from "./args.js";
import { pyFormat, pyPercent } from "./pyformat.js";
import { pyJson, pyRepr, pyStr, pyStrRepr } from "./pyrepr.js";
import { dumpYaml, loadYaml } from "./yaml.js";
import { compilePcre } from "../targeting/pcre.js";

const log = getLogger("brine.render");

export type Fn = (...args: any[]) => unknown; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Raised by filters/tests for bad input; becomes a render error with the template line (Salt's SaltRenderError text, not a BrineError). */
export class FilterError extends Error {}

function truthy(v: unknown): boolean {
  if (Array.isArray(v)) return v.length > 0;
  if (isDict(v)) return Object.keys(v).length > 0;
  return Boolean(v) && v !== 0n;
}

/** Items of an iterable as Jinja sees them: a dict gives its keys, a string its characters. */
export function iterItems(v: unknown): unknown[] {
  if (Array.isArray(v)) return v;
  if (typeof v === "string") return [...v];
  if (isDict(v)) return Object.keys(v);
  if (v === null || v === undefined) return [];
  if (typeof v === "object" && Symbol.iterator in (v as object)) return [...(v as Iterable<unknown>)];
  throw new FilterError(`'${pyTypeName(v)}' object is not iterable`);
}

export function pyTypeName(v: unknown): string {
  if (v === null || v === undefined) return "NoneType";
  if (typeof v === "boolean") return "bool";
  if (typeof v === "number") return Number.isInteger(v) ? "int" : "float";
  if (typeof v === "bigint") return "int";
  if (typeof v === "string") return "str";
  if (Array.isArray(v)) return "list";
  if (isDict(v)) return "dict";
  return typeof v;
}

/** Jinja's attribute getter: `a.b.0` paths, dict keys or list indexes. */
function attrGetter(attribute: unknown): (x: unknown) => unknown {
  const parts = String(attribute).split(".");
  return (x) => {
    let v = x;
    for (const p of parts) {
      if (Array.isArray(v) && /^\d+$/.test(p)) v = v[Number(p)];
      else if (isDict(v) && Object.prototype.hasOwnProperty.call(v, p)) v = v[p];
      else return undefined;
    }
    return v;
  };
}

function sortKey(v: unknown, caseSensitive: boolean): unknown {
  return typeof v === "string" && !caseSensitive ? v.toLowerCase() : v;
}

function cmp(a: unknown, b: unknown): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** Builds the Jinja/Salt filters; `tests` is the registry used by select/reject/selectattr. */
export function makeFilters(tests: Record<string, Fn>): Record<string, Fn> {
  const runTest = (name: unknown, value: unknown, args: unknown[]): boolean => {
    if (name === undefined) return truthy(value);
    const t = tests[String(name)];
    if (!t) throw new FilterError(`No test named '${String(name)}'`);
    return Boolean(t(value, ...args));
  };
  const selectLike = (keep: boolean) => (seq: unknown, name?: unknown, ...args: unknown[]) =>
    iterItems(seq).filter((x) => runTest(name, x, args) === keep);
  const attrLike = (keep: boolean) => (seq: unknown, attribute: unknown, name?: unknown, ...args: unknown[]) => {
    const get = attrGetter(attribute);
    return iterItems(seq).filter((x) => runTest(name, get(x), args) === keep);
  };
  const filters: Record<string, Fn> = {
    // --- Jinja built-ins nunjucks lacks or gets wrong ---
    select: selectLike(true),
    reject: selectLike(false),
    selectattr: attrLike(true),
    rejectattr: attrLike(false),
    map: (seq: unknown, ...rest: unknown[]) => {
      const { args, kwargs } = kwargsOf(rest);
      const items = iterItems(seq);
      if (kwargs.attribute !== undefined) {
        const get = attrGetter(kwargs.attribute);
        return items.map((x) => {
          const v = get(x);
          return v === undefined && "default" in kwargs ? kwargs.default : v;
        });
      }
      const name = args[0];
      const f = filters[String(name)];
      if (!f) throw new FilterError(`No filter named '${String(name)}'`);
      return items.map((x) => f(x, ...args.slice(1), ...(Object.keys(kwargs).length ? [{ ...kwargs, __keywords: true }] : [])));
    },
    items: (v: unknown) => (isDict(v) ? Object.entries(v) : v === undefined || v === null ? [] : Object.entries(v as object)),
    list: (v: unknown) => iterItems(v).slice(),
    string: (v: unknown) => pyStr(v),
    join: (v: unknown, ...rest: unknown[]) => {
      const { bound } = bindArgs(rest, ["d", "attribute"], { d: "", attribute: undefined });
      let items = iterItems(v);
      if (bound.attribute !== undefined && bound.attribute !== null) items = items.map(attrGetter(bound.attribute));
      return items.map((x) => pyStr(x)).join(String(bound.d));
    },
    unique: (v: unknown) => {
      const out: unknown[] = [];
      for (const x of iterItems(v)) if (!out.some((y) => pyEqual(x, y))) out.push(x);
      return out;
    },
    min: (v: unknown) => iterItems(v).reduce((a, b) => (a === undefined || cmp(b, a) < 0 ? b : a), undefined),
    max: (v: unknown) => iterItems(v).reduce((a, b) => (a === undefined || cmp(b, a) > 0 ? b : a), undefined),
    sort: (v: unknown, ...rest: unknown[]) => {
      const { bound } = bindArgs(rest, ["reverse", "case_sensitive", "attribute"], { reverse: false, case_sensitive: false });
      const get = bound.attribute === undefined || bound.attribute === null ? (x: unknown) => x : attrGetter(bound.attribute);
      const items = iterItems(v).slice();
      items.sort((a, b) => cmp(sortKey(get(a), Boolean(bound.case_sensitive)), sortKey(get(b), Boolean(bound.case_sensitive))));
      if (bound.reverse) items.reverse();
      return items;
    },
    attr: (v: unknown, name: unknown) => (isDict(v) ? v[String(name)] : undefined),
    format: (v: unknown, ...args: unknown[]) => (String(v).includes("{") && !String(v).includes("%") ? pyFormat(String(v), args) : pyPercent(String(v), args)),
    pprint: (v: unknown) => pyRepr(v),
    wordwrap: (v: unknown, width: unknown = 79) => {
      const w = Number(width);
      const lines: string[] = [];
      let cur = "";
      for (const word of String(v).split(/\s+/).filter(Boolean)) {
        if (cur && cur.length + 1 + word.length > w) {
          lines.push(cur);
          cur = word;
        } else cur = cur ? `${cur} ${word}` : word;
      }
      if (cur) lines.push(cur);
      return lines.join("\n");
    },
    // --- Salt serializers (SerializerExtension) ---
    yaml: (v: unknown, flow: unknown = true) => dumpYaml(v, flow !== false),
    json: (v: unknown, ...rest: unknown[]) => {
      const { bound } = bindArgs(rest, ["sort_keys", "indent"], { sort_keys: true, indent: null });
      return pyJson(v, { sortKeys: Boolean(bound.sort_keys), indent: bound.indent === null ? null : Number(bound.indent) });
    },
    tojson: (v: unknown, ...rest: unknown[]) => {
      const { bound } = bindArgs(rest, ["indent"], { indent: null });
      return pyJson(v, { sortKeys: true, indent: bound.indent === null ? null : Number(bound.indent) });
    },
    python: (v: unknown) => pyRepr(v),
    load_yaml: (v: unknown) => loadYaml(String(v)),
    load_json: (v: unknown) => JSON.parse(String(v)),
    load_text: (v: unknown) => String(v),
    yaml_encode: (v: unknown) => dumpYaml(v, true),
    yaml_dquote: (v: unknown) => JSON.stringify(String(v)),
    yaml_squote: (v: unknown) => `'${String(v).replace(/'/g, "''")}'`,
    // --- Salt data / string filters ---
    to_bool: (v: unknown) => {
      if (v === null || v === undefined) return false;
      if (typeof v === "boolean") return v;
      if (typeof v === "string") return ["true", "1", "yes", "y", "on"].includes(v.toLowerCase());
      if (typeof v === "number") return v > 0;
      return truthy(v);
    },
    to_num: (v: unknown) => {
      const s = String(v);
      if (/^[-+]?\d+$/.test(s.trim())) return Number(s);
      const f = Number(s);
      return Number.isNaN(f) ? v : f;
    },
    quote: (v: unknown) => {
      const s = pyStr(v);
      return s === "" ? "''" : /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'"'"'`)}'`;
    },
    regex_escape: (v: unknown) => String(v).replace(/[^A-Za-z0-9_]/g, (c) => `\\${c}`),
    regex_search: (v: unknown, pattern: unknown, ignorecase: unknown = false, multiline: unknown = false) => {
      const re = pyRegex(pattern, ignorecase, multiline, true);
      const m = re.exec(String(v));
      return m ? (m.length > 1 ? m.slice(1) : [m[0]]) : null;
    },
    regex_match: (v: unknown, pattern: unknown, ignorecase: unknown = false, multiline: unknown = false) => {
      const re = pyRegex(pattern, ignorecase, multiline, false);
      const m = re.exec(String(v));
      return m ? (m.length > 1 ? m.slice(1) : [m[0]]) : null;
    },
    regex_replace: (v: unknown, pattern: unknown, repl: unknown, ignorecase: unknown = false, multiline: unknown = false) => {
      const re = pyRegex(pattern, ignorecase, multiline, true, true);
      return String(v).replace(re, String(repl).replace(/\\(\d)/g, "$$$1").replace(/\\g<(\w+)>/g, "$$<$1>"));
    },
    uuid: (v: unknown) => uuid5(String(v)),
    random_uuid: () => randomUUID(),
    md5: (v: unknown) => createHash("md5").update(String(v)).digest("hex"),
    sha1: (v: unknown) => createHash("sha1").update(String(v)).digest("hex"),
    sha256: (v: unknown) => createHash("sha256").update(String(v)).digest("hex"),
    sha512: (v: unknown) => createHash("sha512").update(String(v)).digest("hex"),
    hmac: (v: unknown, secret: unknown, digest = "sha256") => createHmac(String(digest), String(secret)).update(String(v)).digest("hex"),
    base64_encode: (v: unknown) => Buffer.from(String(v)).toString("base64"),
    base64_decode: (v: unknown) => Buffer.from(String(v), "base64").toString("utf8"),
    union: (a: unknown, b: unknown) => filters.unique!([...iterItems(a), ...iterItems(b)]),
    intersect: (a: unknown, b: unknown) => (filters.unique!(iterItems(a)) as unknown[]).filter((x) => iterItems(b).some((y) => pyEqual(x, y))),
    difference: (a: unknown, b: unknown) => (filters.unique!(iterItems(a)) as unknown[]).filter((x) => !iterItems(b).some((y) => pyEqual(x, y))),
    symmetric_difference: (a: unknown, b: unknown) => [
      ...(filters.difference!(a, b) as unknown[]),
      ...(filters.difference!(b, a) as unknown[]),
    ],
    avg: (v: unknown) => {
      const xs = iterItems(v).map(Number);
      return xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : 0;
    },
    is_list: (v: unknown) => Array.isArray(v),
    is_iter: (v: unknown) => Array.isArray(v) || isDict(v) || typeof v === "string",
    sequence: (v: unknown) => (Array.isArray(v) ? v : [v]),
    flatten: (v: unknown, levels: unknown = null, preserve_nulls: unknown = false) => {
      const out: unknown[] = [];
      const walk = (xs: unknown[], depth: number) => {
        for (const x of xs) {
          if (Array.isArray(x) && (levels === null || depth < Number(levels))) walk(x, depth + 1);
          else if (x !== null || preserve_nulls) out.push(x);
        }
      };
      walk(iterItems(v), 0);
      return out;
    },
    traverse: (v: unknown, key: unknown, dflt: unknown = null, delimiter: unknown = ":") => traverse(v, String(key), dflt, String(delimiter)),
    exactly_n_true: (v: unknown, n: unknown = 1) => iterItems(v).filter(truthy).length === Number(n),
    exactly_one_true: (v: unknown) => iterItems(v).filter(truthy).length === 1,
    path_join: (...parts: unknown[]) => {
      const { args } = kwargsOf(parts);
      let out = "";
      for (const p of args.map(String)) out = p.startsWith("/") || out === "" ? p : out.endsWith("/") ? out + p : `${out}/${p}`;
      return out;
    },
    set_dict_key_value: (d: unknown, keys: unknown, value: unknown, delimiter: unknown = ":") => {
      const parts = String(keys).split(String(delimiter));
      let ptr = d as Record<string, unknown>;
      for (const p of parts.slice(0, -1)) {
        if (!isDict(ptr[p])) ptr[p] = {};
        ptr = ptr[p] as Record<string, unknown>;
      }
      ptr[parts[parts.length - 1]!] = value;
      return d;
    },
    dict_to_sls_yaml_params: (v: unknown) => (isDict(v) ? dumpYaml(Object.entries(v).map(([k, x]) => ({ [k]: x })), true) : dumpYaml(v)),
    strftime: (v: unknown, fmt: unknown = "%Y-%m-%d") => strftime(v, String(fmt)),
    deepcopy: (v: unknown) => deepCopy(v),
    repr: (v: unknown) => pyRepr(v),
    str_repr: (v: unknown) => pyStrRepr(String(v)),
  };
  filters.regex_escape_str = filters.regex_escape!;
  filters.escape_regex = filters.regex_escape!;
  filters.to_number = filters.to_num!;
  return filters;
}

/** A Python regex as a JS RegExp (search or match semantics; global for replace). */
function pyRegex(pattern: unknown, ignorecase: unknown, multiline: unknown, search: boolean, global = false): RegExp {
  const flags = (ignorecase ? "i" : "") + (multiline ? "m" : "");
  const p = String(pattern);
  const src = `${flags ? `(?${flags})` : ""}${search ? "" : ""}${p}`;
  const re = compilePcre(src);
  if (!re) throw new FilterError(`invalid regular expression ${JSON.stringify(p)}`);
  if (!search) return re;
  // compilePcre anchors at the start (re.match); drop the anchor for re.search
  const body = re.source.replace(/^\^|^\(\?<!\[\\s\\S\]\)/, "");
  return new RegExp(body, re.flags + (global ? "g" : ""));
}

/** uuid5 in the URL namespace, as Salt's `uuid` filter (`uuid.uuid5(uuid.NAMESPACE_URL, value)`). */
function uuid5(name: string): string {
  const ns = Buffer.from("6ba7b8119dad11d180b400c04fd430c8", "hex");
  const h = createHash("sha1").update(ns).update(name).digest().subarray(0, 16);
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.toString("hex");
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

function strftime(v: unknown, fmt: string): string {
  const d = typeof v === "number" ? new Date(v * 1000) : new Date(String(v));
  if (Number.isNaN(d.getTime())) throw new FilterError(`strftime: cannot read ${pyRepr(v)} as a date`);
  const p = (n: number, w = 2) => String(n).padStart(w, "0");
  return fmt.replace(/%([YmdHMSjyfz%])/g, (_m, c: string) => {
    switch (c) {
      case "Y":
        return String(d.getUTCFullYear());
      case "y":
        return p(d.getUTCFullYear() % 100);
      case "m":
        return p(d.getUTCMonth() + 1);
      case "d":
        return p(d.getUTCDate());
      case "H":
        return p(d.getUTCHours());
      case "M":
        return p(d.getUTCMinutes());
      case "S":
        return p(d.getUTCSeconds());
      case "f":
        return p(d.getUTCMilliseconds() * 1000, 6);
      case "j":
        return p(Math.floor((d.getTime() - Date.UTC(d.getUTCFullYear(), 0, 1)) / 86400000) + 1, 3);
      case "z":
        return "+0000";
      default:
        return "%";
    }
  });
}

/** Jinja tests missing from nunjucks, and Salt's (`match`, `equalto`). */
export function makeTests(): Record<string, Fn> {
  return {
    none: (v: unknown) => v === null,
    boolean: (v: unknown) => typeof v === "boolean",
    true: (v: unknown) => v === true,
    false: (v: unknown) => v === false,
    integer: (v: unknown) => (typeof v === "number" && Number.isInteger(v)) || typeof v === "bigint",
    float: (v: unknown) => typeof v === "number" && !Number.isInteger(v),
    number: (v: unknown) => typeof v === "number" || typeof v === "bigint",
    string: (v: unknown) => typeof v === "string",
    mapping: (v: unknown) => isDict(v),
    sequence: (v: unknown) => Array.isArray(v) || typeof v === "string" || isDict(v),
    iterable: (v: unknown) => Array.isArray(v) || typeof v === "string" || isDict(v),
    list: (v: unknown) => Array.isArray(v),
    in: (v: unknown, seq: unknown) => (typeof seq === "string" ? seq.includes(String(v)) : iterItems(seq).some((x) => pyEqual(x, v))),
    eq: (a: unknown, b: unknown) => pyEqual(a, b),
    equalto: (a: unknown, b: unknown) => pyEqual(a, b),
    "==": (a: unknown, b: unknown) => pyEqual(a, b),
    ne: (a: unknown, b: unknown) => !pyEqual(a, b),
    "!=": (a: unknown, b: unknown) => !pyEqual(a, b),
    match: (v: unknown, pattern: unknown, ignorecase: unknown = false, multiline: unknown = false) => {
      const flags = (ignorecase ? "i" : "") + (multiline ? "m" : "");
      const re = compilePcre(`${flags ? `(?${flags})` : ""}${String(pattern)}`);
      if (!re) throw new FilterError(`invalid regular expression ${JSON.stringify(String(pattern))}`);
      return re.test(String(v));
    },
    gt: (a: unknown, b: unknown) => (a as number) > (b as number),
    ">": (a: unknown, b: unknown) => (a as number) > (b as number),
    greaterthan: (a: unknown, b: unknown) => (a as number) > (b as number),
    ge: (a: unknown, b: unknown) => (a as number) >= (b as number),
    ">=": (a: unknown, b: unknown) => (a as number) >= (b as number),
    lt: (a: unknown, b: unknown) => (a as number) < (b as number),
    "<": (a: unknown, b: unknown) => (a as number) < (b as number),
    lessthan: (a: unknown, b: unknown) => (a as number) < (b as number),
    le: (a: unknown, b: unknown) => (a as number) <= (b as number),
    "<=": (a: unknown, b: unknown) => (a as number) <= (b as number),
    defined: (v: unknown) => v !== undefined,
    undefined: (v: unknown) => v === undefined,
  };
}

export function logFilterWarning(msg: string): void {
  log.warning(msg);
}
