/**
 * Render errors reach the minion as Salt's do: a line in the pillar's `_errors` (Salt's safe wording by
 * default, the full error naming the file and line with `pillar_safe_render_error: False`), while every
 * other SLS still contributes its data. Covers undefined variables, Jinja syntax errors, YAML errors,
 * a repeated key, a `raise()`, a non-dict SLS, an unknown renderer and a broken top file.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { configureLogging } from "../../src/shared/log.js";
import { PillarCompiler } from "../../src/lib/pillar/compile.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { TestMaster } from "../helpers/master.js";
import { minion, pillarOf, startFsMaster, tempRoot, writeTree } from "../fileserver/helpers.js";

configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });

const BROKEN = {
  "top.sls": "base:\n  '*':\n    - good\n    - undefined_var\n    - bad_syntax\n    - bad_yaml\n    - dup_key\n    - raises\n    - not_dict\n    - other_renderer\n    - also_good\n",
  "good.sls": "good: 1\n",
  "undefined_var.sls": "a: 1\nb: {{ nope }}\n",
  "bad_syntax.sls": "a: 1\n{% if %}\n",
  "bad_yaml.sls": "a: [1, 2\nb: 3\n",
  "dup_key.sls": "same: 1\nsame: 2\n",
  "raises.sls": "{{ raise('custom check failed') }}\n",
  "not_dict.sls": "- just\n- a list\n",
  "other_renderer.sls": "#!py\ndef run():\n    return {}\n",
  "also_good.sls": "also_good: 2\n",
};

async function compileWith(files: Record<string, string>, extra: Partial<MasterConfig> = {}) {
  const root = tempRoot("brine-perr-");
  writeTree(root, files);
  return { root, pillar: await new PillarCompiler({ ...masterDefaults(), pillar_roots: { base: [root] }, ...extra }).compile({ id: "m1", grains: {} }) };
}

describe("pillar render errors", () => {
  test("one broken SLS does not break the others' pillar", async () => {
    const { pillar } = await compileWith(BROKEN);
    assert.equal(pillar.good, 1);
    assert.equal(pillar.also_good, 2);
  });

  test("by default the minion gets Salt's safe message for each failed SLS", async () => {
    const { pillar } = await compileWith(BROKEN);
    const errors = pillar._errors as string[];
    for (const sls of ["undefined_var", "bad_syntax", "bad_yaml", "dup_key", "raises", "other_renderer"]) {
      assert.ok(errors.includes(`Rendering SLS '${sls}' failed. Please see master log for details.`), sls);
    }
    assert.ok(errors.includes("SLS 'not_dict' does not render to a dictionary"));
  });

  test("with pillar_safe_render_error: False, an undefined variable names the variable, file and line", async () => {
    const { root, pillar } = await compileWith(BROKEN, { pillar_safe_render_error: false });
    const e = (pillar._errors as string[]).find((x) => x.startsWith("Rendering SLS 'undefined_var'"))!;
    assert.match(e, /Jinja variable 'nope' is undefined; line 2 of /);
    assert.ok(e.includes(path.join(root, "undefined_var.sls")));
    assert.match(e, /b: \{\{ nope \}\}    <======================/);
  });

  test("a Jinja syntax error names the file and line", async () => {
    const { pillar } = await compileWith(BROKEN, { pillar_safe_render_error: false });
    const e = (pillar._errors as string[]).find((x) => x.startsWith("Rendering SLS 'bad_syntax'"))!;
    assert.match(e, /Jinja syntax error: .*; line 2 of .*bad_syntax\.sls/);
  });

  test("a YAML error names the file and line", async () => {
    const { pillar } = await compileWith(BROKEN, { pillar_safe_render_error: false });
    const e = (pillar._errors as string[]).find((x) => x.startsWith("Rendering SLS 'bad_yaml'"))!;
    assert.match(e, /YAML error: .*; line \d+ of .*bad_yaml\.sls/);
  });

  test("a repeated key is Salt's conflicting ID error", async () => {
    const { pillar } = await compileWith(BROKEN, { pillar_safe_render_error: false });
    const e = (pillar._errors as string[]).find((x) => x.startsWith("Rendering SLS 'dup_key'"))!;
    assert.match(e, /found conflicting ID 'same'; line 2 of /);
  });

  test("raise() in a template fails the SLS with its message", async () => {
    const { pillar } = await compileWith(BROKEN, { pillar_safe_render_error: false });
    const e = (pillar._errors as string[]).find((x) => x.startsWith("Rendering SLS 'raises'"))!;
    assert.match(e, /custom check failed; line 1 of /);
  });

  test("an unsupported renderer is named", async () => {
    const { pillar } = await compileWith(BROKEN, { pillar_safe_render_error: false });
    const e = (pillar._errors as string[]).find((x) => x.startsWith("Rendering SLS 'other_renderer'"))!;
    assert.match(e, /The renderer "py" is not available in brine/);
  });

  test("a broken top file is reported as Salt's primary top file error", async () => {
    const { pillar } = await compileWith({ "top.sls": "base:\n  '*':\n    - {{ nope }}\n", "x.sls": "x: 1\n" });
    const errors = pillar._errors as string[];
    assert.equal(errors.length, 1);
    assert.match(errors[0]!, /^Rendering Primary Top file failed, render error:\nJinja variable 'nope' is undefined; line 3 of .*top\.sls/);
  });

  test("a top file that is not a mapping of targets is reported", async () => {
    const { pillar } = await compileWith({ "top.sls": "base:\n  - a\n" });
    assert.deepEqual(pillar._errors, ["Error encountered while rendering pillar top file."]);
  });
});

describe("pillar render errors through a running master", () => {
  let tm: TestMaster;
  let m: TestMinion;
  let logFile: string;
  before(async () => {
    const dir = tempRoot("brine-perr-");
    logFile = path.join(tempRoot("brine-perr-log-"), "master.log");
    writeTree(path.join(dir, "srv", "pillar"), BROKEN);
    tm = await startFsMaster({}, dir, logFile);
    m = await minion(tm, "errs1", 1);
  });
  after(async () => {
    await m?.stop();
    await tm?.stop();
  });

  test("the minion receives _errors next to the good data in its signed pillar", async () => {
    const p = (await pillarOf(m)) as Record<string, unknown>;
    assert.equal(p.good, 1);
    assert.equal(p.also_good, 2);
    assert.equal((p._errors as string[]).length, 7);
  });

  test("the master log holds the full error with the file and line", async () => {
    let log = "";
    for (let i = 0; i < 50 && !log.includes("Jinja variable 'nope' is undefined"); i++) {
      await new Promise((r) => setTimeout(r, 100));
      log = existsSync(logFile) ? readFileSync(logFile, "utf8") : "";
    }
    // one record is one line (src/shared/log.ts escapes line breaks): the error's second line follows as "\n"
    assert.match(log, /\[CRITICAL\].*Rendering SLS 'undefined_var' failed, render error:\\nJinja variable 'nope' is undefined; line 2 of .*undefined_var\.sls/);
  });
});
