/**
 * Every way out of a file root is "missing": absolute paths, `..`, NUL, symlinks whose real target
 * leaves the root, unknown environments (by load or by `?saltenv=`), unsafe `__env__` names and
 * non-string paths. Each case is checked on `_file_hash` (""), `_file_find` ({path:"", rel:""}) and
 * `_serve_file` ({data:"", dest:""}), and nothing outside the root is ever returned.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, symlinkSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { TestMaster } from "../helpers/master.js";
import { ask, minion, startFsMaster, tempRoot, writeTree } from "./helpers.js";

const SECRET = "top secret outside the root";

describe("fileserver: paths outside a root are missing", () => {
  let tm: TestMaster;
  let m: TestMinion;
  let root: string;

  before(async () => {
    const dir = tempRoot();
    root = path.join(dir, "srv", "salt");
    writeTree(dir, { "secret.txt": SECRET, "srv/envs/qa/env.txt": "qa env file" });
    writeTree(root, { "ok.txt": "fine", "sub/inner.txt": "inner" });
    symlinkSync(path.join(dir, "secret.txt"), path.join(root, "escape-file"));
    symlinkSync("../../secret.txt", path.join(root, "escape-relative"));
    symlinkSync(dir, path.join(root, "escape-dir"));
    symlinkSync("ok.txt", path.join(root, "inside-link"));
    mkdirSync(path.join(root, "emptydir"));
    tm = await startFsMaster({ file_roots: { base: [root], __env__: [path.join(dir, "srv", "envs", "__env__")] } }, dir);
    m = await minion(tm, "trav1", 0);
  });
  after(async () => {
    await m?.stop();
    await tm?.stop();
  });

  async function assertMissing(p: unknown, saltenv: unknown = "base"): Promise<void> {
    assert.equal(await ask(m, "_file_hash", { path: p, saltenv }), "", "_file_hash");
    assert.deepEqual(await ask(m, "_file_find", { path: p, saltenv }), { path: "", rel: "" }, "_file_find");
    assert.deepEqual(await ask(m, "_serve_file", { path: p, saltenv, loc: 0 }), { data: "", dest: "" }, "_serve_file");
    assert.deepEqual(await ask(m, "_file_hash_and_stat", { path: p, saltenv }), ["", null], "_file_hash_and_stat");
  }

  test("control: a file inside the root and a symlink staying inside it are served", async () => {
    const r = (await ask(m, "_serve_file", { path: "ok.txt", saltenv: "base", loc: 0 })) as Record<string, unknown>;
    assert.equal(String(r.data), "fine");
    const l = (await ask(m, "_serve_file", { path: "inside-link", saltenv: "base", loc: 0 })) as Record<string, unknown>;
    assert.equal(String(l.data), "fine");
    assert.equal(l.dest, "inside-link");
  });

  test("an absolute path is missing", async () => {
    await assertMissing("/etc/passwd");
  });

  test("an absolute path to a file that is inside the root is still missing", async () => {
    await assertMissing(path.join(root, "ok.txt"));
  });

  test("a leading ../ is missing", async () => {
    await assertMissing("../secret.txt");
  });

  test("a ../ in the middle that climbs out is missing", async () => {
    await assertMissing("sub/../../secret.txt");
  });

  test("a .. that stays inside after normalisation is still missing", async () => {
    await assertMissing("sub/../ok.txt");
  });

  test("a path with a NUL byte is missing", async () => {
    await assertMissing("ok.txt\0.png");
  });

  test("a symlink to an absolute path outside the root is missing", async () => {
    await assertMissing("escape-file");
  });

  test("a relative symlink climbing out of the root is missing", async () => {
    await assertMissing("escape-relative");
  });

  test("a file below a symlinked directory outside the root is missing", async () => {
    await assertMissing("escape-dir/secret.txt");
  });

  test("an unknown environment is missing", async () => {
    await assertMissing("ok.txt", "nosuchenv");
  });

  test("an unknown environment named by a ?saltenv= suffix is missing", async () => {
    await assertMissing("ok.txt?saltenv=nosuchenv");
  });

  test("an __env__ environment name that would climb out of the root path is missing", async () => {
    await assertMissing("secret.txt", "..");
    await assertMissing("env.txt", "../envs/qa");
  });

  test("control: a safe __env__ environment name is served from its substituted root", async () => {
    const r = (await ask(m, "_serve_file", { path: "env.txt", saltenv: "qa", loc: 0 })) as Record<string, unknown>;
    assert.equal(String(r.data), "qa env file");
  });

  test("a path that is not a string is missing", async () => {
    await assertMissing(42);
    await assertMissing(["ok.txt"]);
  });

  test("an empty path and a directory are missing", async () => {
    await assertMissing("");
    await assertMissing("sub");
    await assertMissing("emptydir");
  });

  test("a negative or non-integer loc serves nothing", async () => {
    assert.deepEqual(await ask(m, "_serve_file", { path: "ok.txt", saltenv: "base", loc: -1 }), { data: "", dest: "" });
    assert.deepEqual(await ask(m, "_serve_file", { path: "ok.txt", saltenv: "base", loc: "0" }), { data: "", dest: "" });
  });

  test("lists leave out links that escape the root and everything below them", async () => {
    const files = (await ask(m, "_file_list", { saltenv: "base", prefix: "" })) as string[];
    assert.deepEqual(files, ["inside-link", "ok.txt", "sub/inner.txt"]);
    const links = (await ask(m, "_symlink_list", { saltenv: "base", prefix: "" })) as Record<string, string>;
    assert.deepEqual(links, { "inside-link": "ok.txt" });
    const dirs = (await ask(m, "_dir_list", { saltenv: "base", prefix: "" })) as string[];
    assert.deepEqual(dirs, ["emptydir", "sub"]);
    assert.ok(!JSON.stringify(files).includes("secret"));
  });
});
