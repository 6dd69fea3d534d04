/**
 * The `salt` mapping of execution functions templates call (`salt['pillar.get'](…)`,
 * `salt.grains.get(…)`). The Python master loads every execution module and runs them on the master
 * host; brine offers the data functions pillar templates use and refuses the rest with a clear error
 * (nothing here runs commands or reads files).
 */
import { bindArgs } from "./args.js";
import { FilterError } from "./filters.js";
import { isDict, merge, traverse, update, deepCopy } from "../pillar/merge.js";
import { fnmatch } from "../targeting/fnmatch.js";
import { minionMatches } from "../targeting/index.js";

export interface SaltFuncContext {
  /** what is being rendered, for the refusal of a function brine does not offer (default "pillar") */
  renders?: string;
  id: string;
  grains: Record<string, unknown>;
  pillar: Record<string, unknown>;
  opts: Record<string, unknown>;
}

type F = (...args: unknown[]) => unknown;

/** Salt's `grains.filter_by` / `salt.utils.data.filter_by`. */
function filterBy(ctx: SaltFuncContext, source: Record<string, unknown>, args: unknown[], defaultKey: string): unknown {
  const { bound } = bindArgs(args, ["lookup_dict", "grain", "merge", "default", "base"], {
    grain: defaultKey,
    merge: null,
    default: "default",
    base: null,
  });
  const lookup = bound.lookup_dict;
  if (!isDict(lookup)) throw new FilterError("filter_by: lookup_dict must be a dictionary");
  let value = traverse(source, String(bound.grain), null);
  const candidates = Array.isArray(value) ? value : [value];
  let ret: unknown;
  for (const v of candidates) {
    for (const key of Object.keys(lookup)) {
      if (v !== null && v !== undefined && fnmatch(String(v), key)) {
        ret = lookup[key];
        break;
      }
    }
    if (ret !== undefined) break;
  }
  if (ret === undefined) ret = lookup[String(bound.default)];
  value = ret;
  if (bound.base !== null && bound.base !== undefined && Object.prototype.hasOwnProperty.call(lookup, String(bound.base))) {
    const base = lookup[String(bound.base)];
    if (isDict(base)) value = isDict(value) ? merge(base, value) : base;
  }
  if (isDict(bound.merge)) value = isDict(value) ? merge(value, bound.merge) : bound.merge;
  return value === undefined ? null : value;
}

