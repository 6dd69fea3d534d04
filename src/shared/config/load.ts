/**
 * Reading a Salt master configuration directory as Salt's master_config does (salt/config/__init__.py
 * load_config, include_config, apply_master_config), each file as YAML 1.1 (PyYAML's):
 * - `<dir>/master`, then the files matched by `default_include` (default `master.d/*.conf`; matching
 *   nothing is fine), then those matched by `include` (matching nothing is warned about). Patterns are
 *   globs, `~` is expanded, a relative pattern is relative to the directory of the file that names it,
 *   matches are read in name order, and an included file's own `include` is read the same way.
 * - Included files merge into one another recursively (mappings merge, lists are joined without
 *   repeats: Salt's dictupdate.update with merge_lists), and the result replaces the main file's top-level
 *   keys (later files override).
 * - Every declared option (schema.ts) is checked and coerced (options.ts); a bad value stops with
 *   CONFIG_INVALID "<option>: must be ..., got ... (in <file>)". An option brine does not know is warned
 *   about once, with the closest known name; a Salt master option brine does not implement is warned about
 *   as ignored, unless it is set to Salt's own default (operators copy whole default files: such a line
 *   changes nothing, in Salt or in brine).
 * - Over Salt's defaults; then `root_dir` prefixes the path options.
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { parse } from "yaml";
import { BrineError } from "../errors.js";
import { getLogger } from "../log.js";
import { ROOT_DIR_PATHS, masterDefaults, type MasterConfig } from "./defaults.js";
import { checkOption, takesNull } from "./options.js";
import { SALT_MASTER_LITERAL_DEFAULTS, SALT_MASTER_OPTIONS, SALT_OTHER_OPTIONS } from "./salt-master-options.js";
import { MasterConfigSchema, optionSchema } from "./schema.js";

type Map = Record<string, unknown>;

export interface LoadOptions {
  /** hears each warning (unknown options, unimplemented Salt options, includes matching nothing); default: the brine.config logger */
  warn?: (msg: string) => void;
}

/** Where each top-level key of a merged configuration was last set. */
interface Layer {
  values: Map;
  origin: Record<string, string>;
}

/** nesting of `include` within included files before it is taken for a loop */
const includeDepthMax = 16;

