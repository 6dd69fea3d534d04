/**
 * gitfs against a local bare repository: branches and tags as environments (master as base), per-remote
 * root and mountpoint, first remote wins, Salt's list and find shapes, the update picked up by a running
 * fileserver without a restart (and by a master's maintenance timer), the fileserver.* runners' answers
 * (update, envs, file_list, dir_list, clear_cache, lock, clear_lock), and a test minion fetching files of a
 * gitfs environment through the request port. Workers never run git: the served trees are the updater's.
 */
import { test, describe, before } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { configureLogging } from "../../src/shared/log.js";
import { lockFile, machineId, readState, roleDir, updateRole } from "../../src/lib/fileserver/git-cache.js";
import { mkdirSync, writeFileSync } from "node:fs";
import { git } from "../../src/lib/fileserver/git-cli.js";
import { createServer } from "node:net";
import { parseRemotes, validRemoteUrl } from "../../src/lib/fileserver/git-remotes.js";
import { GitfsBackend } from "../../src/lib/fileserver/gitfs.js";
import { FileserverHandlers } from "../../src/lib/fileserver/handlers.js";
import { RootsBackend } from "../../src/lib/fileserver/roots.js";
import { fileserverRunners } from "../../src/runners/fileserver.js";
import type { RunnerContext } from "../../src/runners/context.js";
import { ask, fetchFile, minion, startFsMaster, tempRoot, writeTree } from "./helpers.js";
import { LocalRepo } from "./gitfs-helpers.js";

configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });

function config(remotes: unknown[], extra: Partial<MasterConfig> = {}): MasterConfig {
  const root = tempRoot("brine-gitfs-");
  writeTree(path.join(root, "srv"), { "roots_only.txt": "from roots\n", "shared.txt": "roots wins\n" });
  return { ...masterDefaults(), cachedir: path.join(root, "cache"), file_roots: { base: [path.join(root, "srv")] }, fileserver_backend: ["roots", "gitfs"], gitfs_remotes: remotes, ...extra } as MasterConfig;
}

const run = (ctx: Partial<RunnerContext>, fun: string, arg: unknown[] = [], kwarg: Record<string, unknown> = {}) => fileserverRunners[fun]!(ctx as RunnerContext, arg, kwarg);

