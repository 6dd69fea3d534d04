/**
 * Orchestration SLS rendering on the master (src/runners/orchestrate/sls.ts) and what the compiler makes of it:
 * includes (relative and absolute), extend, exclude, dotted state keys, file-order `order` numbers (included
 * files first), Jinja with the render context, and Salt's messages for a missing SLS or a bad include.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { StateTree } from "../../src/runners/orchestrate/sls.js";
import { type Running } from "../../src/runners/orchestrate/compiler.js";
import { callHigh } from "../../src/runners/orchestrate/chunk-runner.js";
import { stateRuntime, type OrchestrateIO } from "../../src/runners/orchestrate/states.js";
import { writeFiles } from "./helpers.js";

function tree(files: Record<string, string>): { cfg: MasterConfig; done: () => void } {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-orch-sls-"));
  writeFiles(root, files);
  return { cfg: { ...masterDefaults(), file_roots: { base: [root] } }, done: () => rmSync(root, { recursive: true, force: true }) };
}

test("include, extend, exclude and order: included states first, extended arguments, excluded ids gone", async () => {
  const t = tree({
    "orch/main.sls": "include:\n  - .common\n  - other\n\nextend:\n  shared:\n    test.succeed_without_changes:\n      - comment: extended\n\nexclude:\n  - id: unwanted\n\nmine:\n  test.nop:\n    - require:\n      - test: shared\n",
    "orch/common.sls": "shared:\n  test.succeed_without_changes:\n    - comment: plain\n",
    "other.sls": "{% for n in ['a', 'b'] %}\nfrom_{{ n }}:\n  test.nop: []\n{% endfor %}\nunwanted:\n  test.fail_without_changes: []\n",
  });
  try {
    const { high, errors } = await new StateTree(t.cfg).render("base", ["orch.main"], { context: { pillar: {}, grains: {}, salt: {}, opts: {} } });
    assert.deepEqual(errors, []);
    assert.deepEqual(high.shared, { test: [{ comment: "plain" }, "succeed_without_changes", { order: 10000 }], __sls__: "orch.common", __env__: "base", __sls_included_from__: ["orch.main"] });
    assert.deepEqual((high.mine as Record<string, unknown[]>).test!.at(-1), { order: 10004 });
    const rt = stateRuntime({} as OrchestrateIO, { test: false, failhard: false });
    const r = (await callHigh(high, rt)) as Running;
    assert.deepEqual(Object.keys(r).sort(), ["test_|-from_a_|-from_a_|-nop", "test_|-from_b_|-from_b_|-nop", "test_|-mine_|-mine_|-nop", "test_|-shared_|-shared_|-succeed_without_changes"]);
    assert.equal(r["test_|-shared_|-shared_|-succeed_without_changes"]!.comment, "extended");
    assert.equal(r["test_|-shared_|-shared_|-succeed_without_changes"]!.__run_num__, 0);
  } finally {
    t.done();
  }
});

test("a missing SLS, a missing include and a render error are Salt's messages", async () => {
  const t = tree({ "orch/bad.sls": "include:\n  - nothere\nx:\n  test.nop: []\n", "orch/broken.sls": "{{ pillar['missing']['deeper'] }}\n", "orch/runs.sls": "{% set up = salt['saltutil.runner']('manage.up') %}\n" });
  try {
    const st = new StateTree(t.cfg);
    const ctx = { context: { pillar: {}, grains: {}, salt: {}, opts: {} } };
    assert.deepEqual((await st.render("base", ["orch.none"], ctx)).errors, ["No matching sls found for 'orch.none' in env 'base'"]);
    assert.deepEqual((await st.render("base", ["orch.bad"], ctx)).errors, ["Specified SLS nothere in saltenv base is not available on the salt master or through a configured fileserver"]);
    const broken = (await st.render("base", ["orch.broken"], ctx)).errors;
    assert.equal(broken.length, 1);
    assert.match(broken[0]!, /^Rendering SLS 'base:orch.broken' failed: /);
    const { makeSaltFuncs } = await import("../../src/lib/render/salt-funcs.js");
    const runs = (await st.render("base", ["orch.runs"], { context: { salt: makeSaltFuncs({ renders: "an orchestration SLS", id: "m", grains: {}, pillar: {}, opts: {} }) } })).errors;
    assert.match(runs[0]!, /salt function 'saltutil.runner' is not available when brine renders an orchestration SLS/);
  } finally {
    t.done();
  }
});
