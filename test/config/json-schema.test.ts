/**
 * The schema's own builders and checker (src/shared/config/json-schema.ts) against TypeBox, which brine no
 * longer loads at run time: each builder makes the JSON Schema TypeBox's makes, and `checkValue` answers as
 * TypeBox's `Value.Check` for every declared option and section key, over values at their bounds and fuzzed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Kind, Type as TB, type TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { Type, checkValue, kindOf } from "../../src/shared/config/json-schema.js";
import { ApiSectionSchema, FileEauthSchema, MasterConfigSchema, MetricsSectionSchema } from "../../src/shared/config/schema.js";

type Json = Record<string, unknown>;

/** the JSON of a schema, without TypeBox's symbols */
const plain = (s: unknown): unknown => JSON.parse(JSON.stringify(s));

test("each builder makes the JSON Schema TypeBox's builder makes, of the kind TypeBox names", () => {
  const inner = { a: Type.Integer({ minimum: 1 }), b: Type.Optional(Type.String({ description: "b" })), c: Type.Unknown() };
  const innerTB = { a: TB.Integer({ minimum: 1 }), b: TB.Optional(TB.String({ description: "b" })), c: TB.Unknown() };
  const pairs: [TSchema, TSchema][] = [
    [Type.Integer({ default: 3, minimum: 0, maximum: 9, description: "d", unit: "s" } as never), TB.Integer({ default: 3, minimum: 0, maximum: 9, description: "d", unit: "s" } as never)],
    [Type.Number({ minimum: 0.5 }), TB.Number({ minimum: 0.5 })],
    [Type.Boolean({ default: true }), TB.Boolean({ default: true })],
    [Type.String(), TB.String()],
    [Type.Null(), TB.Null()],
    [Type.Literal("x"), TB.Literal("x")],
    [Type.Literal(2048), TB.Literal(2048)],
    [Type.Union([Type.Literal("a"), Type.Null()], { default: null }), TB.Union([TB.Literal("a"), TB.Null()], { default: null })],
    [Type.Array(Type.String(), { minItems: 1, default: [] }), TB.Array(TB.String(), { minItems: 1, default: [] })],
    [Type.Record(Type.String(), Type.Array(Type.String()), { default: {} }), TB.Record(TB.String(), TB.Array(TB.String()), { default: {} })],
    [Type.Unknown({ description: "u" }), TB.Unknown({ description: "u" })],
    [Type.Object(inner, { additionalProperties: false }), TB.Object(innerTB, { additionalProperties: false })],
    [Type.Partial(Type.Object(inner, { additionalProperties: true }), { description: "p" }), TB.Partial(TB.Object(innerTB, { additionalProperties: true }), { description: "p" })],
    [Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])), TB.Optional(TB.Union([TB.String(), TB.Array(TB.String())]))],
  ];
  for (const [ours, theirs] of pairs) {
    assert.deepEqual(ours, plain(theirs));
    assert.equal(kindOf(ours), theirs[Kind]);
  }
});

/** The TypeBox schema of a declared one, made with TypeBox's builders from its JSON shape. */
function toTypeBox(s: TSchema): TSchema {
  const o = { ...(s as Json) };
  if (o.anyOf) {
    const { anyOf, ...rest } = o;
    return TB.Union((anyOf as TSchema[]).map(toTypeBox), rest);
  }
  if (o.const !== undefined) {
    const { const: c, type: _t, ...rest } = o;
    return TB.Literal(c as string, rest);
  }
  const { type, ...rest } = o;
  switch (type) {
    case "integer":
      return TB.Integer(rest);
    case "number":
      return TB.Number(rest);
    case "boolean":
      return TB.Boolean(rest);
    case "string":
      return TB.String(rest);
    case "null":
      return TB.Null(rest);
    case "array": {
      const { items, ...r } = rest;
      return TB.Array(toTypeBox(items as TSchema), r);
    }
    case "object": {
      if (rest.patternProperties) {
        const { patternProperties, ...r } = rest;
        return TB.Record(TB.String(), toTypeBox(Object.values(patternProperties as Json)[0] as TSchema), r);
      }
      const { properties, required, ...r } = rest;
      const req = (required as string[] | undefined) ?? [];
      const props = Object.fromEntries(Object.entries(properties as Record<string, TSchema>).map(([k, p]) => [k, req.includes(k) ? toTypeBox(p) : TB.Optional(toTypeBox(p))]));
      return TB.Object(props, r);
    }
    default:
      return TB.Unknown(rest);
  }
}

const DECLARED: [string, TSchema][] = [
  ...Object.entries(MasterConfigSchema.properties as Record<string, TSchema>),
  ...[ApiSectionSchema, MetricsSectionSchema, FileEauthSchema].flatMap((sec, i) => Object.entries(sec.properties as Record<string, TSchema>).map(([k, p]) => [`section${i}.${k}`, p] as [string, TSchema])),
  ["ApiSectionSchema", ApiSectionSchema],
  ["MetricsSectionSchema", MetricsSectionSchema],
  ["FileEauthSchema", FileEauthSchema],
];

/** values a schema's own shape suggests: its bounds and one past them, its literals, its default */
function nearValues(s: TSchema): unknown[] {
  const o = s as Json;
  const out: unknown[] = [o.default, null, undefined, "", "5", 5, 0, -1, 1.5, Number.NaN, Infinity, [], {}, ["a"], [1], { a: ["b"] }, { a: 1 }, true, "yes"];
  for (const b of [o.minimum, o.maximum]) if (typeof b === "number") out.push(b, b - 1, b + 1, b + 0.5, String(b));
  if (o.const !== undefined) out.push(o.const, String(o.const));
  for (const m of (o.anyOf as TSchema[] | undefined) ?? []) out.push(...nearValues(m));
  if (o.properties) {
    const props = o.properties as Record<string, TSchema>;
    for (const [k, p] of Object.entries(props)) for (const v of nearValues(p).slice(0, 8)) out.push({ [k]: v }, { ...Object.fromEntries(Object.keys(props).map((x) => [x, (props[x] as Json).default])), [k]: v });
    out.push({ unknown_key: 1 });
  }
  return out;
}

test("checkValue answers as TypeBox's Value.Check for every declared option, at its bounds and literals", () => {
  let n = 0;
  for (const [name, s] of DECLARED) {
    const tb = toTypeBox(s);
    assert.deepEqual(plain(tb), plain(s), `${name}: rebuilt with TypeBox's builders, the same schema`);
    for (const v of nearValues(s)) {
      assert.equal(checkValue(s, v), Value.Check(tb, v), `${name} with ${String(JSON.stringify(v))}`);
      n++;
    }
  }
  assert.ok(n > 5000, `${n} values`);
});

test("checkValue answers as TypeBox's Value.Check for fuzzed values of every declared option", () => {
  const pairs = DECLARED.map(([name, s]) => ({ name, s, tb: toTypeBox(s) }));
  const value = fc.oneof(fc.anything(), fc.integer(), fc.double(), fc.string(), fc.array(fc.string()), fc.dictionary(fc.string(), fc.array(fc.string())), fc.dictionary(fc.string(), fc.anything()));
  fc.assert(
    fc.property(fc.constantFrom(...pairs), value, ({ s, tb }, v) => checkValue(s, v) === Value.Check(tb, v)),
    { numRuns: 20_000 },
  );
});
