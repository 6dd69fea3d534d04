/**
 * Jinja as Salt's pillar templates use it, on the nunjucks engine with Salt's semantics: the context
 * variables (grains, pillar, opts, saltenv, sls, slspath/tpldir…), Python value printing, Python
 * methods, loops and conditionals, the common Jinja and Salt filters and tests, `salt[...]` functions,
 * imports of macros and YAML, `do`, `load_yaml`, and the sandbox (no reaching JS prototypes).
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { configureLogging } from "../../src/shared/log.js";
import { PillarCompiler } from "../../src/lib/pillar/compile.js";
import { JinjaEnv } from "../../src/lib/render/jinja.js";
import { makeSaltFuncs } from "../../src/lib/render/salt-funcs.js";
import { tempRoot, writeTree } from "../fileserver/helpers.js";

configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });

const GRAINS = { id: "web01", os: "Debian", os_family: "Debian", num_cpus: 4, roles: ["web", "edge"], ip4_interfaces: { eth0: ["10.0.0.5"] } };

function env(files: Record<string, string>): JinjaEnv {
  // the signature stands for the file's stat: it changes with the content
  return new JinjaEnv((name) => (name in files ? { path: `/srv/pillar/${name}`, sig: createHash("sha1").update(files[name]!).digest("hex"), read: () => files[name]! } : null));
}
const ctx = (extra: Record<string, unknown> = {}) => ({
  grains: GRAINS,
  pillar: {},
  opts: { id: "web01" },
  saltenv: "base",
  sls: "t",
  salt: makeSaltFuncs({ id: "web01", grains: GRAINS, pillar: { app: { port: 8080 } }, opts: { file_roots: {} } }),
  ...extra,
});
const render = (src: string, extra: Record<string, unknown> = {}, files: Record<string, string> = {}) => env({ ...files, "t.sls": src }).render("t.sls", ctx(extra));

describe("Jinja with Salt semantics", () => {
  test("values print as Python prints them", () => {
    assert.equal(render("{{ [1, 'a', none, true, false] }} {{ {'k': 'v'} }} {{ None }} {{ True }}"), "[1, 'a', None, True, False] {'k': 'v'} None True");
  });

  test("a for loop over a list, over dict items, over a dict's keys, with loop variables", () => {
    assert.equal(render("{% for r in grains.roles %}{{ loop.index }}:{{ r }}{% if not loop.last %},{% endif %}{% endfor %}"), "1:web,2:edge");
    assert.equal(render("{% for k, v in grains.ip4_interfaces.items() %}{{ k }}={{ v[0] }}{% endfor %}"), "eth0=10.0.0.5");
    assert.equal(render("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}"), "ab");
    assert.equal(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  });

  test("conditionals, membership, tests and arithmetic", () => {
    assert.equal(render("{% if grains['os_family'] in ['Debian', 'Ubuntu'] and grains.num_cpus > 2 %}big{% endif %}"), "big");
    assert.equal(render("{{ 'web' in grains.roles }} {{ 'x' not in 'abc' }} {{ 7 is odd }} {{ none is none }} {{ grains is mapping }}"), "True True True True True");
    assert.equal(render("{{ 7 // 2 }} {{ 2 ** 10 }} {{ 'a' ~ 1 }}"), "3 1024 a1");
  });

  test("Jinja scoping: a set inside a loop stays in the loop; namespace() carries values out", () => {
    assert.equal(render("{% set found = false %}{% for x in [1] %}{% set found = true %}{% endfor %}{{ found }}"), "False");
    assert.equal(render("{% set ns = namespace(n=0) %}{% for x in [1, 2, 3] %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}"), "6");
    assert.equal(render("{% set a = 5 %}{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}"), "35");
  });

  test("loop controls and loop.cycle", () => {
    assert.equal(render("{% for x in [1, 2, 3, 4] %}{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %}"), "13");
    assert.equal(render("{% for x in [1, 2, 3] %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "1");
    assert.equal(render("{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
  });

  test("Python operators: list +, string and list *, % formatting, tuples, nested dict literals", () => {
    assert.equal(render("{{ [1] + [2] }} {{ '-' * 3 }} {{ [0] * 2 }} {{ 7 % 3 }} {{ '%s=%s' % ('k', 'v') }} {{ ('a', 1) }}"), "[1, 2] --- [0, 0] 1 k=v ['a', 1]");
    assert.equal(render("{% set d = {'a': {'b': {'c': 1}}} %}{{ d.a.b.c }} {{ {'x': {'y': 2}}.x.y }} {{ {'a': 1} == {'a': 1} }}"), "1 2 True");
  });

  test("Python methods on strings, lists and dicts", () => {
    assert.equal(render("{{ 'a,b, c'.split(',') }} {{ '  x '.strip() }} {{ 'a-b-c'.replace('-', '+') }} {{ 'web01'.startswith('web') }} {{ 'Ab'.upper() }}"), "['a', 'b', ' c'] x a+b+c True AB");
    assert.equal(render("{% set l = [3, 1] %}{% do l.append(2) %}{% do l.extend([5]) %}{{ l }} {{ l | sort }}"), "[3, 1, 2, 5] [1, 2, 3, 5]");
    assert.equal(render("{% set d = {'a': 1} %}{% do d.update({'b': 2}) %}{{ d.get('b') }} {{ d.get('z', 'dflt') }} {{ d.keys() | list }} {{ d | length }}"), "2 dflt ['a', 'b'] 2");
    assert.equal(render("{{ 'abcdef'[1:3] }} {{ [1, 2, 3][-1] }} {{ [1, 2, 3][::-1] }}"), "bc 3 [3, 2, 1]");
    assert.equal(render("{{ '{}-{name}'.format(1, name='n') }} {{ '%s:%03d' | format('p', 7) }}"), "1-n p:007");
  });

  test("serializing filters: yaml, json, tojson, python", () => {
    assert.equal(render("{{ {'b': [1, 2], 'a': 'x'} | yaml }}"), "{b: [1, 2], a: x}");
    assert.equal(render("{{ {'b': [1, 2], 'a': 'x'} | json }}"), '{"a": "x", "b": [1, 2]}');
    assert.equal(render("{{ {'b': 1} | tojson }} {{ 'x' | python }}"), "{\"b\": 1} 'x'");
    assert.equal(render("{{ {'k': {'n': 1}} | yaml(False) }}"), "k:\n  n: 1");
  });

  test("common filters: default, join, selectattr, map, unique, min/max, regex, to_bool, first/last, dictsort", () => {
    const users = [
      { name: "a", admin: true, shell: "bash" },
      { name: "b", admin: false, shell: "zsh" },
      { name: "c", admin: true, shell: "bash" },
    ];
    assert.equal(render("{{ missing | default('d') }} {{ none | default('x') }} {{ '' | default('e', true) }}"), "d None e");
    assert.equal(render("{{ users | selectattr('admin') | map(attribute='name') | join(',') }}", { users }), "a,c");
    assert.equal(render("{{ users | selectattr('shell', 'equalto', 'zsh') | map(attribute='name') | list }}", { users }), "['b']");
    assert.equal(render("{{ users | rejectattr('admin') | list | length }}", { users }), "1");
    assert.equal(render("{{ users | map(attribute='shell') | unique | list }} {{ [3, 1, 2] | min }} {{ [3, 1, 2] | max }}", { users }), "['bash', 'zsh'] 1 3");
    assert.equal(render("{{ 'web01' | regex_replace('\\\\d+', 'N') }} {{ 'web01' | regex_search('(\\\\d+)') }} {{ 'yes' | to_bool }}"), "webN ['01'] True");
    assert.equal(render("{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ {'b': 1, 'a': 2} | dictsort | first }}"), "1 3 ['a', 2]");
    assert.equal(render("{{ 'x' | sha256 }}"), "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881");
  });

  test("salt[...] functions for grains, pillar and config, in both spellings", () => {
    assert.equal(render("{{ salt['grains.get']('ip4_interfaces:eth0:0') }} {{ salt.grains.get('nope', 'd') }} {{ salt['pillar.get']('app:port') }}"), "10.0.0.5 d 8080");
    assert.equal(render("{{ salt['grains.filter_by']({'Debian': {'pkg': 'apache2'}, 'RedHat': {'pkg': 'httpd'}}).pkg }}"), "apache2");
    assert.equal(render("{{ salt['defaults.merge']({'a': 1}, {'b': 2}) }}"), "{'a': 1, 'b': 2}");
  });

  test("a salt function brine does not offer is a clear error", () => {
    assert.throws(() => render("{{ salt['cmd.run']('id') }}"), /salt function 'cmd\.run' is not available/);
  });

  test("macros from another file, imported YAML, load_yaml blocks, set blocks", () => {
    const files = {
      "macros.jinja": "{% macro port(n) %}{{ n + 1000 }}{% endmacro %}",
      "defaults.yaml": "port: 80\nos: {{ grains.os }}\n",
    };
    assert.equal(render("{% from 'macros.jinja' import port %}{{ port(80) }}", {}, files), "1080");
    assert.equal(render("{% import_yaml 'defaults.yaml' as d %}{{ d.port }}-{{ d.os }}", {}, files), "80-Debian");
    assert.equal(render("{% load_yaml as y %}\na: [1, 2]\n{% endload %}{{ y.a }}"), "[1, 2]");
    assert.equal(render("{% set block %}x{{ 1 }}{% endset %}{{ block }}"), "x1");
    assert.equal(render("{% include 'macros.jinja' %}ok", {}, files), "ok");
  });

  test("printing or looking into an undefined variable is an error (StrictUndefined)", () => {
    assert.throws(() => render("{{ nope }}"), /Jinja variable 'nope' is undefined; line 1/);
    assert.throws(() => render("\n\n{{ nope.deeper }}"), /is undefined .*; line 3/);
    assert.equal(render("{{ nope is defined }} {{ grains.nope is defined }}"), "False False");
  });

  test("the sandbox: no JS prototype reaches a template", () => {
    assert.equal(render("{{ grains.constructor is defined }} {{ ''.constructor is defined }} {{ [].__proto__ is defined }}"), "False False False");
    assert.throws(() => render("{{ ''.constructor.constructor('return process')() }}"));
  });
});

describe("pillar context variables", () => {
  test("grains, opts, saltenv, sls, slspath/tpldir and no pillar on the master, as in Salt", async () => {
    const root = tempRoot("brine-pj-");
    writeTree(root, {
      "top.sls": "base:\n  '*':\n    - app.conf\n",
      "app/conf.sls": [
        "ctx:",
        "  id: {{ grains.id }}",
        "  opts_id: {{ opts.id }}",
        "  saltenv: {{ saltenv }}",
        "  sls: {{ sls }}",
        "  slspath: {{ slspath }}",
        "  tpldir: {{ tpldir }}",
        "  tplfile: {{ tplfile }}",
        "  pillar_empty: {{ pillar == {} }}",
        "",
      ].join("\n"),
    });
    const p = await new PillarCompiler({ ...masterDefaults(), pillar_roots: { base: [root] } }).compile({ id: "min-9", grains: { os: "Debian" } });
    assert.deepEqual(p.ctx, { id: "min-9", opts_id: "min-9", saltenv: "base", sls: "app.conf", slspath: "app", tpldir: "app", tplfile: "app/conf.sls", pillar_empty: true });
  });

  test("a template edited on disk is re-rendered on the next compile", async () => {
    const root = tempRoot("brine-pj-");
    writeTree(root, { "top.sls": "base:\n  '*':\n    - v\n", "v.sls": "v: {{ 1 }}\n" });
    const c = new PillarCompiler({ ...masterDefaults(), pillar_roots: { base: [root] } });
    assert.equal((await c.compile({ id: "m", grains: {} })).v, 1);
    writeTree(root, { "v.sls": "v: {{ 1 + 1 }}   \n" });
    assert.equal((await c.compile({ id: "m", grains: {} })).v, 2);
  });
});
