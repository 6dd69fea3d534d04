/**
 * The configuration schema's builders and checker, without TypeBox at run time.
 *
 * schema.ts declares every option with `Type.*` calls as TypeBox's builder would take them, and TypeBox gives
 * the declarations their static types (`Static<>`, `MasterConfig`): those imports are type-only. The values
 * are built here instead: the same JSON Schema objects TypeBox's builder makes (without its Kind symbols), and
 * checked by `checkValue`, the subset of TypeBox's `Value.Check` the schema uses, with the same rules
 * (integers by Number.isInteger, numbers finite, mappings not arrays, optional keys may be undefined).
 * Loading TypeBox and building the schema with it cost every thread that read an option 0.1-0.7 s of CPU at a
 * master's start (issue 17). test/config/json-schema.test.ts holds this module to TypeBox: each builder's
 * output against TypeBox's, and `checkValue` against `Value.Check` over every declared option and fuzzed values.
 */
import type { Type as TypeBoxBuilder, TSchema } from "@sinclair/typebox";

type Json = Record<string, unknown>;

/** The builders schema.ts calls, with TypeBox's signatures (and so its static types). */
type Builder = Pick<typeof TypeBoxBuilder, "Array" | "Boolean" | "Integer" | "Literal" | "Null" | "Number" | "Object" | "Optional" | "Partial" | "Record" | "String" | "Union" | "Unknown">;

/** schemas made by Optional (a property a mapping may leave out); TypeBox marks them with a symbol */
const optionals = new WeakSet<object>();

function optional(s: Json): Json {
  const c = { ...s };
  optionals.add(c);
  return c;
}

function object(properties: Record<string, Json>, options: Json = {}): Json {
  const required = Object.keys(properties).filter((k) => !optionals.has(properties[k]!));
  return { ...options, type: "object", ...(required.length ? { required } : {}), properties };
}

export const Type: Builder = {
  Array: (items: Json, options: Json = {}) => ({ ...options, type: "array", items }),
  Boolean: (options: Json = {}) => ({ ...options, type: "boolean" }),
  Integer: (options: Json = {}) => ({ ...options, type: "integer" }),
  Literal: (value: string | number | boolean, options: Json = {}) => ({ ...options, const: value, type: typeof value }),
  Null: (options: Json = {}) => ({ ...options, type: "null" }),
  Number: (options: Json = {}) => ({ ...options, type: "number" }),
  Object: object,
  Optional: optional,
  Partial: (s: Json, options: Json = {}) => {
    const { required: _required, properties, ...rest } = s;
    const props = Object.fromEntries(Object.entries(properties as Record<string, Json>).map(([k, p]) => [k, optional(p)]));
    return { ...rest, ...options, type: "object", properties: props };
  },
  // a mapping with string keys: TypeBox's pattern for them
  Record: (_key: Json, value: Json, options: Json = {}) => ({ ...options, type: "object", patternProperties: { "^(.*)$": value } }),
  String: (options: Json = {}) => ({ ...options, type: "string" }),
  Union: (anyOf: Json[], options: Json = {}) => ({ ...options, anyOf }),
  Unknown: (options: Json = {}) => ({ ...options }),
} as unknown as Builder;

/** TypeBox's name for the kind of a schema built above (`Integer`, `Union`, `Record`, ..., `Unknown`). */
export function kindOf(s: TSchema): string {
  const o = s as Json;
  if (o.anyOf) return "Union";
  if (o.const !== undefined) return "Literal";
  switch (o.type) {
    case "integer":
      return "Integer";
    case "number":
      return "Number";
    case "boolean":
      return "Boolean";
    case "string":
      return "String";
    case "null":
      return "Null";
    case "array":
      return "Array";
    case "object":
      return o.patternProperties ? "Record" : "Object";
    default:
      return "Unknown";
  }
}

const isMap = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

function inBounds(o: Json, v: number): boolean {
  return !(
    (o.exclusiveMaximum !== undefined && !(v < (o.exclusiveMaximum as number))) ||
    (o.exclusiveMinimum !== undefined && !(v > (o.exclusiveMinimum as number))) ||
    (o.maximum !== undefined && !(v <= (o.maximum as number))) ||
    (o.minimum !== undefined && !(v >= (o.minimum as number))) ||
    (o.multipleOf !== undefined && v % (o.multipleOf as number) !== 0)
  );
}

/** Whether `v` is a value of `s` (TypeBox's Value.Check for the kinds above). */
export function checkValue(s: TSchema, v: unknown): boolean {
  const o = s as Json;
  switch (kindOf(s)) {
    case "Union":
      return (o.anyOf as TSchema[]).some((m) => checkValue(m, v));
    case "Literal":
      return v === o.const;
    case "Integer":
      return Number.isInteger(v) && inBounds(o, v as number);
    case "Number":
      return Number.isFinite(v) && inBounds(o, v as number);
    case "Boolean":
      return typeof v === "boolean";
    case "String":
      return (
        typeof v === "string" &&
        (o.minLength === undefined || v.length >= (o.minLength as number)) &&
        (o.maxLength === undefined || v.length <= (o.maxLength as number)) &&
        (o.pattern === undefined || new RegExp(o.pattern as string).test(v))
      );
    case "Null":
      return v === null;
    case "Array":
      return (
        Array.isArray(v) &&
        (o.minItems === undefined || v.length >= (o.minItems as number)) &&
        (o.maxItems === undefined || v.length <= (o.maxItems as number)) &&
        v.every((x) => checkValue(o.items as TSchema, x))
      );
    case "Record": {
      if (!isMap(v) || v instanceof Date || v instanceof Uint8Array) return false;
      const [pattern, inner] = Object.entries(o.patternProperties as Record<string, TSchema>)[0]!;
      const re = new RegExp(pattern);
      return Object.entries(v).every(([k, x]) => (re.test(k) ? checkValue(inner, x) : o.additionalProperties !== false && (!isMap(o.additionalProperties) || checkValue(o.additionalProperties as TSchema, x))));
    }
    case "Object": {
      if (!isMap(v)) return false;
      const props = o.properties as Record<string, TSchema>;
      const required = (o.required as string[] | undefined) ?? [];
      for (const [k, p] of Object.entries(props)) {
        if (required.includes(k)) {
          if (!checkValue(p, v[k]) || (kindOf(p) === "Unknown" && !(k in v))) return false;
        } else if (v[k] !== undefined && !checkValue(p, v[k])) return false;
      }
      if (o.additionalProperties === false) return Object.getOwnPropertyNames(v).every((k) => Object.hasOwn(props, k));
      if (isMap(o.additionalProperties)) return Object.getOwnPropertyNames(v).every((k) => Object.hasOwn(props, k) || checkValue(o.additionalProperties as TSchema, v[k]));
      return true;
    }
    default:
      return true;
  }
}
