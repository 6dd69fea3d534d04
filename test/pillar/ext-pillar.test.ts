/**
 * External pillars as Salt 3007 applies them (salt/pillar/__init__.py ext_pillar): cmd_json, cmd_yaml and
 * file_tree in the order of `ext_pillar`, after the SLS data or before it with `ext_pillar_first`, merged
 * with `pillar_source_merging_strategy` / `pillar_merge_lists`; an unknown module or a failing one is an
 * `_errors` line; the bounds brine puts on commands (time, shell-unsafe ids) hold.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { configureLogging } from "../../src/shared/log.js";
import { PillarCompiler } from "../../src/lib/pillar/compile.js";
import { registerExtPillar } from "../../src/lib/pillar/ext-pillar.js";
import { shlexSplit } from "../../src/lib/pillar/ext/cmd.js";
import { tempRoot, writeTree } from "../fileserver/helpers.js";

configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });

function compiler(extra: Partial<MasterConfig>, sls: Record<string, string> = { "top.sls": "base:\n  '*':\n    - common\n", "common.sls": "from_sls: 1\nshared: sls\nlist: [a]\n" }): PillarCompiler {
  const root = tempRoot("brine-ext-");
  writeTree(path.join(root, "pillar"), sls);
  return new PillarCompiler({ ...masterDefaults(), pillar_roots: { base: [path.join(root, "pillar")] }, ...extra } as MasterConfig);
}

/** A script printing its argv as JSON, for checking how arguments reach the command. */
function argvScript(): string {
  const p = path.join(tempRoot("brine-ext-bin-"), "argv.sh");
  writeFileSync(p, '#!/bin/sh\nprintf \'{"argc": %d, "first": "%s"}\' "$#" "$1"\n');
  chmodSync(p, 0o755);
  return p;
}

describe("ext_pillar", () => {
  test("cmd_json runs after the SLS by default: its data wins, lists are replaced, %s is the minion id", async () => {
    const c = compiler({ ext_pillar: [{ cmd_json: `echo '{"shared": "ext", "list": ["b"], "who": "%s"}'` }] });
    assert.deepEqual(await c.compile({ id: "web1", grains: {} }), { from_sls: 1, shared: "ext", list: ["b"], who: "web1" });
  });

  test("ext_pillar_first: the SLS data wins, and SLS templates see the external data as pillar", async () => {
    const c = compiler(
      { ext_pillar_first: true, ext_pillar: [{ cmd_json: `echo '{"shared": "ext", "color": "blue"}'` }] },
      { "top.sls": "base:\n  '*':\n    - common\n", "common.sls": "shared: sls\nseen: {{ pillar.get('color', 'none') }}\n" },
    );
    assert.deepEqual(await c.compile({ id: "m", grains: {} }), { shared: "sls", color: "blue", seen: "blue" });
  });

  test("pillar_merge_lists merges the external list into the SLS list", async () => {
    const c = compiler({ pillar_merge_lists: true, ext_pillar: [{ cmd_json: `echo '{"list": ["b", "a"]}'` }] });
    assert.deepEqual((await c.compile({ id: "m", grains: {} })).list, ["a", "b"]);
  });

  test("several modules apply in order, each seeing the pillar so far; the overwrite strategy applies to them", async () => {
    const seen: unknown[] = [];
    registerExtPillar("test_probe", { run: (ctx, args) => (seen.push({ ...ctx.pillar }), { probe: args[0] }) });
    const c = compiler({
      pillar_source_merging_strategy: "overwrite",
      ext_pillar: [{ cmd_json: `echo '{"step": 1, "nested": {"a": 1}}'` }, { test_probe: "two" }, { cmd_yaml: "printf 'step: 3\\nnested:\\n  b: 2\\n'" }],
    });
    const p = await c.compile({ id: "m", grains: {} });
    assert.deepEqual(p, { from_sls: 1, shared: "sls", list: ["a"], step: 3, nested: { b: 2 }, probe: "two" });
    assert.deepEqual(seen, [{ from_sls: 1, shared: "sls", list: ["a"], step: 1, nested: { a: 1 } }]);
  });

  test("an unknown module is an _errors line and a log line; the other modules still apply", async () => {
    const c = compiler({ ext_pillar: [{ no_such_module: { x: 1 } }, { cmd_json: `echo '{"ok": true}'` }] });
    const p = await c.compile({ id: "m", grains: {} });
    assert.equal(p.ok, true);
    assert.equal((p._errors as string[]).length, 1);
    assert.match((p._errors as string[])[0]!, /^Specified ext_pillar interface no_such_module is unavailable/);
  });

  test("a malformed ext_pillar (not a list of mappings) is an _errors line, as in Salt", async () => {
    const p = await compiler({ ext_pillar: ["cmd_json"] }).compile({ id: "m", grains: {} });
    assert.deepEqual(p._errors, ['The "ext_pillar" option is malformed']);
  });

  test("a module that throws gives 'Failed to load ext_pillar <name>: …'", async () => {
    registerExtPillar("test_throws", { run: () => { throw new Error("boom"); } });
    const p = await compiler({ ext_pillar: [{ test_throws: null }] }).compile({ id: "m", grains: {} });
    assert.deepEqual(p._errors, ["Failed to load ext_pillar test_throws: boom"]);
  });

  test("cmd_json output that does not parse adds nothing and no _errors line (Salt only logs it)", async () => {
    const p = await compiler({ ext_pillar: [{ cmd_json: "echo not json" }, { cmd_json: "/nonexistent/cmd" }] }).compile({ id: "m", grains: {} });
    assert.deepEqual(p, { from_sls: 1, shared: "sls", list: ["a"] });
  });

  test("cmd_json: the minion id is substituted inside one argument and never splits into more", async () => {
    const script = argvScript();
    const c = compiler({ ext_pillar: [{ cmd_json: `${script} %s` }] });
    assert.deepEqual(await c.compile({ id: "a b;c", grains: {}, ext: true }).then((p) => [p.argc, p.first]), [1, "a b;c"]);
  });

  test("cmd_yaml runs through the shell, but refuses an id the shell would interpret", async () => {
    const c = compiler({ ext_pillar: [{ cmd_yaml: "echo 'host: %s'; echo 'shell: ok'" }] });
    const ok = await c.compile({ id: "web-1.example.com", grains: {} });
    assert.equal(ok.host, "web-1.example.com");
    assert.equal(ok.shell, "ok");
    const bad = await c.compile({ id: "x$(touch /tmp/brine-pwned)", grains: {} });
    assert.equal(bad.host, undefined);
    assert.match((bad._errors as string[])[0]!, /^Failed to load ext_pillar cmd_yaml: cmd_yaml: the minion id .* has characters a shell would interpret/);
  });

  test("a command past brine_ext_pillar_cmd_timeout is killed and reported in _errors", async () => {
    const t0 = Date.now();
    const p = await compiler({ brine_ext_pillar_cmd_timeout: 0.3, ext_pillar: [{ cmd_yaml: "sleep 5; echo 'late: 1'" }] }).compile({ id: "m", grains: {} });
    assert.ok(Date.now() - t0 < 3000);
    assert.match((p._errors as string[])[0]!, /did not finish within 0.3 s/);
    assert.equal(p.late, undefined);
  });

  test("shlexSplit follows Python's shlex.split", () => {
    assert.deepEqual(shlexSplit(`a 'b c' "d \\" e" f\\ g ''`), ["a", "b c", 'd " e', "f g", ""]);
    assert.throws(() => shlexSplit("a 'b"), /No closing quotation/);
  });
});

