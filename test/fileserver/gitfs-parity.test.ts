/**
 * gitfs and git_pillar parity with the Python master (GitPython provider): the same repositories and
 * configuration give the answers Salt 3007 gave (test/fixtures/gitfs/salt-3007-gitfs.json) for the
 * fileserver.* and git_pillar.update runners, and for what a minion's cp.* functions read through the
 * request port (envs, file and directory lists, hash, the mode `cp.stat_file` reports, a followed
 * symlink) and its pillar.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { configureLogging } from "../../src/shared/log.js";
import { machineId } from "../../src/lib/fileserver/git-cache.js";
import { GitfsBackend } from "../../src/lib/fileserver/gitfs.js";
import { FileserverHandlers } from "../../src/lib/fileserver/handlers.js";
import { RootsBackend } from "../../src/lib/fileserver/roots.js";
import { PillarCompiler } from "../../src/lib/pillar/compile.js";
import { fileserverRunners } from "../../src/runners/fileserver.js";
import type { RunnerContext } from "../../src/runners/context.js";
import { fixture, tempRoot } from "./helpers.js";
import { LocalRepo } from "./gitfs-helpers.js";

configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });

test("fileserver.*, git_pillar.update and the minion's cp.* view equal the Python master's (golden capture)", async () => {
  const a = new LocalRepo("brine-gp-a-");
  const b = new LocalRepo("brine-gp-b-");
  const p = new LocalRepo("brine-gp-p-");
  a.commit("master", { "top.sls": "base:\n  '*':\n    - webapp\n", "webapp/init.sls": "a: 1\n", "shared.txt": "git\n", "files/run.sh": { exec: "#!/bin/sh\necho hi\n" }, "files/link.txt": { link: "../shared.txt" } });
  a.tag("v1", true);
  a.commit("dev", { "webapp/init.sls": "dev: 1\n", "devonly.txt": "dev\n" });
  b.commit("master", { "salt/one.txt": "one from b\n", "salt/sub/two.txt": "two\n", README: "x\n" });
  p.commit("master", { "top.sls": "base:\n  '*':\n    - data\n", "data.sls": "color: green\nsource: git_pillar\n" });
  const raw = readFileSync(fixture("gitfs", "salt-3007-gitfs.json"), "utf8").split("@MACHINE_ID@").join(machineId());
  // @REPOS@/<x>.git stands for the captured remote URL; ours live in three directories
  const golden = JSON.parse(raw.replace(/@REPOS@\/(a|b|p)\.git/g, (_m, x: string) => ({ a, b, p })[x as "a" | "b" | "p"].url)) as Record<string, unknown>;
  const root = tempRoot("brine-gp-");
  const cfg = {
    ...masterDefaults(),
    cachedir: path.join(root, "cache"),
    file_roots: { base: [path.join(root, "empty")] },
    pillar_roots: { base: [path.join(root, "pillar")] },
    fileserver_backend: ["roots", "gitfs"],
    gitfs_remotes: [a.url, { [b.url]: [{ root: "salt" }, { mountpoint: "salt://mnt/b" }] }],
    ext_pillar: [{ git: [`master ${p.url}`] }],
  } as MasterConfig;
  const ctx = { cfg } as RunnerContext;
  const run = (line: string) => {
    const [fun, ...words] = line.split(" ");
    const kwarg = Object.fromEntries(words.map((w) => w.split("=") as [string, string]));
    return fileserverRunners[fun!]!(ctx, [], kwarg);
  };
  for (const line of ["fileserver.update", "fileserver.envs", "fileserver.file_list", "fileserver.dir_list", "fileserver.symlink_list", "fileserver.empty_dir_list", "fileserver.file_list saltenv=dev", "fileserver.file_list backend=roots"]) {
    assert.deepEqual(await run(line), golden[line], line);
  }
  assert.deepEqual(await run("fileserver.lock"), golden["fileserver.lock"]);
  assert.deepEqual(await run("fileserver.lock"), golden["fileserver.lock (again)"]);
  assert.deepEqual(await run("fileserver.clear_lock"), golden["fileserver.clear_lock"]);
  assert.deepEqual(await run("fileserver.clear_lock"), golden["fileserver.clear_lock (again)"]);
  await run("git_pillar.update"); // the Python master's maintenance had fetched already: its first answer was None too
  assert.deepEqual(await run("git_pillar.update"), golden["git_pillar.update (again)"]);
  await assert.rejects(async () => run("git_pillar.update repo=nosuch"), /Specified git branch\/repo not found in ext_pillar config/);

  // what the minion reads through the request port
  const fs = new FileserverHandlers(new RootsBackend(cfg), new GitfsBackend(cfg), ["roots", "gitfs"]);
  const one = (k: string) => (golden[k] as Record<string, unknown>).a1;
  assert.deepEqual(fs.fileEnvs(), one("cp.envs"));
  assert.deepEqual(await fs.fileList({ saltenv: "base" }), one("cp.list_master"));
  assert.deepEqual(await fs.dirList({ saltenv: "base" }), one("cp.list_master_dirs"));
  assert.deepEqual(await fs.fileList({ saltenv: "dev" }), one("cp.list_master saltenv=dev"));
  assert.deepEqual(await fs.fileHash({ path: "mnt/b/one.txt", saltenv: "base" }), one("cp.hash_file salt://mnt/b/one.txt"));
  // cp.stat_file(octal=True): the last three octal digits of stat[0] from _file_hash_and_stat
  const mode = async (p2: string) => `0${(((await fs.fileHashAndStat({ path: p2, saltenv: "base" }))[1]![0] as number) & 0o777).toString(8)}`;
  assert.equal(await mode("files/run.sh"), one("cp.stat_file salt://files/run.sh"));
  assert.equal(await mode("shared.txt"), one("cp.stat_file salt://shared.txt"));
  assert.equal(String((await fs.serveFile({ path: "files/link.txt", saltenv: "base", loc: 0 })).data), one("cp.get_file_str salt://files/link.txt"));
  await new Promise((r) => setTimeout(r, 1100)); // git_pillar's state file is looked at once a second
  assert.deepEqual(await new PillarCompiler(cfg).compile({ id: "a1", grains: { id: "a1" } }), one("pillar.items"));

  assert.deepEqual(await run("fileserver.clear_cache"), golden["fileserver.clear_cache"]);
  assert.deepEqual(await run("fileserver.clear_cache backend=roots"), golden["fileserver.clear_cache backend=roots"]);
});
