/**
 * Salt's dictionary merging (salt/utils/dictupdate.py) as the pillar uses it:
 * `pillar_source_merging_strategy` smart (→ recurse; aggregate for yamlex renderers, which brine does
 * not support, so recurse with a warning), recurse, overwrite, list, none; `pillar_merge_lists` appends
 * the new list's items that the old list lacks.
 * Also the data helpers templates need (deep copy, Python equality, `traverse_dict_and_list`).
 */
import { getLogger } from "../../shared/log.js";

const log = getLogger("brine.pillar");

export type Data = Record<string, unknown>;

export function isDict(v: unknown): v is Data {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !Buffer.isBuffer(v) && !(v instanceof Uint8Array);
}

/** Deepest structure copied or compared (levels); deeper data is shared, not copied. */
export const dataDepthMax = 256;

export function deepCopy<T>(v: T, depth = 0): T {
  if (depth > dataDepthMax) return v;
  if (Array.isArray(v)) return v.map((x) => deepCopy(x, depth + 1)) as T;
  if (isDict(v)) {
    const out: Data = {};
    for (const [k, x] of Object.entries(v)) out[k] = deepCopy(x, depth + 1);
    return out as T;
  }
  return v;
}

/** Python `==` on decoded data. */
export function pyEqual(a: unknown, b: unknown, depth = 0): boolean {
  if (a === b) return true;
  if (depth > dataDepthMax) return false;
  if ((typeof a === "number" || typeof a === "bigint") && (typeof b === "number" || typeof b === "bigint")) {
    // eslint-disable-next-line eqeqeq
    return a == b;
  }
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => pyEqual(x, b[i], depth + 1));
  if (isDict(a) && isDict(b)) {
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && pyEqual(a[k], b[k], depth + 1));
  }
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  return false;
}

/** `dictupdate.update(dest, upd, recursive_update=True, merge_lists)`: mutates and returns dest. */
export function update(dest: Data, upd: Data, mergeLists = false, depth = 0): Data {
  const updKeys = Object.keys(upd);
  const recursive = depth <= dataDepthMax && updKeys.some((k) => Object.prototype.hasOwnProperty.call(dest, k));
  if (!recursive) {
    for (const k of updKeys) dest[k] = upd[k];
    return dest;
  }
  for (const key of updKeys) {
    const val = upd[key];
    const sub = Object.prototype.hasOwnProperty.call(dest, key) ? dest[key] : undefined;
    if (isDict(sub) && isDict(val)) {
      dest[key] = update(sub, val, mergeLists, depth + 1);
    } else if (Array.isArray(sub) && Array.isArray(val)) {
      if (mergeLists) {
        const merged = deepCopy(sub);
        for (const x of val) if (!merged.some((m) => pyEqual(m, x))) merged.push(x);
        dest[key] = merged;
      } else dest[key] = val;
    } else dest[key] = val;
  }
  return dest;
}

export function mergeRecurse(a: Data, b: Data, mergeLists = false): Data {
  return update(deepCopy(a), b, mergeLists);
}

export function mergeOverwrite(a: Data, b: Data, mergeLists = false): Data {
  for (const k of Object.keys(b)) if (Object.prototype.hasOwnProperty.call(a, k)) a[k] = b[k];
  return mergeRecurse(a, b, mergeLists);
}

export function mergeList(a: Data, b: Data): Data {
  const out: Data = {};
  for (const [k, v] of Object.entries(a)) out[k] = Object.prototype.hasOwnProperty.call(b, k) ? [v, b[k]] : v;
  return out;
}

let aggregateWarned = false;

/** `dictupdate.merge(obj_a, obj_b, strategy, renderer, merge_lists)`. */
export function merge(a: Data, b: Data, strategy = "smart", renderer = "yaml", mergeLists = false): Data {
  let s = strategy;
  if (s === "smart") {
    const last = renderer.split("|").pop() ?? "";
    s = last === "yamlex" || renderer.startsWith("yamlex_") ? "aggregate" : "recurse";
  }
  switch (s) {
    case "list":
      return mergeList(a, b);
    case "recurse":
      return mergeRecurse(a, b, mergeLists);
    case "overwrite":
      return mergeOverwrite(a, b, mergeLists);
    case "none":
      return mergeRecurse(a, b);
    case "aggregate":
      if (!aggregateWarned) {
        aggregateWarned = true;
        log.warning("The aggregate merge strategy (yamlex) is not supported by brine; merging recursively");
      }
      return mergeRecurse(a, b, mergeLists);
    default:
      log.warning(`Unknown merging strategy '${s}', fallback to recurse`);
      return mergeRecurse(a, b);
  }
}

/** `salt.utils.data.traverse_dict_and_list(data, key, default, delimiter)`. */
export function traverse(data: unknown, key: string | string[], dflt: unknown, delimiter = ":"): unknown {
  let ptr = data;
  const parts = typeof key === "string" ? key.split(delimiter) : key;
  for (const each of parts) {
    if (Array.isArray(ptr)) {
      const list: unknown[] = ptr;
      const idx = /^-?\d+$/.test(each) ? Number(each) : null;
      let found = false;
      for (const emb of list) {
        if (isDict(emb) && Object.prototype.hasOwnProperty.call(emb, each)) {
          ptr = emb[each];
          found = true;
          break;
        }
      }
      if (!found) {
        if (idx === null) return dflt;
        const i = idx < 0 ? list.length + idx : idx;
        if (i < 0 || i >= list.length) return dflt;
        ptr = list[i];
      }
    } else if (isDict(ptr)) {
      if (!Object.prototype.hasOwnProperty.call(ptr, each)) return dflt;
      ptr = ptr[each];
    } else {
      return dflt;
    }
  }
  return ptr;
}