describe("ext_pillar file_tree", () => {
  function tree(): string {
    const root = tempRoot("brine-ft-");
    writeTree(root, {
      "hosts/web1/app/port": "8080\n",
      "hosts/web1/motd": "hello\n",
      "hosts/web1/conf.d/keep.conf": "keep me\n",
      "hosts/web1/tmpl": "{{ grains['id'] }}-rendered",
      "hosts/db1/role": "db\n",
      "nodegroups/webs/role": "web\n",
      "nodegroups/webs/motd": "group motd\n",
      "nodegroups/others/role": "other\n",
    });
    mkdirSync(path.join(root, "hosts", "web1", "emptydir"), { recursive: true });
    symlinkSync(path.join(root, "hosts", "db1"), path.join(root, "hosts", "web1", "linked"));
    return root;
  }

  test("hosts/<id> files become keys (bytes, one trailing newline dropped), nodegroup data underneath, links to directories not followed", async () => {
    const root = tree();
    const c = compiler({ nodegroups: { webs: "web*", others: "db*" }, ext_pillar: [{ file_tree: { root_dir: root } }] }, { "top.sls": "base: {}\n" });
    const p = await c.compile({ id: "web1", grains: {} });
    const text = (v: unknown) => (Buffer.isBuffer(v) ? v.toString() : v);
    assert.equal(text(p.role), "web");
    assert.equal(text(p.motd), "hello");
    assert.ok(Buffer.isBuffer(p.motd));
    assert.deepEqual(Object.keys(p).sort(), ["app", "conf.d", "emptydir", "linked", "motd", "role", "tmpl"]);
    assert.equal(text((p.app as Record<string, unknown>).port), "8080");
    assert.deepEqual(p.emptydir, {});
    assert.deepEqual(p.linked, {});
    assert.equal(text(p.tmpl), "{{ grains['id'] }}-rendered", "not rendered without template: True");
  });

  test("keep_newline globs, follow_dir_links and template: True", async () => {
    const root = tree();
    const c = compiler({ ext_pillar: [{ file_tree: { root_dir: root, keep_newline: ["conf.d/*"], follow_dir_links: true, template: true, render_default: "jinja" } }] }, { "top.sls": "base: {}\n" });
    const p = await c.compile({ id: "web1", grains: { id: "web1" } });
    assert.equal((p["conf.d"] as Record<string, unknown>)["keep.conf"], "keep me\n");
    assert.equal(p.motd, "hello");
    assert.equal(p.tmpl, "web1-rendered");
    assert.equal((p.linked as Record<string, unknown>).role, "db");
  });

  test("a missing root_dir or an id with no directory adds nothing; '..' as an id is refused", async () => {
    const root = tree();
    const c = compiler({ ext_pillar: [{ file_tree: { root_dir: root } }, { file_tree: { root_dir: "/nonexistent" } }] }, { "top.sls": "base: {}\n" });
    assert.deepEqual(await c.compile({ id: "nobody", grains: {} }), {});
    const dots = await c.compile({ id: "..", grains: {} });
    assert.match((dots._errors as string[])[0]!, /cannot name a hosts directory/);
  });
});

