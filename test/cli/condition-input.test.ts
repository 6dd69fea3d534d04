/**
 * Command-line arguments go out as Salt's condition_input sends them: the keyword map's `__kwarg__` marker
 * comes first (the raw outputter of a test.arg return showed `{'k': 'v', '__kwarg__': True}` where the Python
 * CLI shows `{'__kwarg__': True, 'k': 'v'}`; the minion keeps the map's order).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { conditionInput } from "../../src/lib/client/args.js";

test("key=value words become one trailing map, __kwarg__ first, then the keys in the order typed", () => {
  const out = conditionInput(["1", "two", "k=v", "n=5"]);
  assert.deepEqual(out.slice(0, 2), [1, "two"]);
  assert.deepEqual(Object.keys(out[2] as object), ["__kwarg__", "k", "n"]);
});

test("--no-parse: the named keyword arguments keep their text; the others are YAML-parsed", () => {
  const out = conditionInput(["n=5", "v=007", "l=[1]"], ["v", "l"]);
  assert.deepEqual(out, [{ __kwarg__: true, n: 5, v: "007", l: "[1]" }]);
});