describe("gitfs", () => {
  const a = new LocalRepo();
  const b = new LocalRepo();
  before(() => {
    a.commit("master", { "top.sls": "base:\n  '*':\n    - webapp\n", "webapp/init.sls": "a: 1\n", "shared.txt": "git\n", "files/run.sh": { exec: "#!/bin/sh\necho hi\n" }, "files/link.txt": { link: "../shared.txt" } });
    a.tag("v1", true);
    a.commit("dev", { "webapp/init.sls": "dev: 1\n", "devonly.txt": "dev\n" });
    b.commit("master", { "salt/one.txt": "one from b\n", "salt/sub/two.txt": "two\n", "README": "not served (outside root)\n" });
  });

  test("remote URLs are checked as Salt checks them", () => {
    assert.ok(validRemoteUrl("https://github.com/saltstack/salt.git"));
    assert.ok(validRemoteUrl("git@github.com:saltstack/salt.git"));
    assert.ok(validRemoteUrl("file:///srv/repo.git"));
    assert.ok(!validRemoteUrl("/srv/repo.git"));
    assert.ok(!validRemoteUrl("ext::sh -c touch% /tmp/pwned"));
    const p = parseRemotes(config([]), "gitfs", ["file:///x.git", { "file:///y.git": [{ nosuch: 1 }] }]);
    assert.match(p.errors[0]!, /Invalid gitfs configuration parameter 'nosuch' in remote 'file:\/\/\/y.git'/);
  });

  test("a git command that hangs (a server that never answers) is killed at its timeout", async () => {
    const server = createServer(() => undefined).listen(0, "127.0.0.1");
    await new Promise((r) => server.once("listening", r));
    const port = (server.address() as { port: number }).port;
    const t0 = Date.now();
    try {
      await assert.rejects(git(["ls-remote", `git://127.0.0.1:${port}/x.git`], { timeoutMs: 500 }), /timed out after 0.5 s/);
      assert.ok(Date.now() - t0 < 5000);
    } finally {
      server.close();
    }
  });

  test("the cache is laid out as Salt's: cachedir/gitfs/<base64 sha256 of the remote>/_ holds the clone", async () => {
    const cfg = config([a.url]);
    const r = await updateRole(cfg, "gitfs");
    assert.deepEqual(r.updated, [a.url]);
    const hash = createHash("sha256").update(a.url).digest("base64").replace(/\//g, "_");
    assert.ok(existsSync(path.join(roleDir(cfg, "gitfs"), hash, "_", ".git")));
    assert.deepEqual(Object.keys(readState(roleDir(cfg, "gitfs"))!.remotes[0]!.envs).sort(), ["base", "dev", "v1"]);
  });

  test("branches and tags are environments, master is base; roots wins for a path both have; lists are unions", async () => {
    const cfg = config([a.url, { [b.url]: [{ root: "salt" }, { mountpoint: "salt://mnt/b" }] }]);
    await updateRole(cfg, "gitfs");
    const fs = new FileserverHandlers(new RootsBackend(cfg), new GitfsBackend(cfg), ["roots", "gitfs"]);
    assert.deepEqual(fs.fileEnvs(), ["base", "dev", "v1"]);
    assert.deepEqual(await fs.fileList({ saltenv: "base" }), ["files/link.txt", "files/run.sh", "mnt/b/one.txt", "mnt/b/sub/two.txt", "roots_only.txt", "shared.txt", "top.sls", "webapp/init.sls"]);
    assert.deepEqual(await fs.dirList({ saltenv: "base" }), ["files", "mnt/b", "mnt/b/sub", "webapp"]);
    assert.deepEqual(await fs.fileListEmptydirs({ saltenv: "base" }), []);
    assert.deepEqual(await fs.symlinkList({ saltenv: "base" }), { "files/link.txt": "../shared.txt" });
    assert.deepEqual(await fs.fileList({ saltenv: "dev" }), ["devonly.txt", "files/link.txt", "files/run.sh", "shared.txt", "top.sls", "webapp/init.sls"]);
    assert.deepEqual(await fs.fileFind({ path: "shared.txt", saltenv: "base" }).then((f) => f.back), "roots");
    const found = await fs.fileFind({ path: "files/run.sh", saltenv: "base" });
    assert.equal(found.back, "gitfs");
    assert.equal(found.rel, "files/run.sh");
    assert.deepEqual(found.stat, [0o100755]);
    const [hash, stat] = await fs.fileHashAndStat({ path: "mnt/b/one.txt", saltenv: "base" });
    assert.deepEqual(hash, { hsum: createHash("sha256").update("one from b\n").digest("hex"), hash_type: "sha256" });
    assert.deepEqual(stat, [0o100644]);
    const served = await fs.serveFile({ path: "webapp/init.sls", saltenv: "dev", loc: 0 });
    assert.equal(String(served.data), "dev: 1\n");
    assert.equal(served.dest, "webapp/init.sls");
    assert.equal(String((await fs.serveFile({ path: "files/link.txt", saltenv: "base", loc: 0 })).data), "git\n", "a symlink inside the tree is followed");
    assert.deepEqual(await fs.fileFind({ path: "mnt/b/README", saltenv: "base" }), { path: "", rel: "" }, "outside the remote's root");
    assert.deepEqual(await fs.fileFind({ path: "webapp/init.sls", saltenv: "nosuch" }), { path: "", rel: "" });
  });

  test("an update is served by a running fileserver without a restart", async () => {
    const c = new LocalRepo("brine-git-upd-");
    c.commit("master", { "a.txt": "first\n" });
    const cfg = config([c.url], { fileserver_backend: ["gitfs"] });
    await updateRole(cfg, "gitfs");
    let now = 0;
    const fs = new FileserverHandlers(new RootsBackend(cfg), new GitfsBackend(cfg, () => now), ["gitfs"]);
    assert.deepEqual(await fs.fileList({ saltenv: "base" }), ["a.txt"]);
    c.commit("master", { "a.txt": "second\n", "b.txt": "new\n" });
    c.commit("feature/x", { "c.txt": "branch with a slash\n" });
    await updateRole(cfg, "gitfs");
    now += 5000;
    assert.deepEqual(await fs.fileList({ saltenv: "base" }), ["a.txt", "b.txt"]);
    assert.equal(String((await fs.serveFile({ path: "a.txt", saltenv: "base", loc: 0 })).data), "second\n");
    assert.deepEqual(fs.fileEnvs(), ["base", "feature/x"]);
    c.git(c.work, "push", "--quiet", "origin", "--delete", "feature/x");
    await updateRole(cfg, "gitfs");
    now += 5000;
    assert.deepEqual(fs.fileEnvs(), ["base"], "a deleted branch is pruned");
  });

  test("saltenv whitelist/blacklist, disable_saltenv_mapping and per-saltenv refs", async () => {
    const cfg = config([{ [a.url]: [{ saltenv_blacklist: ["v*"] }] }], { fileserver_backend: ["gitfs"] });
    await updateRole(cfg, "gitfs");
    assert.deepEqual(new GitfsBackend(cfg).envs(), ["base", "dev"]);
    const cfg2 = config([{ [a.url]: [{ disable_saltenv_mapping: true }, { saltenv: [{ prod: [{ ref: "v1" }] }] }] }], { fileserver_backend: ["gitfs"] });
    await updateRole(cfg2, "gitfs");
    const g = new GitfsBackend(cfg2);
    assert.deepEqual(g.envs(), ["base", "prod"]);
    assert.ok(await g.find("webapp/init.sls", "prod"));
  });

  test("an update lock of a process that is gone is taken over on this machine, honoured when another machine (a master sharing the cachedir) holds it", async () => {
    const cfg = config([a.url], { fileserver_backend: ["gitfs"] });
    const [remote] = parseRemotes(cfg, "gitfs", [a.url]).remotes;
    const f = lockFile(remote!);
    mkdirSync(path.dirname(f), { recursive: true });
    const deadPid = 2 ** 22 + 12345; // above pid_max's default: never a running process
    writeFileSync(f, `${deadPid}\nsome-other-machine\n`);
    assert.deepEqual((await updateRole(cfg, "gitfs")).locked, [a.url]);
    writeFileSync(f, `${deadPid}\n${machineId()}\n`);
    assert.deepEqual((await updateRole(cfg, "gitfs")).updated, [a.url]);
    assert.ok(!existsSync(f), "released after the update");
  });

  test("fallback serves any environment a remote has no ref for; all_saltenvs serves one branch for every environment", async () => {
    const cfg = config([a.url, { [b.url]: [{ root: "salt" }, { fallback: "master" }] }], { fileserver_backend: ["gitfs"] });
    await updateRole(cfg, "gitfs");
    const g = new FileserverHandlers(new RootsBackend(cfg), new GitfsBackend(cfg), ["gitfs"]);
    assert.deepEqual(g.fileEnvs(), ["base", "dev", "v1"], "fallback adds no environment to the list");
    assert.deepEqual(await g.fileList({ saltenv: "dev" }), ["devonly.txt", "files/link.txt", "files/run.sh", "one.txt", "shared.txt", "sub/two.txt", "top.sls", "webapp/init.sls"]);
    assert.deepEqual(await g.fileList({ saltenv: "anything" }), ["one.txt", "sub/two.txt"]);
    assert.equal(String((await g.serveFile({ path: "one.txt", saltenv: "anything", loc: 0 })).data), "one from b\n");
    const all = config([{ [a.url]: [{ all_saltenvs: "dev" }] }], { fileserver_backend: ["gitfs"] });
    await updateRole(all, "gitfs");
    const h = new FileserverHandlers(new RootsBackend(all), new GitfsBackend(all), ["gitfs"]);
    for (const env of ["base", "v1", "whatever"]) assert.equal(String((await h.serveFile({ path: "webapp/init.sls", saltenv: env, loc: 0 })).data), "dev: 1\n", env);
  });

  test("fileserver runners: update, envs, file_list with backend=, clear_cache, lock and clear_lock", async () => {
    const cfg = config([a.url]);
    const ctx = { cfg };
    assert.equal(await run(ctx, "fileserver.update"), true);
    assert.deepEqual(await run(ctx, "fileserver.envs"), ["base", "dev", "v1"]);
    assert.deepEqual(await run(ctx, "fileserver.envs", [], { backend: "roots" }), ["base"]);
    assert.deepEqual(await run(ctx, "fileserver.file_list", [], { backend: "git" }), ["files/link.txt", "files/run.sh", "shared.txt", "top.sls", "webapp/init.sls"]);
    assert.deepEqual(await run(ctx, "fileserver.file_list", ["dev"], { backend: "-gitfs" }), []);
    assert.deepEqual(await run(ctx, "fileserver.dir_list"), ["files", "webapp"]);
    const locked = (await run(ctx, "fileserver.lock")) as { locked: string[] };
    assert.match(locked.locked[0]!, new RegExp(`^Set update lock for gitfs remote '${a.url}' on machine_id '`));
    const skipped = await updateRole(cfg, "gitfs");
    assert.deepEqual(skipped.locked, [a.url], "a locked remote is not updated");
    const cleared = (await run(ctx, "fileserver.clear_lock")) as { cleared: string[] };
    assert.match(cleared.cleared[0]!, new RegExp(`^Removed update lock for gitfs remote '${a.url}'`));
    assert.equal(await run(ctx, "fileserver.clear_lock"), "No locks were removed");
    assert.deepEqual(await run(ctx, "fileserver.clear_cache"), { cleared: ["The gitfs fileserver cache was successfully cleared"] });
    assert.ok(!existsSync(roleDir(cfg, "gitfs")));
    assert.equal(await run(ctx, "fileserver.clear_cache", [], { backend: "roots" }), "No cache was cleared");
  });

  test("a minion fetches gitfs files through the request port; the master's timer picks up a push", async () => {
    const c = new LocalRepo("brine-git-m-");
    c.commit("master", { "hello.txt": "hello v1\n" });
    c.commit("qa", { "qa.txt": "qa env\n" });
    const tm = await startFsMaster({ fileserver_backend: ["roots", "gitfs"], gitfs_remotes: [c.url], gitfs_update_interval: 1 } as Partial<MasterConfig>);
    try {
      const m = await minion(tm, "gitfs-m1", 0);
      try {
        const deadline = Date.now() + 20_000;
        while (Date.now() < deadline && !(((await ask(m, "_file_envs")) as string[]) ?? []).includes("qa")) await new Promise((r) => setTimeout(r, 200));
        assert.deepEqual(await ask(m, "_file_envs"), ["base", "qa"]);
        assert.deepEqual(await ask(m, "_file_list", { saltenv: "qa" }), ["hello.txt", "qa.txt"]);
        assert.equal((await fetchFile(m, "hello.txt"))!.data.toString(), "hello v1\n");
        c.commit("master", { "hello.txt": "hello v2\n" });
        let got = "";
        while (Date.now() < deadline + 20_000 && got !== "hello v2\n") {
          got = (await fetchFile(m, "hello.txt"))!.data.toString();
          if (got !== "hello v2\n") await new Promise((r) => setTimeout(r, 300));
        }
        assert.equal(got, "hello v2\n");
        const h = (await ask(m, "_file_hash", { path: "hello.txt", saltenv: "base" })) as { hsum: string };
        assert.equal(h.hsum, createHash("sha256").update("hello v2\n").digest("hex"));
        assert.ok(readFileSync(path.join(tm.cfg.cachedir, "gitfs", "brine-state.json"), "utf8").includes(c.url));
      } finally {
        await m.stop();
      }
    } finally {
      await tm.stop();
    }
  });
});
