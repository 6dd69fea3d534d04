/**
 * The file list cache walks a tree once and serves later requests from memory; it notices added,
 * removed and renamed entries through directory mtimes (and inotify), and never re-walks an unchanged
 * tree. Checked on FileListCache directly (with a controlled clock and fs.watch off, so the mtime path
 * alone is proven) and end to end through `_file_list` on a running master.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { FileListCache, listEnvsMax } from "../../src/lib/fileserver/list-cache.js";
import { IgnoreRules } from "../../src/lib/fileserver/ignore.js";
import { ask, minion, startFsMaster, tempRoot, writeTree } from "./helpers.js";

function cacheFor(root: string, clock: { t: number }, watch = 0): FileListCache {
  return new FileListCache({
    roots: new Map([["base", [root]]]),
    ignore: new IgnoreRules([], []),
    followSymlinks: true,
    ignoreSymlinks: false,
    now: () => clock.t,
    watchDirsMax: watch,
    revalidateMs: 1000,
  });
}

describe("file list cache", () => {
  test("an unchanged tree is walked once however many requests come", async () => {
    const root = tempRoot();
    writeTree(root, { "a.sls": "a", "d/b.sls": "b", "d/e/c.sls": "c" });
    const clock = { t: 0 };
    const c = cacheFor(root, clock);
    for (let i = 0; i < 200; i++) {
      clock.t += 50; // revalidations happen (every 1000 ms of clock) but find nothing changed
      const l = await c.get("base");
      assert.deepEqual(l?.files, ["a.sls", "d/b.sls", "d/e/c.sls"]);
    }
    assert.equal(c.builds, 1);
  });

  test("concurrent first requests share one walk", async () => {
    const root = tempRoot();
    writeTree(root, { "x.sls": "x" });
    const c = cacheFor(root, { t: 0 });
    const all = await Promise.all(Array.from({ length: 100 }, () => c.get("base")));
    assert.ok(all.every((l) => l?.files[0] === "x.sls"));
    assert.equal(c.builds, 1);
  });

  test("a file added deep in the tree is noticed at the next validation (mtime, no inotify)", async () => {
    const root = tempRoot();
    writeTree(root, { "d/e/c.sls": "c" });
    const clock = { t: 0 };
    const c = cacheFor(root, clock);
    assert.deepEqual((await c.get("base"))?.files, ["d/e/c.sls"]);
    writeFileSync(path.join(root, "d", "e", "new.sls"), "n");
    assert.deepEqual((await c.get("base"))?.files, ["d/e/c.sls"], "inside the revalidation window the cached list is served");
    clock.t += 1001;
    assert.deepEqual((await c.get("base"))?.files, ["d/e/c.sls", "d/e/new.sls"]);
    assert.equal(c.builds, 2);
  });

  test("removed and renamed files and new directories are noticed", async () => {
    const root = tempRoot();
    writeTree(root, { "keep.sls": "k", "gone.sls": "g", "old.sls": "o" });
    const clock = { t: 0 };
    const c = cacheFor(root, clock);
    await c.get("base");
    rmSync(path.join(root, "gone.sls"));
    renameSync(path.join(root, "old.sls"), path.join(root, "new.sls"));
    mkdirSync(path.join(root, "fresh"));
    clock.t += 1001;
    const l = await c.get("base");
    assert.deepEqual(l?.files, ["keep.sls", "new.sls"]);
    assert.deepEqual(l?.emptyDirs, ["fresh"]);
  });

  test("a root that appears after the first walk is picked up", async () => {
    const parent = tempRoot();
    const root = path.join(parent, "later");
    const clock = { t: 0 };
    const c = cacheFor(root, clock);
    assert.deepEqual((await c.get("base"))?.files, []);
    writeTree(root, { "top.sls": "t" });
    clock.t += 1001;
    assert.deepEqual((await c.get("base"))?.files, ["top.sls"]);
  });

  test("with inotify on, a change is seen without waiting for the revalidation interval", async () => {
    const root = tempRoot();
    writeTree(root, { "a.sls": "a" });
    const clock = { t: 0 };
    const c = cacheFor(root, clock, 100);
    await c.get("base");
    writeFileSync(path.join(root, "b.sls"), "b");
    let files: string[] | undefined;
    for (let i = 0; i < 100; i++) {
      await new Promise((r) => setTimeout(r, 10));
      files = (await c.get("base"))?.files;
      if (files?.length === 2) break;
    }
    assert.deepEqual(files, ["a.sls", "b.sls"]);
    c.clear();
  });

  test("environments named through __env__ are kept up to listEnvsMax", async () => {
    const parent = tempRoot();
    const c = new FileListCache({
      roots: new Map([["__env__", [path.join(parent, "__env__")]]]),
      ignore: new IgnoreRules([], []),
      followSymlinks: true,
      ignoreSymlinks: false,
      watchDirsMax: 0,
    });
    for (let i = 0; i < listEnvsMax + 50; i++) await c.get(`env${i}`);
    assert.equal(c.size, listEnvsMax);
    assert.equal(await c.get("../escape"), null, "an unsafe name is no environment");
  });

  test("a symlink loop inside the root is listed once and not followed forever", async () => {
    const root = tempRoot();
    writeTree(root, { "a/f.sls": "f" });
    symlinkSync("..", path.join(root, "a", "up"));
    const l = await cacheFor(root, { t: 0 }).get("base");
    assert.deepEqual(l?.files, ["a/f.sls"]);
    assert.deepEqual(l?.dirs, ["a", "a/up"]);
    assert.deepEqual(l?.links, { "a/up": ".." });
  });

  test("an unknown environment has no list", async () => {
    const c = cacheFor(tempRoot(), { t: 0 });
    assert.equal(await c.get("nosuch"), null);
  });
});

describe("_file_list on a running master notices a new file", () => {
  test("a file written after the first _file_list appears in a later one", async () => {
    const dir = tempRoot();
    const root = path.join(dir, "srv", "salt");
    writeTree(root, { "top.sls": "base: {}\n" });
    const tm = await startFsMaster({}, dir);
    const m = await minion(tm, "lists1", 3);
    try {
      assert.deepEqual(await ask(m, "_file_list", { saltenv: "base", prefix: "" }), ["top.sls"]);
      writeTree(root, { "added/state.sls": "x: {}\n" });
      let files: unknown;
      const deadline = Date.now() + 3000;
      while (Date.now() < deadline) {
        files = await ask(m, "_file_list", { saltenv: "base", prefix: "" });
        if (Array.isArray(files) && files.length === 2) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.deepEqual(files, ["added/state.sls", "top.sls"]);
    } finally {
      await m.stop();
      await tm.stop();
    }
  });
});