export function makeSaltFuncs(ctx: SaltFuncContext): Record<string, unknown> {
  const get = (source: () => Record<string, unknown>) => (...args: unknown[]) => {
    const { bound } = bindArgs(args, ["key", "default", "merge", "delimiter"], { default: "", delimiter: ":" });
    return traverse(source(), String(bound.key), bound.default, String(bound.delimiter));
  };
  const configGet = (...args: unknown[]) => {
    const { bound } = bindArgs(args, ["key", "default", "delimiter"], { default: "", delimiter: ":" });
    const miss = Symbol("miss");
    for (const src of [ctx.opts, ctx.grains, ctx.pillar]) {
      const v = traverse(src, String(bound.key), miss, String(bound.delimiter));
      if (v !== miss) return v;
    }
    return bound.default;
  };
  const funcs: Record<string, F> = {
    "grains.get": get(() => ctx.grains),
    "grains.item": (...keys: unknown[]) => Object.fromEntries(keys.filter((k) => typeof k === "string").map((k) => [k, traverse(ctx.grains, k as string, "")])),
    "grains.items": () => ctx.grains,
    "grains.has_value": (key: unknown) => Boolean(traverse(ctx.grains, String(key), null)),
    "grains.filter_by": (...args: unknown[]) => filterBy(ctx, ctx.grains, args, "os_family"),
    "pillar.get": get(() => ctx.pillar),
    "pillar.item": (...keys: unknown[]) => Object.fromEntries(keys.filter((k) => typeof k === "string").map((k) => [k, traverse(ctx.pillar, k as string, "")])),
    "pillar.items": () => ctx.pillar,
    "pillar.filter_by": (...args: unknown[]) => filterBy(ctx, ctx.pillar, args, "role"),
    "config.get": configGet,
    "config.option": configGet,
    "defaults.merge": (...args: unknown[]) => {
      const { bound } = bindArgs(args, ["dest", "src", "merge_lists", "in_place"], { merge_lists: false, in_place: true });
      if (!isDict(bound.dest) || !isDict(bound.src)) throw new FilterError("defaults.merge: dest and src must be dictionaries");
      const dest = bound.in_place ? bound.dest : deepCopy(bound.dest);
      return update(dest, bound.src, Boolean(bound.merge_lists));
    },
    "defaults.deepcopy": (v: unknown) => deepCopy(v),
    "defaults.update": (...args: unknown[]) => {
      const { bound } = bindArgs(args, ["dest", "defaults", "merge_lists"], { merge_lists: true });
      if (!isDict(bound.dest) || !isDict(bound.defaults)) throw new FilterError("defaults.update: dest and defaults must be dictionaries");
      return update(deepCopy(bound.defaults), bound.dest, Boolean(bound.merge_lists));
    },
    "slsutil.merge": (...args: unknown[]) => {
      const { bound } = bindArgs(args, ["obj_a", "obj_b", "strategy", "renderer", "merge_lists"], { strategy: "smart", renderer: "yaml", merge_lists: false });
      if (!isDict(bound.obj_a) || !isDict(bound.obj_b)) throw new FilterError("slsutil.merge: arguments must be dictionaries");
      return merge(bound.obj_a, bound.obj_b, String(bound.strategy), String(bound.renderer), Boolean(bound.merge_lists));
    },
    "match.glob": (tgt: unknown) => minionMatches({ tgt, tgt_type: "glob" }, { id: ctx.id, grains: ctx.grains, pillar: ctx.pillar }),
    "match.pcre": (tgt: unknown) => minionMatches({ tgt, tgt_type: "pcre" }, { id: ctx.id, grains: ctx.grains, pillar: ctx.pillar }),
    "match.list": (tgt: unknown) => minionMatches({ tgt, tgt_type: "list" }, { id: ctx.id, grains: ctx.grains, pillar: ctx.pillar }),
    "match.grain": (tgt: unknown) => minionMatches({ tgt, tgt_type: "grain" }, { id: ctx.id, grains: ctx.grains, pillar: ctx.pillar }),
    "match.compound": (tgt: unknown) => minionMatches({ tgt, tgt_type: "compound" }, { id: ctx.id, grains: ctx.grains, pillar: ctx.pillar }),
    "test.true": () => true,
    "test.false": () => false,
    "test.ping": () => true,
  };
  const out: Record<string, unknown> = { ...funcs };
  // attribute style: salt.grains.get(...)
  for (const [name, fn] of Object.entries(funcs)) {
    const [mod, fun] = name.split(".") as [string, string];
    const m = (out[mod] ??= {}) as Record<string, unknown>;
    m[fun] = fn;
  }
  return new Proxy(out, {
    get(target, key) {
      if (typeof key === "string" && !Object.prototype.hasOwnProperty.call(target, key) && /^\w+\.\w+$/.test(key)) {
        return () => {
          throw new FilterError(`salt function '${key}' is not available when brine renders ${ctx.renders ?? "pillar"} (see docs/DEPENDENCIES-fileserver.md)`);
        };
      }
      return Reflect.get(target, key);
    },
    has(target, key) {
      return Reflect.has(target, key);
    },
    getOwnPropertyDescriptor(target, key) {
      const d = Reflect.getOwnPropertyDescriptor(target, key);
      if (d || typeof key !== "string" || !/^\w+\.\w+$/.test(key)) return d;
      return { configurable: true, enumerable: false, writable: false, value: (target as Record<string, unknown>)[key] };
    },
  });
}
