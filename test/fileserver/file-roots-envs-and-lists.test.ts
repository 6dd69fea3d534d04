/**
 * Several environments with several roots each (first root holding a path wins; lists are the union),
 * `?saltenv=` in a path, every list command with Salt's prefix filter, `_file_envs`, `_master_opts`
 * (full and env_only), `_master_tops`, and a `fileserver_backend` without roots serving nothing.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, symlinkSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { TestMaster } from "../helpers/master.js";
import { ask, fetchFile, minion, startFsMaster, tempRoot, writeTree } from "./helpers.js";

describe("fileserver: environments and roots", () => {
  let tm: TestMaster;
  let m: TestMinion;

  before(async () => {
    const dir = tempRoot();
    const r = (n: string) => path.join(dir, n);
    writeTree(r("base1"), { "top.sls": "base1 top", "common/init.sls": "base1 common", "only1.sls": "1", "web/files/a.conf": "a" });
    writeTree(r("base2"), { "top.sls": "base2 top", "only2.sls": "2", "web/files/b.conf": "b" });
    writeTree(r("dev1"), { "top.sls": "dev top", "dev.sls": "dev" });
    mkdirSync(r("base2/empty/deeper"), { recursive: true });
    symlinkSync("only1.sls", r("base1/alias.sls"));
    tm = await startFsMaster({ file_roots: { base: [r("base1"), r("base2")], dev: [r("dev1")], prod: [r("missing-root")] } }, dir);
    m = await minion(tm, "envs1", 5);
  });
  after(async () => {
    await m?.stop();
    await tm?.stop();
  });

  test("_file_envs lists the configured environments sorted", async () => {
    assert.deepEqual(await ask(m, "_file_envs"), ["base", "dev", "prod"]);
  });

  test("the first root holding a path wins", async () => {
    assert.equal((await fetchFile(m, "top.sls"))?.data.toString(), "base1 top");
    assert.equal((await fetchFile(m, "only2.sls"))?.data.toString(), "2");
  });

  test("_file_find reports the winning root's path, the relative path, a 10-int stat and the backend", async () => {
    const f = (await ask(m, "_file_find", { path: "only2.sls", saltenv: "base" })) as Record<string, unknown>;
    assert.equal(f.path, path.join(tm.root, "base2", "only2.sls"));
    assert.equal(f.rel, "only2.sls");
    assert.equal(f.back, "roots");
    assert.equal((f.stat as number[]).length, 10);
    assert.equal((f.stat as number[])[6], 1, "st_size");
  });

  test("a ?saltenv= suffix picks the environment over the load's saltenv", async () => {
    const r = (await ask(m, "_serve_file", { path: "top.sls?saltenv=dev", saltenv: "base", loc: 0 })) as Record<string, unknown>;
    assert.equal(String(r.data), "dev top");
    assert.equal(r.dest, "top.sls");
    const h = (await ask(m, "_file_hash", { path: "dev.sls?saltenv=dev", saltenv: "base" })) as Record<string, unknown>;
    assert.equal(h.hash_type, "sha256");
  });

  test("_file_list is the sorted union of all roots of the environment", async () => {
    assert.deepEqual(await ask(m, "_file_list", { saltenv: "base", prefix: "" }), [
      "alias.sls",
      "common/init.sls",
      "only1.sls",
      "only2.sls",
      "top.sls",
      "web/files/a.conf",
      "web/files/b.conf",
    ]);
    assert.deepEqual(await ask(m, "_file_list", { saltenv: "dev", prefix: "" }), ["dev.sls", "top.sls"]);
  });

  test("the prefix filter strips slashes and keeps names starting with it", async () => {
    assert.deepEqual(await ask(m, "_file_list", { saltenv: "base", prefix: "/web/" }), ["web/files/a.conf", "web/files/b.conf"]);
    assert.deepEqual(await ask(m, "_file_list", { saltenv: "base", prefix: "only" }), ["only1.sls", "only2.sls"]);
  });

  test("_dir_list, _file_list_emptydirs and _symlink_list", async () => {
    assert.deepEqual(await ask(m, "_dir_list", { saltenv: "base", prefix: "" }), ["common", "empty", "empty/deeper", "web", "web/files"]);
    assert.deepEqual(await ask(m, "_file_list_emptydirs", { saltenv: "base", prefix: "" }), ["empty/deeper"]);
    assert.deepEqual(await ask(m, "_symlink_list", { saltenv: "base", prefix: "" }), { "alias.sls": "only1.sls" });
    assert.deepEqual(await ask(m, "_symlink_list", { saltenv: "base", prefix: "web" }), {});
  });

  test("an environment whose root does not exist lists nothing; an unknown one too", async () => {
    assert.deepEqual(await ask(m, "_file_list", { saltenv: "prod", prefix: "" }), []);
    assert.deepEqual(await ask(m, "_file_list", { saltenv: "nosuch", prefix: "" }), []);
    assert.deepEqual(await ask(m, "_file_list", { prefix: "" }), [], "no saltenv at all");
  });

  test("_master_opts names the environments with empty root lists; env_only keeps four keys", async () => {
    const full = (await ask(m, "_master_opts")) as Record<string, unknown>;
    assert.deepEqual(full.file_roots, { base: [], dev: [], prod: [] });
    assert.equal(full.renderer, "jinja|yaml");
    assert.equal(full.state_top, "top.sls");
    const envOnly = (await ask(m, "_master_opts", { env_only: true })) as Record<string, unknown>;
    assert.deepEqual(Object.keys(envOnly), ["file_roots", "top_file_merging_strategy", "env_order", "default_top"]);
  });

  test("_master_tops answers {} when no master_tops are configured", async () => {
    assert.deepEqual(await ask(m, "_master_tops", { opts: { id: m.id } }), {});
  });
});

describe("fileserver: a fileserver_backend without roots", () => {
  test("serves no environments and no files", async () => {
    const dir = tempRoot();
    writeTree(path.join(dir, "srv", "salt"), { "top.sls": "x" });
    const tm = await startFsMaster({ fileserver_backend: ["gitfs"] }, dir);
    const m = await minion(tm, "nobackend1", 6);
    try {
      assert.deepEqual(await ask(m, "_file_envs"), []);
      assert.equal(await ask(m, "_file_hash", { path: "top.sls", saltenv: "base" }), "");
      assert.deepEqual(await ask(m, "_file_list", { saltenv: "base", prefix: "" }), []);
      assert.deepEqual(((await ask(m, "_master_opts")) as Record<string, unknown>).file_roots, {});
    } finally {
      await m.stop();
      await tm.stop();
    }
  });
});
