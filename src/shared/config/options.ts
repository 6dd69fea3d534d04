/**
 * Checking option values against their schema (schema.ts): the one place that decides what a value may be,
 * what it is coerced to, and how a refusal reads: BrineError("CONFIG_INVALID", "<option>: must be <what>,
 * got <value>"). The loader calls it for every declared option (adding the file the value came from); the
 * typed readers of each area call it through readOption / OptionReader for configurations built in code.
 *
 * Coercion, chosen after Salt's _validate_opts (salt/config/__init__.py), which accepts a value when the
 * option's Python type converts it (int("5") does), and after PyYAML, which Salt reads files with:
 * - integer and number options take numeric strings ("5", " 10 ", "0.5" for numbers); booleans and, for
 *   integers, fractions are refused (Salt refuses them too);
 * - boolean options take booleans only: files are parsed as YAML 1.1 like PyYAML does (load.ts), so an
 *   unquoted yes/no/on/off already is one; a string ("yes", "False": Python would take either as true)
 *   and 0/1 are refused, as Salt's type check refuses them (`auto_accept: 1` is a type error there);
 * - string options take numbers (`id: 42`, Salt's str(42)), but lists of strings do not take numbers;
 * - `null` (a key written with no value) means "not set": the default applies, unless the option takes null.
 * Salt only logs a type error and goes on with the bad value; brine stops the start.
 */
import type { TSchema } from "@sinclair/typebox";
import { BrineError } from "../errors.js";
import { checkValue, kindOf } from "./json-schema.js";
import { optionSchema, type MasterConfigDeclared, type OptionName } from "./schema.js";

type Any = Record<string, unknown>;

function isPlainMap(v: unknown): v is Any {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const NUMERIC = /^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$/;

/** The value with the coercions above applied where the schema asks for another type (else unchanged). */
export function coerce(s: TSchema, v: unknown, inList = false): unknown {
  switch (kindOf(s)) {
    case "Integer":
    case "Number":
      return typeof v === "string" && NUMERIC.test(v) ? Number(v) : v;
    case "String":
      // not inside lists and mappings: [1] for a list of strings is a mistake, not a list of "1"
      return typeof v === "number" && Number.isFinite(v) && !inList ? String(v) : v;
    case "Literal": {
      const c = (s as Any).const;
      if (typeof c === "number" && typeof v === "string" && NUMERIC.test(v)) return Number(v);
      return v;
    }
    case "Union": {
      if (checkValue(s, v)) return v;
      for (const m of (s as Any).anyOf as TSchema[]) {
        const c = coerce(m, v, inList);
        if (checkValue(m, c)) return c;
      }
      return v;
    }
    case "Array":
      return Array.isArray(v) ? v.map((x) => coerce((s as Any).items as TSchema, x, true)) : v;
    case "Record": {
      if (!isPlainMap(v)) return v;
      const [inner] = Object.values((s as Any).patternProperties as Record<string, TSchema>);
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, inner ? coerce(inner, x, true) : x]));
    }
    case "Object": {
      if (!isPlainMap(v)) return v;
      const props = (s as Any).properties as Record<string, TSchema>;
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, props[k] && x !== null && x !== undefined ? coerce(props[k], x, true) : x]));
    }
    default:
      return v;
  }
}

function noun(s: TSchema): string {
  switch (kindOf(s)) {
    case "String":
      return "strings";
    case "Integer":
      return "integers";
    case "Number":
      return "numbers";
    case "Object":
    case "Record":
      return "mappings";
    case "Union":
      return ((s as Any).anyOf as TSchema[]).map((m) => noun(m)).join(" or ");
    default:
      return "values";
  }
}

/** What a value of this schema is, as the end of "must be ...". */
export function describe(s: TSchema): string {
  const o = s as Any;
  switch (kindOf(s)) {
    case "Integer":
      return `an integer from ${o.minimum ?? "-inf"} to ${o.maximum ?? "inf"}`;
    case "Number":
      return `a number from ${o.minimum ?? "-inf"} to ${o.maximum ?? "inf"}`;
    case "Boolean":
      return "true or false";
    case "String":
      return "a string";
    case "Null":
      return "null";
    case "Literal":
      return JSON.stringify(o.const);
    case "Array":
      return `a list of ${noun(o.items as TSchema)}`;
    case "Record":
    case "Object":
      return "a mapping";
    case "Union": {
      const members = o.anyOf as TSchema[];
      const literals = members.filter((m) => kindOf(m) === "Literal");
      if (literals.length === members.length - (members.some((m) => kindOf(m) === "Null") ? 1 : 0) && literals.length > 0) {
        const list = `one of ${literals.map((m) => String((m as Any).const)).join(", ")}`;
        return literals.length < members.length ? `${list} or null` : list;
      }
      return members.map(describe).join(" or ");
    }
    default:
      return "any value";
  }
}

export function shownValue(v: unknown): string {
  let t: string;
  try {
    t = JSON.stringify(v) ?? String(v);
  } catch {
    t = String(v);
  }
  return t.length > 80 ? `${t.slice(0, 80)}…` : t;
}

/** Whether the schema takes null as a value (else null means "not set"). */
export function takesNull(s: TSchema): boolean {
  return checkValue(s, null);
}

/**
 * The value, coerced, when it fits the schema; else BrineError("CONFIG_INVALID", "<label>: must be ...,
 * got ...") naming the deepest declared key that is wrong (`rest_cherrypy.port`). `where` ends the
 * message (" (in /etc/salt/master)").
 */
export function checkOption(label: string, s: TSchema, value: unknown, where = ""): unknown {
  if (kindOf(s) === "Object" && isPlainMap(value)) {
    // a section (rest_cherrypy): each key it sets is checked on its own; a key it leaves out takes its default where read
    const props = (s as Any).properties as Record<string, TSchema>;
    const out: Any = {};
    for (const [k, x] of Object.entries(value)) {
      if (!props[k] || x === undefined) out[k] = x;
      else if (x === null && !takesNull(props[k])) continue;
      else out[k] = checkOption(`${label}.${k}`, props[k], x, where);
    }
    return out;
  }
  const v = coerce(s, value);
  if (checkValue(s, v)) return v;
  throw new BrineError("CONFIG_INVALID", `${label}: must be ${describe(s)}, got ${shownValue(value)}${where}`);
}

/** An option's default (a fresh copy), or undefined when it has none. */
export function optionDefault(name: OptionName): unknown {
  const d = (optionSchema(name) as Any | undefined)?.default;
  return d !== null && typeof d === "object" ? structuredClone(d) : d;
}

/** An integer or number option's declared bounds. */
export function optionBounds(name: OptionName): { min: number; max: number } {
  const s = optionSchema(name) as Any;
  return { min: Number(s.minimum ?? -Infinity), max: Number(s.maximum ?? Infinity) };
}

/** An option's value in `cfg`, checked and coerced; its default when absent (or null and null is not a value). */
export function readOption<K extends OptionName>(cfg: object, name: K): MasterConfigDeclared[K] {
  const s = optionSchema(name)!;
  const raw = (cfg as Any)[name];
  if (raw === undefined || (raw === null && !takesNull(s))) return optionDefault(name) as MasterConfigDeclared[K];
  return checkOption(name, s, raw) as MasterConfigDeclared[K];
}
