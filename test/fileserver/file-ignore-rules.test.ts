/**
 * `file_ignore_regex` (Python re.search anywhere in the name) and `file_ignore_glob` (fnmatch of the
 * whole name) keep matching files out of every list and make them missing for find/hash/serve.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { TestMaster } from "../helpers/master.js";
import { IgnoreRules } from "../../src/lib/fileserver/ignore.js";
import { configureLogging } from "../../src/shared/log.js";
import { ask, minion, startFsMaster, tempRoot, writeTree } from "./helpers.js";

configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });

describe("ignore rules", () => {
  test("a regex matches anywhere, a glob the whole name, Python spellings work", () => {
    const r = new IgnoreRules(["/\\.git($|/)", "(?i)SECRET", "(?P<x>tmp)\\d"], ["*.swp", "*/.svn/*"]);
    assert.ok(r.ignored("a/.git/config"));
    assert.ok(r.ignored("a/.git"));
    assert.ok(r.ignored("keys/secret.pem"));
    assert.ok(r.ignored("x/tmp1"));
    assert.ok(r.ignored("state.sls.swp"));
    assert.ok(r.ignored("x/.svn/entries"));
    assert.ok(!r.ignored("a/.gitignore"));
    assert.ok(!r.ignored("state.sls"));
  });

  test("a string option is one pattern, an invalid regex is skipped", () => {
    const r = new IgnoreRules("\\.bak$", "([");
    assert.ok(r.ignored("x.bak"));
    assert.ok(!r.ignored("x.sls"));
    assert.ok(!new IgnoreRules("([", []).ignored("anything"));
  });
});

describe("fileserver: ignored files", () => {
  let tm: TestMaster;
  let m: TestMinion;

  before(async () => {
    const dir = tempRoot();
    writeTree(path.join(dir, "srv", "salt"), {
      "top.sls": "t",
      "app/init.sls": "a",
      "app/init.sls.swp": "swap",
      ".git/config": "[core]",
      "keys/secret.pem": "k",
    });
    tm = await startFsMaster({ file_ignore_regex: ["/\\.git($|/)", "^\\.git", "secret"], file_ignore_glob: ["*.swp"] }, dir);
    m = await minion(tm, "ignore1", 7);
  });
  after(async () => {
    await m?.stop();
    await tm?.stop();
  });

  test("ignored files are not listed", async () => {
    assert.deepEqual(await ask(m, "_file_list", { saltenv: "base", prefix: "" }), ["app/init.sls", "top.sls"]);
    assert.deepEqual(await ask(m, "_dir_list", { saltenv: "base", prefix: "" }), ["app", "keys"]);
  });

  test("ignored files are missing for _file_hash, _file_find and _serve_file", async () => {
    for (const p of ["app/init.sls.swp", ".git/config", "keys/secret.pem"]) {
      assert.equal(await ask(m, "_file_hash", { path: p, saltenv: "base" }), "", p);
      assert.deepEqual(await ask(m, "_file_find", { path: p, saltenv: "base" }), { path: "", rel: "" }, p);
      assert.deepEqual(await ask(m, "_serve_file", { path: p, saltenv: "base", loc: 0 }), { data: "", dest: "" }, p);
    }
  });
});
