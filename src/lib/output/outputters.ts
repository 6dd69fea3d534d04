/**
 * Salt's outputters for CLI results (salt/output/*.py) and the choice among them (salt/output/__init__.py
 * get_printout / try_printout): nested (the default), highstate (state functions), json, yaml, raw, txt,
 * table, key, newline_values_only, pprint, no_return, quiet. The same text as Salt's for the same data
 * (golden files in test/fixtures/cli-output/, captured from Salt's own outputters).
 */
import { stringify } from "yaml";
import { getColors, stripEsc } from "./color.js";
import { highstate } from "./highstate.js";
import { nested, sortKeys } from "./nested.js";
import type { OutOpts } from "./opts.js";
import { isIntNumber, pformat, pyRepr, pyStr, reprFloat, splitLines } from "./pyrepr.js";
import { table } from "./table.js";
import { pyYamlDump } from "./pyyaml.js";

export type { OutOpts } from "./opts.js";

export const OUTPUTTERS = ["nested", "highstate", "json", "yaml", "raw", "txt", "text", "table", "key", "newline_values_only", "pprint", "no_return", "quiet"] as const;
export type OutName = (typeof OUTPUTTERS)[number];

/** msgpack values as JSON/YAML carry them: bytes as latin1 text (byte for byte), big integers as numbers or digits. */
export function plain(v: unknown): unknown {
  if (Buffer.isBuffer(v)) return v.toString("latin1");
  if (v instanceof Uint8Array) return Buffer.from(v).toString("latin1");
  if (typeof v === "bigint") return Number.isSafeInteger(Number(v)) ? Number(v) : v.toString();
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === "object") {
    const o: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) o[k] = plain(x);
    return o;
  }
  return v;
}