describe("ext_pillar git (git_pillar)", () => {
  test("each remote's branch is a pillar tree with its own top file; __env__ follows pillarenv; updates are seen", async () => {
    const { LocalRepo } = await import("../fileserver/gitfs-helpers.js");
    const { updateRole } = await import("../../src/lib/fileserver/git-cache.js");
    const r = new LocalRepo("brine-gp-");
    r.commit("master", { "top.sls": "base:\n  '*':\n    - common\n", "common.sls": "git_common: master\n{% if grains['id'] == 'web1' %}web: true{% endif %}\n" });
    r.commit("dev", { "top.sls": "dev:\n  '*':\n    - devdata\n", "devdata.sls": "git_dev: yes-dev\n" });
    const root = tempRoot("brine-gp-cache-");
    const cfg = {
      ...masterDefaults(),
      cachedir: path.join(root, "cache"),
      pillar_roots: { base: [path.join(root, "pillar")] },
      ext_pillar: [{ git: [`master ${r.url}`, { [`__env__ ${r.url}`]: [{ name: "envrepo" }] }] }],
    } as MasterConfig;
    const c = new PillarCompiler(cfg);
    const before = await c.compile({ id: "web1", grains: { id: "web1" } });
    assert.equal(before.git_common, undefined, "nothing before the first update");
    await updateRole(cfg, "git_pillar");
    await new Promise((res) => setTimeout(res, 1100)); // the state file is looked at once a second
    assert.deepEqual(await c.compile({ id: "web1", grains: { id: "web1" } }), { git_common: "master", web: true });
    assert.deepEqual(await c.compile({ id: "db1", grains: { id: "db1" }, pillarenv: "dev" }), { git_dev: "yes-dev" });
    r.commit("master", { "common.sls": "git_common: updated\n" });
    await updateRole(cfg, "git_pillar");
    await new Promise((res) => setTimeout(res, 1100));
    assert.deepEqual(await c.compile({ id: "db1", grains: { id: "db1" } }), { git_common: "updated" });
  });
});

test("salt-run git_pillar.update answers per remote: True for new commits, None for nothing new, and names a repo that is not configured", async () => {
  const { LocalRepo } = await import("../fileserver/gitfs-helpers.js");
  const { fileserverRunners } = await import("../../src/runners/fileserver.js");
  const r = new LocalRepo("brine-gpu-");
  r.commit("master", { "top.sls": "base: {}\n" });
  const cfg = { ...masterDefaults(), cachedir: path.join(tempRoot("brine-gpu-c-"), "cache"), ext_pillar: [{ git: [`master ${r.url}`] }] } as MasterConfig;
  const update = (kwarg: Record<string, unknown> = {}) => fileserverRunners["git_pillar.update"]!({ cfg } as never, [], kwarg);
  assert.deepEqual(await update(), { [`master ${r.url}`]: true });
  assert.deepEqual(await update(), { [`master ${r.url}`]: null });
  r.commit("master", { "x.sls": "x: 1\n" });
  assert.deepEqual(await update({ repo: r.url }), { [`master ${r.url}`]: true });
  await assert.rejects(update({ branch: "nosuch" }), /Specified git branch\/repo not found in ext_pillar config/);
});

test("git_pillar: a remote whose branch does not exist checks out its fallback", async () => {
  const { LocalRepo } = await import("../fileserver/gitfs-helpers.js");
  const { updateRole } = await import("../../src/lib/fileserver/git-cache.js");
  const r = new LocalRepo("brine-gpf-");
  r.commit("master", { "top.sls": "nosuch:\n  '*':\n    - fb\n", "fb.sls": "from_fallback: true\n" });
  const root = tempRoot("brine-gpf-c-");
  const cfg = { ...masterDefaults(), cachedir: path.join(root, "cache"), pillar_roots: { base: [path.join(root, "p")] }, ext_pillar: [{ git: [{ [`nosuch ${r.url}`]: [{ fallback: "master" }] }] }] } as MasterConfig;
  await updateRole(cfg, "git_pillar");
  assert.deepEqual(await new PillarCompiler(cfg).compile({ id: "m", grains: {} }), { from_fallback: true });
});
