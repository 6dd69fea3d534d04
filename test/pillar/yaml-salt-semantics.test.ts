/**
 * The yaml renderer reads YAML as Salt's SaltYamlSafeLoader (PyYAML, YAML 1.1) does, and the `yaml`
 * filter writes flow style: the scalars where YAML 1.1, PyYAML and YAML 1.2 parsers disagree, merge
 * keys, repeated keys, and error lines.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { dumpYaml, loadYaml, YamlError } from "../../src/lib/render/yaml.js";

describe("Salt YAML", () => {
  test("booleans are PyYAML's: yes/no/on/off in three casings, but not y/n", () => {
    assert.deepEqual(loadYaml("a: yes\nb: No\nc: ON\nd: off\ne: y\nf: n\ng: True\n"), { a: true, b: false, c: true, d: false, e: "y", f: "n", g: true });
  });

  test("a leading-zero integer keeps its digits (Salt's file-mode rule); 08 stays a string", () => {
    assert.deepEqual(loadYaml("mode: 0755\nzip: 08540\nneg: -0755\n"), { mode: 755, zip: "08540", neg: -493 });
  });

  test("hex, binary, underscores and sexagesimal integers", () => {
    assert.deepEqual(loadYaml("h: 0x1F\nb: 0b101\nu: 1_000\ns: 190:20:30\n"), { h: 31, b: 5, u: 1000, s: 685230 });
  });

  test("floats need a dot; 1e3 is a string", () => {
    assert.deepEqual(loadYaml("a: 1.5\nb: 1e3\nc: 1.0e+3\nd: .inf\n"), { a: 1.5, b: "1e3", c: 1000, d: Infinity });
  });

  test("timestamps stay strings; null spellings are null", () => {
    assert.deepEqual(loadYaml("d: 2024-01-02\nt: 2024-01-02 10:00:00\nn1: ~\nn2: null\nn3:\n"), { d: "2024-01-02", t: "2024-01-02 10:00:00", n1: null, n2: null, n3: null });
  });

  test("merge keys", () => {
    assert.deepEqual(loadYaml("base: &b {x: 1, y: 1}\nm:\n  <<: *b\n  y: 2\n"), { base: { x: 1, y: 1 }, m: { x: 1, y: 2 } });
  });

  test("a repeated key is 'found conflicting ID' with its line", () => {
    assert.throws(() => loadYaml("a: 1\nb:\n  c: 1\n  c: 2\n"), (e: unknown) => e instanceof YamlError && /found conflicting ID 'c'/.test(e.message) && e.line === 4);
  });

  test("a syntax error carries its line", () => {
    assert.throws(() => loadYaml("a: 1\nb: [1,\nc: 2\n"), (e: unknown) => e instanceof YamlError && typeof e.line === "number");
  });

  test("an empty document is null (the renderer turns it into {})", () => {
    assert.equal(loadYaml("# only a comment\n"), null);
  });

  test("the yaml filter writes one-line flow style, quoting what would read back differently", () => {
    assert.equal(dumpYaml({ a: [1, "x"], b: { c: null } }), "{a: [1, x], b: {c: null}}");
    assert.equal(dumpYaml({ s: "yes", n: "n", v: "0755" }), '{s: "yes", n: n, v: "0755"}');
    assert.equal(dumpYaml("plain"), "plain");
    assert.deepEqual(loadYaml(`x: ${dumpYaml({ s: "yes", v: "0755", l: ["on"] })}`), { x: { s: "yes", v: "0755", l: ["on"] } });
  });
});