function isMap(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** Python's json.dumps(v, indent, sort_keys, ensure_ascii=False, default=repr). */
export function pyJson(v: unknown, indent: number | null, sortKeys_ = false): string {
  const sep = indent === null ? ", " : ",";
  const walk = (x: unknown, level: number): string => {
    if (x === null || x === undefined) return "null";
    if (x === true) return "true";
    if (x === false) return "false";
    if (typeof x === "bigint") return x.toString();
    if (typeof x === "number") {
      if (Number.isNaN(x)) return "NaN";
      if (!Number.isFinite(x)) return x > 0 ? "Infinity" : "-Infinity";
      return isIntNumber(x) ? String(x) : reprFloat(x);
    }
    if (typeof x === "string") return JSON.stringify(x);
    if (x instanceof Uint8Array) return JSON.stringify(pyRepr(x));
    const nl = indent === null ? "" : "\n" + " ".repeat(indent * (level + 1));
    const end = indent === null ? "" : "\n" + " ".repeat(indent * level);
    if (Array.isArray(x)) {
      if (!x.length) return "[]";
      return "[" + nl + x.map((y) => walk(y, level + 1)).join(sep + nl) + end + "]";
    }
    if (isMap(x)) {
      let keys = Object.keys(x);
      if (!keys.length) return "{}";
      if (sortKeys_) keys = sortKeys(keys);
      return "{" + nl + keys.map((k) => JSON.stringify(k) + ": " + walk(x[k], level + 1)).join(sep + nl) + end + "}";
    }
    return JSON.stringify(String(x));
  };
  return walk(v, 0);
}

function jsonOut(data: unknown, opts: OutOpts): string {
  if (opts.output_indent === undefined) return pyJson(data, 4);
  const ind = opts.output_indent;
  if (ind === null) return pyJson(data, null);
  if (ind === "pretty") return pyJson(data, 4, true);
  // Python's indent=0 still breaks lines
  return pyJson(data, ind < 0 ? null : ind);
}

/** PyYAML's safe_dump as Salt's yaml outputter calls it (pyyaml.ts); a negative --out-indent gives flow style. */
function yamlOut(data: unknown, opts: OutOpts): string {
  const ind = typeof opts.output_indent === "number" ? opts.output_indent : undefined;
  if (ind !== undefined && ind < 0) {
    return stringify(plain(data), { version: "1.1", collectionStyle: "flow", sortMapEntries: true, lineWidth: 0, singleQuote: true }).trimEnd() + "\n";
  }
  return pyYamlDump(data, ind ?? 2);
}

function txtOut(data: unknown): string {
  let ret = "";
  if (isMap(data)) {
    for (const [key, value] of Object.entries(data)) {
      if (typeof value === "string") for (const line of splitLines(value)) ret += `${key}: ${line}\n`;
      else ret += `${key}: ${pyStr(value)}\n`;
    }
  } else if (typeof data === "string") ret += data + "\n";
  else ret += pformat(data) + "\n";
  return ret;
}

function newlineValuesOnly(data: unknown): string {
  if (!isMap(data)) throw new TypeError("newline_values_only needs a mapping");
  const values: unknown[] = [];
  for (const v of Object.values(data)) {
    if (Array.isArray(v)) values.push(...v);
    else values.push(v);
  }
  return values.map(pyStr).join("\n");
}

/** salt/output/key.py for the zeromq transport's key lists. */
function keyOut(data: unknown, opts: OutOpts): string {
  if (!isMap(data)) throw new TypeError("key needs a mapping");
  const c = getColors(opts.color);
  const cmap: Record<string, string> = { minions_pre: c.RED!, minions: c.GREEN!, minions_denied: c.MAGENTA!, minions_rejected: c.BLUE!, local: c.MAGENTA! };
  const trans: Record<string, string> = {
    minions_pre: `${c.LIGHT_RED}Unaccepted Keys:${c.ENDC}`,
    minions: `${c.LIGHT_GREEN}Accepted Keys:${c.ENDC}`,
    minions_denied: `${c.LIGHT_MAGENTA}Denied Keys:${c.ENDC}`,
    minions_rejected: `${c.LIGHT_BLUE}Rejected Keys:${c.ENDC}`,
    local: `${c.LIGHT_MAGENTA}Local Keys:${c.ENDC}`,
  };
  const strip = opts.strip_colors ?? true;
  let ret = "";
  for (const status of sortKeys(Object.keys(data))) {
    if (!(status in trans)) throw new TypeError(`unknown key status ${status}`);
    ret += `${trans[status]}\n`;
    const group = data[status];
    const keys = Array.isArray(group) ? group.map(pyStr) : isMap(group) ? Object.keys(group) : [];
    for (const key of sortKeys(keys)) {
      const skey = strip ? stripEsc(key) : key;
      if (Array.isArray(group)) ret += `${cmap[status]}${skey}${c.ENDC}\n`;
      else if (isMap(group)) ret += `${cmap[status]}${skey}:  ${pyStr(group[key])}${c.ENDC}\n`;
    }
  }
  return ret;
}

/** salt/output/no_return.py: minions that did not return, in red. */
function noReturn(data: unknown, opts: OutOpts): string {
  const c = getColors(opts.color);
  const walk = (ret: unknown, indent: number, out: string): string => {
    if (typeof ret === "string") {
      for (const line of ret.split("\n")) out += `${c.RED}${" ".repeat(indent)}${line}${c.ENDC}\n`;
    } else if (isMap(ret)) {
      for (const key of sortKeys(Object.keys(ret))) {
        out += `${c.CYAN}${" ".repeat(indent)}${key}${c.ENDC}:\n`;
        out = walk(ret[key], indent + 4, out);
      }
    }
    return out;
  };
  return walk(data, 0, "");
}

function printer(out: string, data: unknown, opts: OutOpts): string | undefined {
  switch (out) {
    case "nested":
      return nested(data, opts);
    case "highstate":
      return highstate(data, opts);
    case "json":
      return jsonOut(data, opts);
    case "yaml":
      return yamlOut(data, opts);
    case "raw":
      return pyStr(data);
    case "txt":
      return txtOut(data);
    case "table":
      return table(data, opts);
    case "key":
      return keyOut(data, opts);
    case "newline_values_only":
      return newlineValuesOnly(data);
    case "pprint":
      return pformat(data);
    case "no_return":
      return noReturn(data, opts);
    case "quiet":
      return "";
    default:
      return nested(data, opts);
  }
}

/** Python's str.rstrip(). */
function rstrip(s: string): string {
  return s.replace(/[\s\x1c-\x1f\x85]+$/u, "");
}

/**
 * Which outputter prints a return (get_printout): the CLI's --out wins unless it is "highstate" (Salt keeps
 * the function's own outputter then, issue #29796); with --static and no outputter, state functions get
 * highstate; "text" is txt; nothing is nested.
 */
export function chooseOutputter(out: string | undefined, cli: { output?: string; static?: boolean; fun?: string | string[] }): string {
  let o = out;
  if (cli.output && cli.output !== "highstate") o = cli.output;
  if (!o && cli.static) {
    if (cli.output) o = cli.output;
    else if (typeof cli.fun === "string" && cli.fun.split(".")[0] === "state") o = "highstate";
  }
  if (o === "text") o = "txt";
  if (!o) o = "nested";
  if (!(OUTPUTTERS as readonly string[]).includes(o)) o = "nested";
  return o;
}

/** try_printout: the chosen outputter, nested when it fails on the data, raw when nested fails too; right-stripped. */
export function render(out: string, data: unknown, opts: OutOpts): string {
  for (const o of [out, "nested", "raw"]) {
    try {
      const s = printer(o, data, opts);
      if (s !== undefined) return rstrip(s);
    } catch {
      // Salt falls back on KeyError/AttributeError/TypeError from an outputter that cannot take the data
    }
  }
  return "";
}

/** Format one result block without colour, as a pipe gets it (salt-key and tests use this). */
export function formatResult(out: OutName | string, data: unknown): string {
  return render(chooseOutputter(out, {}), data, { color: false });
}
