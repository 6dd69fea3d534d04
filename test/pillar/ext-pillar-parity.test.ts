/**
 * ext_pillar parity with the Python master: the same configuration (test/fixtures/ext-pillar/master-extra.yaml:
 * cmd_json with %s, an unknown module, cmd_yaml, file_tree with nodegroups, file_tree with template: True,
 * a cmd_json whose output does not parse) and the same trees give the pillar Salt 3007 gave minion a1
 * (salt-3007-pillar-items.json), except the `_errors` line brine adds for the unknown module.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { configureLogging } from "../../src/shared/log.js";
import { PillarCompiler } from "../../src/lib/pillar/compile.js";
import { loadYaml } from "../../src/lib/render/yaml.js";
import { fixture, tempRoot, writeTree } from "../fileserver/helpers.js";

configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });

test("cmd_json, cmd_yaml and file_tree give the pillar the Python master gave (golden capture)", async () => {
  const root = tempRoot("brine-extp-");
  writeTree(root, {
    "srv/pillar/top.sls": "base:\n  '*':\n    - common\n",
    "srv/pillar/common.sls": "from_sls: 1\nshared: sls\nlist: [a]\n",
    "ft/hosts/a1/app/port": "8080\n",
    "ft/hosts/a1/motd": "hello\n",
    "ft/nodegroups/webs/role": "web\n",
    "ft/nodegroups/webs/motd": "group motd\n",
    "ft2/hosts/a1/tmpl": '{{ grains["id"] }}-rendered',
    "ft2/hosts/a1/tmpl2": '#!jinja\n{{ grains["id"] }}-shebang',
    "ft2/hosts/a1/plain": "plain\n",
  });
  mkdirSync(path.join(root, "ft", "hosts", "a1", "emptydir"));
  const extra = loadYaml(readFileSync(fixture("ext-pillar", "master-extra.yaml"), "utf8").split("@ROOT@").join(root)) as Partial<MasterConfig>;
  const c = new PillarCompiler({ ...masterDefaults(), pillar_roots: { base: [path.join(root, "srv", "pillar")] }, ...extra } as MasterConfig);
  const pillar = await c.compile({ id: "a1", grains: { id: "a1" } });
  const errors = pillar._errors;
  delete pillar._errors;
  const asJson = JSON.parse(JSON.stringify(pillar, (_k, v) => (v && v.type === "Buffer" ? Buffer.from(v.data).toString() : v)));
  const golden = JSON.parse(readFileSync(fixture("ext-pillar", "salt-3007-pillar-items.json"), "utf8")).a1;
  assert.deepEqual(asJson, golden);
  assert.deepEqual(errors, ["Specified ext_pillar interface no_such_module is unavailable (brine's ext_pillar modules: cmd_json, cmd_yaml, file_tree, git)"]);
});

test("ext_pillar_first with pillar_merge_lists: the pillar the Python master gave (golden capture)", async () => {
  const root = tempRoot("brine-extp-");
  writeTree(root, {
    "top.sls": "base:\n  '*':\n    - common\n",
    "common.sls": "shared: sls\nlist: [a, c]\nseen: {{ pillar.get('color', 'none') }}\nseen2: {{ salt['pillar.get']('color', 'none') }}\n",
  });
  const extra = loadYaml(readFileSync(fixture("ext-pillar", "master-extra-first.yaml"), "utf8")) as Partial<MasterConfig>;
  const c = new PillarCompiler({ ...masterDefaults(), pillar_roots: { base: [root] }, ...extra } as MasterConfig);
  const golden = JSON.parse(readFileSync(fixture("ext-pillar", "salt-3007-pillar-items-first.json"), "utf8")).a1;
  assert.deepEqual(await c.compile({ id: "a1", grains: { id: "a1" } }), golden);
});