function isPlainMap(v: unknown): v is Map {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

function readYamlMap(file: string): Map {
  let doc: unknown;
  try {
    // YAML 1.1, as Salt's PyYAML reads it: unquoted yes/no/on/off are booleans, 0755 is octal
    doc = parse(readFileSync(file, "utf8"), { version: "1.1" });
  } catch (e) {
    throw new BrineError("CONFIG_INVALID", `${file}: ${(e as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (!isPlainMap(doc)) throw new BrineError("CONFIG_INVALID", `${file}: top level must be a mapping`);
  return doc;
}

function layerOf(file: string, values: Map): Layer {
  return { values, origin: Object.fromEntries(Object.keys(values).map((k) => [k, file])) };
}

/** Salt's dictupdate.update(dest, upd, recursive_update=True, merge_lists=True). */
function mergeInto(dest: Map, upd: Map): Map {
  for (const [k, v] of Object.entries(upd)) {
    const d = dest[k];
    if (isPlainMap(d) && isPlainMap(v)) dest[k] = mergeInto({ ...d }, v);
    else if (Array.isArray(d) && Array.isArray(v)) dest[k] = [...d, ...v.filter((x) => !d.some((y) => isDeepStrictEqual(x, y)))];
    else dest[k] = v;
  }
  return dest;
}

const GLOB_CHARS = /[*?[]/;

function segmentRegex(seg: string): RegExp {
  let re = "";
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i]!;
    if (c === "*") re += ".*";
    else if (c === "?") re += ".";
    else if (c === "[") {
      const end = seg.indexOf("]", i + 2);
      if (end < 0) re += "\\[";
      else {
        let body = seg.slice(i + 1, end);
        if (body.startsWith("!")) body = "^" + body.slice(1);
        re += `[${body.replace(/\\/g, "\\\\")}]`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|\\\]]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

/** Python's glob.glob for an absolute pattern: `*`, `?`, `[...]` within one path segment; no hidden files unless the segment starts with a dot. */
export function globFiles(pattern: string): string[] {
  const parts = pattern.split("/").filter((p, i) => p !== "" || i === 0);
  let paths = [parts[0] === "" ? "/" : parts[0]!];
  for (const seg of parts.slice(1)) {
    const next: string[] = [];
    for (const dir of paths) {
      if (!GLOB_CHARS.test(seg)) {
        const p = path.join(dir, seg);
        if (existsSync(p)) next.push(p);
        continue;
      }
      let names: string[];
      try {
        names = readdirSync(dir);
      } catch {
        continue;
      }
      const re = segmentRegex(seg);
      for (const n of names) if (re.test(n) && (seg.startsWith(".") || !n.startsWith("."))) next.push(path.join(dir, n));
    }
    paths = next;
  }
  return paths.filter((p) => {
    try {
      return statSync(p).isFile();
    } catch {
      return false;
    }
  });
}

function patternsOf(v: unknown, option: string, file: string): string[] {
  if (v === undefined || v === null || v === "") return [];
  const list = typeof v === "string" ? [v] : v;
  if (!Array.isArray(list) || !list.every((x) => typeof x === "string")) {
    throw new BrineError("CONFIG_INVALID", `${option}: must be a path or glob, or a list of them, got ${JSON.stringify(v)} (in ${file})`);
  }
  return list as string[];
}

/** Salt's include_config: the files `patterns` match, relative to `from`'s directory, merged in name order. */
function readIncludes(patterns: string[], option: string, from: string, verbose: boolean, warn: (m: string) => void, depth: number): Layer {
  const out: Layer = { values: {}, origin: {} };
  for (const raw of patterns) {
    let p = raw.replace(/^~(?=\/|$)/, os.homedir());
    if (!path.isAbsolute(p)) p = path.join(path.dirname(from), p);
    const files = globFiles(p).sort();
    if (files.length === 0 && verbose) warn(`${option}: '${p}' matches no files (in ${from})`);
    for (const f of files) {
      if (depth >= includeDepthMax) throw new BrineError("CONFIG_INVALID", `include: more than ${includeDepthMax} levels of include at ${f} (an include loop?)`);
      const layer = layerOf(f, readYamlMap(f));
      const nested = patternsOf(layer.values.include, "include", f);
      if (nested.length) shallowOver(layer, readIncludes(nested, "include", f, verbose, warn, depth + 1));
      mergeInto(out.values, layer.values);
      Object.assign(out.origin, layer.origin);
    }
  }
  return out;
}

/** `top.update(over)` with origins */
function shallowOver(top: Layer, over: Layer): void {
  Object.assign(top.values, over.values);
  Object.assign(top.origin, over.origin);
}

/** Levenshtein distance, for "did you mean". */
export function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

const SALT_OPTIONS = new Set(SALT_MASTER_OPTIONS);
const SALT_OTHERS = new Set(SALT_OTHER_OPTIONS);

/** The known option closest to `name`, when it is close enough to be a typo of it. */
export function closestOption(name: string): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  const limit = Math.max(1, Math.min(3, Math.floor(name.length / 3)));
  for (const known of new Set([...Object.keys(MasterConfigSchema.properties), ...SALT_MASTER_OPTIONS, ...SALT_OTHER_OPTIONS])) {
    const d = editDistance(name, known);
    if (d < bestD || (d === bestD && best !== undefined && known < best)) [best, bestD] = [known, d];
  }
  return bestD <= limit ? best : undefined;
}

/**
 * Salt 3009's sizing of its mmap_key files (salt/cache/mmap_key.py), newer than the option list above:
 * brine's `keys.cache_driver: mmap_key` is an LMDB environment with no slots to size.
 */
const MMAP_KEY_SIZING: Record<string, string> = {
  mmap_key_size: "slots of Salt's mmap_key index",
  mmap_key_slot_size: "bytes per slot of Salt's mmap_key index",
  mmap_key_id_size: "longest minion id of Salt's mmap_key index",
  mmap_key_max_segment_bytes: "size of Salt's mmap_key heap segments",
};

/**
 * What is wrong with an option brine does not declare, as a warning, or undefined when nothing is: a Salt
 * option set to Salt's own default.
 */
export function undeclaredOptionWarning(name: string, value: unknown, file: string): string | undefined {
  if (Object.hasOwn(MMAP_KEY_SIZING, name)) return `brine does not implement ${name} (${MMAP_KEY_SIZING[name]}); it is ignored (set in ${file})`;
  if (SALT_OPTIONS.has(name) || SALT_OTHERS.has(name)) {
    if (Object.hasOwn(SALT_MASTER_LITERAL_DEFAULTS, name) && isDeepStrictEqual(SALT_MASTER_LITERAL_DEFAULTS[name], value)) return undefined;
    return `brine does not implement ${name}; it is ignored (set in ${file})`;
  }
  const guess = closestOption(name);
  return `unknown option ${name} (in ${file})${guess ? `; did you mean ${guess}?` : ""}`;
}

/** Salt's repack_dictlist, which master_config applies to nodegroups: a list of one-key mappings is one mapping. */
function repackDictList(v: unknown): unknown {
  if (!Array.isArray(v) || !v.every((e) => isPlainMap(e) && Object.keys(e).length === 1)) return v;
  return Object.assign({}, ...(v as Map[]));
}

/** Checks the declared options of `layer` in place (coerced values; null where null is no value: dropped), warning about the others. */
function checkLayer(layer: Layer, warn: (m: string) => void, warned: Set<string>): Map {
  const out: Map = {};
  for (const [k, v] of Object.entries(layer.values)) {
    const file = layer.origin[k] ?? "?";
    const s = optionSchema(k);
    if (!s) {
      const w = warned.has(k) ? undefined : undeclaredOptionWarning(k, v, file);
      if (w) warn(w);
      warned.add(k);
      out[k] = v;
      continue;
    }
    if (v === undefined || (v === null && !takesNull(s))) continue;
    out[k] = checkOption(k, s, k === "nodegroups" ? repackDictList(v) : v, ` (in ${file})`);
  }
  return out;
}

/** Salt joins root_dir and an absolute path by concatenation unless the path already starts with it. */
export function prependRoot(root: string, p: string): string {
  if (root === "/" || root === "") return p;
  const absRoot = path.resolve(root);
  if (p.startsWith(absRoot)) return p;
  return path.join(absRoot, p);
}

export function loadMasterConfig(configDir: string, overrides: Partial<MasterConfig> = {}, opts: LoadOptions = {}): MasterConfig {
  const warn = opts.warn ?? ((m: string) => getLogger("brine.config").warning(m));
  const file = path.join(configDir, "master");
  const main = layerOf(file, existsSync(file) ? readYamlMap(file) : {});
  const defaultInclude = main.values.default_include ?? masterDefaults().default_include;
  shallowOver(main, readIncludes(patternsOf(defaultInclude, "default_include", file), "default_include", file, false, warn, 0));
  shallowOver(main, readIncludes(patternsOf(main.values.include, "include", file), "include", file, true, warn, 0));
  const warned = new Set<string>();
  const fromFiles = checkLayer(main, warn, warned);
  const fromOverrides = checkLayer(layerOf("the command line", { ...overrides }), warn, warned);
  const cfg = { ...masterDefaults(), ...fromFiles, ...fromOverrides } as MasterConfig;
  cfg.conf_file = file;
  if (!cfg.id) cfg.id = `${os.hostname()}_master`;
  // A relative root_dir is resolved against the current directory, as Salt does.
  cfg.root_dir = path.resolve(cfg.root_dir);
  for (const key of ROOT_DIR_PATHS) {
    const v = cfg[key];
    if (typeof v === "string" && v !== "") cfg[key] = prependRoot(cfg.root_dir, v) as never;
  }
  if (cfg.cluster_port !== undefined && cfg.cluster_pool_port === 4520 && /^\s*\d+\s*$/.test(String(cfg.cluster_port))) cfg.cluster_pool_port = Number(cfg.cluster_port);
  return cfg;
}

/** The embedded default used by `npm start`: everything under ./var, loopback only, auto_accept off. */
export function embeddedDefaultConfigText(varDir: string): string {
  return [
    "# brine embedded default configuration (written at first start; edit freely)",
    `root_dir: ${varDir}`,
    "interface: 127.0.0.1",
    "publish_port: 4505",
    "ret_port: 4506",
    "pki_dir: /pki/master",
    "cachedir: /cache",
    "sock_dir: /run",
    "log_file: /log/master",
    "log_level: info",
    "file_roots:",
    "  base:",
    `    - ${path.join(varDir, "srv", "salt")}`,
    "pillar_roots:",
    "  base:",
    `    - ${path.join(varDir, "srv", "pillar")}`,
    "",
  ].join("\n");
}
