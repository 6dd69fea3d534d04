/**
 * Includes and merging as Salt does them: nested includes, relative (`.x`) includes from plain and
 * init.sls files, glob includes, include cycles, `pillar_includes_override_sls`; the merge strategies
 * (`smart` = recurse, `recurse`, `overwrite`, `list`, `none`) and `pillar_merge_lists`, both on
 * dictupdate.merge directly and across SLS files compiled for a minion (one end to end through a master).
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { configureLogging } from "../../src/shared/log.js";
import { PillarCompiler } from "../../src/lib/pillar/compile.js";
import { merge } from "../../src/lib/pillar/merge.js";
import { minion, pillarOf, startFsMaster, tempRoot, writeTree } from "../fileserver/helpers.js";

configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });

const TREE = {
  "top.sls": "base:\n  '*':\n    - first\n    - second\n",
  "first.sls": "settings:\n  a: 1\n  nested: {x: 1, y: 1}\nlist: [1, 2]\nonly_first: true\n",
  "second.sls": "settings:\n  b: 2\n  nested: {y: 2}\nlist: [2, 3]\n",
};

function compilerFor(files: Record<string, string>, extra: Partial<MasterConfig> = {}): PillarCompiler {
  const root = tempRoot("brine-pm-");
  writeTree(root, files);
  return new PillarCompiler({ ...masterDefaults(), pillar_roots: { base: [root] }, ...extra });
}

const compile = (c: PillarCompiler, id = "m1") => c.compile({ id, grains: {} });

describe("merge strategies (dictupdate.merge)", () => {
  const a = () => ({ k: { x: 1, l: [1, 2] }, keep: 1 });
  const b = () => ({ k: { y: 2, l: [2, 3] } });

  test("recurse merges dicts and replaces lists", () => {
    assert.deepEqual(merge(a(), b(), "recurse"), { k: { x: 1, y: 2, l: [2, 3] }, keep: 1 });
  });

  test("smart is recurse for the yaml renderer", () => {
    assert.deepEqual(merge(a(), b(), "smart", "jinja|yaml"), merge(a(), b(), "recurse"));
  });

  test("merge_lists appends the items the old list lacks", () => {
    assert.deepEqual(merge(a(), b(), "recurse", "yaml", true), { k: { x: 1, y: 2, l: [1, 2, 3] }, keep: 1 });
  });

  test("overwrite replaces top-level keys wholesale", () => {
    assert.deepEqual(merge(a(), b(), "overwrite"), { k: { y: 2, l: [2, 3] }, keep: 1 });
  });

  test("list pairs the values of shared keys", () => {
    assert.deepEqual(merge(a(), b(), "list"), { k: [{ x: 1, l: [1, 2] }, { y: 2, l: [2, 3] }], keep: 1 });
  });

  test("none merges like recurse", () => {
    assert.deepEqual(merge(a(), b(), "none"), merge(a(), b(), "recurse"));
  });

  test("the first argument is not modified by recurse", () => {
    const x = a();
    merge(x, b(), "recurse");
    assert.deepEqual(x, a());
  });
});

describe("merging across SLS files of one minion", () => {
  test("smart (default): later SLS wins per key, dicts merge deeply, lists are replaced", async () => {
    const p = await compile(compilerFor(TREE));
    assert.deepEqual(p, { settings: { a: 1, b: 2, nested: { x: 1, y: 2 } }, list: [2, 3], only_first: true });
  });

  test("pillar_merge_lists: lists are merged without duplicates", async () => {
    const p = await compile(compilerFor(TREE, { pillar_merge_lists: true }));
    assert.deepEqual(p.list, [1, 2, 3]);
  });

  test("overwrite: a later SLS replaces a whole top-level key", async () => {
    const p = await compile(compilerFor(TREE, { pillar_source_merging_strategy: "overwrite" }));
    assert.deepEqual(p.settings, { b: 2, nested: { y: 2 } });
    assert.equal(p.only_first, true);
  });
});

describe("includes", () => {
  test("nested includes; the including file's values win over its includes", async () => {
    const c = compilerFor({
      "top.sls": "base:\n  '*':\n    - app\n",
      "app/init.sls": "include:\n  - app.db\napp: {name: web, port: 80}\n",
      "app/db.sls": "include:\n  - common\napp: {port: 5432, db: pg}\n",
      "common.sls": "app: {owner: ops}\ncommon: true\n",
    });
    assert.deepEqual(await compile(c), { app: { owner: "ops", port: 80, db: "pg", name: "web" }, common: true });
  });

  test("relative includes resolve against the file's package (plain file and init.sls)", async () => {
    const c = compilerFor({
      "top.sls": "base:\n  '*':\n    - svc.api\n    - pkg\n",
      "svc/api.sls": "include:\n  - .shared\napi: 1\n",
      "svc/shared.sls": "shared_from_svc: 1\n",
      "pkg/init.sls": "include:\n  - .inner\npkg: 1\n",
      "pkg/inner.sls": "pkg_inner: 1\n",
    });
    assert.deepEqual(await compile(c), { shared_from_svc: 1, api: 1, pkg_inner: 1, pkg: 1 });
  });

  test("an include glob pulls every matching SLS", async () => {
    const c = compilerFor({
      "top.sls": "base:\n  '*':\n    - all\n",
      "all.sls": "include:\n  - parts.*\n",
      "parts/a.sls": "a: 1\n",
      "parts/b.sls": "b: 2\n",
    });
    assert.deepEqual(await compile(c), { a: 1, b: 2 });
  });

  test("an include cycle terminates", async () => {
    const c = compilerFor({
      "top.sls": "base:\n  '*':\n    - ping\n",
      "ping.sls": "include:\n  - pong\nping: 1\n",
      "pong.sls": "include:\n  - ping\npong: 1\n",
    });
    const p = await compile(c);
    assert.equal(p.ping, 1);
    assert.equal(p.pong, 1);
  });

  test("pillar_includes_override_sls: included data wins over the including file", async () => {
    const files = {
      "top.sls": "base:\n  '*':\n    - main\n",
      "main.sls": "include:\n  - extra\nvalue: main\n",
      "extra.sls": "value: extra\n",
    };
    assert.equal((await compile(compilerFor(files))).value, "main");
    assert.equal((await compile(compilerFor(files, { pillar_includes_override_sls: true }))).value, "extra");
  });

  test("a missing include is an error listed in _errors; the rest still renders", async () => {
    const c = compilerFor({ "top.sls": "base:\n  '*':\n    - main\n", "main.sls": "include:\n  - nothere\nok: 1\n" });
    const p = await compile(c);
    assert.equal(p.ok, 1);
    assert.deepEqual(p._errors, ["Specified SLS 'nothere' in environment 'base' is not available on the salt master"]);
  });
});

describe("merging through a running master", () => {
  test("pillar_merge_lists applies to the pillar a test minion receives", async () => {
    const dir = tempRoot("brine-pm-");
    writeTree(path.join(dir, "srv", "pillar"), TREE);
    const tm = await startFsMaster({ pillar_merge_lists: true }, dir);
    const m = await minion(tm, "merge1", 0);
    try {
      const p = (await pillarOf(m)) as Record<string, unknown>;
      assert.deepEqual(p.list, [1, 2, 3]);
      assert.deepEqual(p.settings, { a: 1, b: 2, nested: { x: 1, y: 2 } });
    } finally {
      await m.stop();
      await tm.stop();
    }
  });
});
