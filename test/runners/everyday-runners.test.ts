/**
 * The runners an operator types daily (issue 20), called in a runner context over a real job cache and minion
 * data cache: each answers with Salt 3007's arguments and output shape (compared with the Python master's
 * `salt-run ... --out json` on the same data; see the report of the change that added them).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, symlinkSync } from "node:fs";
import path from "node:path";
import { runnerHarness, writeFiles } from "./helpers.js";
import { loadCustomRunner } from "../../src/runners/custom.js";
import { unifiedDiff } from "../../src/runners/survey.js";
import { versionKey } from "../../src/runners/manage.js";
import type { DataRecord, MineRecord } from "../../src/shared/sync-records.js";

const ok = (id: string, ret: unknown, extra: Record<string, unknown> = {}) => ({ id, data: { return: ret, retcode: 0, ...extra } });
const missing = (id: string) => ({ id, missing: true as const });

test("jobs.last_run prints the newest cached job (optionally by function or target) as print_job does, and False when none matches", async () => {
  const h = runnerHarness();
  try {
    await h.ctx.jobs.saveLoad("20261125100000000001", { fun: "test.ping", arg: [], tgt: "*", tgt_type: "glob", user: "root" }, ["a1", "a2"]);
    await h.ctx.jobs.saveLoad("20261125100000000002", { fun: "cmd.run", arg: ["ls"], tgt: "a1", tgt_type: "glob", user: "sam" }, ["a1"]);
    await h.ctx.jobs.saveReturn("20261125100000000002", "a1", { return: "out", retcode: 0, success: true }, false);
    const last = (await h.run("jobs.last_run")) as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(last), ["20261125100000000002"]);
    const job = last["20261125100000000002"]!;
    assert.deepEqual(Object.keys(job), ["Function", "Arguments", "Target", "Target-type", "User", "Minions", "StartTime", "Result"], "Salt's keys in Salt's order");
    assert.deepEqual(job.Result, { a1: { return: "out", retcode: 0, success: true } });
    assert.equal(job.StartTime, "2026, Nov 25 10:00:00.000002");
    const byFun = (await h.run("jobs.last_run", [], { function: "test.ping" })) as Record<string, Record<string, unknown>>;
    assert.deepEqual(Object.keys(byFun), ["20261125100000000001"]);
    assert.deepEqual(byFun["20261125100000000001"]!.Minions, ["a1", "a2"]);
    assert.deepEqual(byFun["20261125100000000001"]!.Result, {});
    assert.equal(await h.run("jobs.last_run", [], { target: "nomatch" }), false);
    assert.equal(await h.run("jobs.last_run", [], { metadata: "not a dict" }), false);
  } finally {
    await h.close();
  }
});

test("jobs.print_job of a jid with no cached load answers Salt's Error entry; exit_success is True only for a truthy return", async () => {
  const h = runnerHarness();
  try {
    assert.deepEqual(await h.run("jobs.print_job", ["20200101000000000000"]), {
      "20200101000000000000": { Error: "Cannot contact returner or no job with this jid", StartTime: "2020, Jan 01 00:00:00.000000", Result: {} },
    });
    const jid = "20261125100000000003";
    await h.ctx.jobs.saveLoad(jid, { fun: "test.retcode", arg: [], tgt: "*", tgt_type: "glob" }, ["a1", "a2", "a3", "a4"]);
    await h.ctx.jobs.saveReturn(jid, "a1", { return: true }, false);
    await h.ctx.jobs.saveReturn(jid, "a2", { return: {} }, false);
    await h.ctx.jobs.saveReturn(jid, "a3", { return: "text" }, false);
    assert.deepEqual(await h.run("jobs.exit_success", [jid]), { a1: true, a2: false, a3: true, a4: false });
  } finally {
    await h.close();
  }
});

test("manage.versions groups minions against the master's version; a silent or failing minion is False under Minion offline", async () => {
  const h = runnerHarness({
    accepted: ["new", "old", "same", "gone", "broken"],
    answers: () => [ok("old", "3006.8"), ok("same", "3007.8"), ok("new", "3007.8+8.ge717ef70a1"), { id: "broken", data: { return: "err", retcode: 1 } }, missing("gone")],
  });
  try {
    assert.deepEqual(await h.run("manage.versions"), {
      "Minion requires update": { old: "3006.8" },
      "Up to date": { same: "3007.8" },
      "Minion newer than master": { new: "3007.8+8.ge717ef70a1" },
      "Minion offline": { broken: false, gone: false },
      Master: "3007.8",
    });
    assert.equal(h.published[0]!.fun, "test.version");
    assert.ok(versionKey("3007.0rc1")! < versionKey("3007.0")!, "a release candidate is older than its release");
  } finally {
    await h.close();
  }
});

test("manage.alived, joined, allowed, present and list_state list present minions (subset, show_ip); the not_ forms list the others", async () => {
  const h = runnerHarness({ accepted: ["a1", "a2", "a3"], cfg: { brine_presence: "heard" } as never });
  try {
    h.ctx.minions.track("node-a", () => {}); // `heard` presence reads the write stamps
    await h.ctx.minions.put("a1", { grains: { ipv4: ["127.0.0.1", "10.0.0.5"] } });
    await h.ctx.minions.put("a3", { grains: { ipv4: ["10.0.0.7"] } });
    for (const n of ["alived", "joined", "allowed", "present", "reaped", "list_state"]) assert.deepEqual(await h.run(`manage.${n}`), ["a1", "a3"], n);
    for (const n of ["not_alived", "not_joined", "not_allowed", "not_present", "not_reaped", "list_not_state"]) assert.deepEqual(await h.run(`manage.${n}`), ["a2"], n);
    assert.deepEqual(await h.run("manage.alived", ["a1,a2"]), ["a1"], "subset as a comma-separated string");
    assert.deepEqual(await h.run("manage.not_alived", [], { subset: ["a1"] }), []);
    assert.deepEqual(await h.run("manage.list_state", [], { show_ip: true }), { a1: "10.0.0.5", a3: "10.0.0.7" });
  } finally {
    await h.close();
  }
});

test("cache.grains, cache.pillar and cache.mine answer per targeted minion ({} when nothing is cached), and all minions without a target", async () => {
  const h = runnerHarness({ accepted: ["web1", "web2", "db1"] });
  try {
    await h.ctx.minions.put("web1", { grains: { os: "Debian", role: "web" }, pillar: { port: 80 } });
    await h.ctx.minions.put("db1", { grains: { os: "Debian" }, pillar: {} });
    await h.ctx.minions.setMine("web1", { "test.ping": true });
    assert.deepEqual(await h.run("cache.grains", ["web*"]), { web1: { os: "Debian", role: "web" }, web2: {} });
    assert.deepEqual(await h.run("cache.grains", ["role:web"], { tgt_type: "grain" }), { web1: { os: "Debian", role: "web" }, web2: {} }, "greedy: a minion without data may match");
    assert.deepEqual(await h.run("cache.grains", ["nomatch"]), {});
    await assert.rejects(() => h.run("cache.grains") as Promise<unknown>, /missing 1 required positional argument: 'tgt'/);
    assert.deepEqual(await h.run("cache.pillar"), { web1: { port: 80 } }, "no target: every minion with a cached pillar");
    assert.deepEqual(await h.run("cache.pillar", ["db1"]), { db1: {} });
    assert.deepEqual(await h.run("cache.mine"), { web1: { "test.ping": true } });
    assert.deepEqual(await h.run("cache.mine", ["web*"]), { web1: { "test.ping": true }, web2: {} });
  } finally {
    await h.close();
  }
});

test("cache.clear_pillar keeps the grains, clear_grains keeps the pillar, clear_mine and clear_all remove the rest; no target clears nothing", async () => {
  const h = runnerHarness({ accepted: ["m1", "m2", "m3"] });
  try {
    for (const id of ["m1", "m2", "m3"]) {
      await h.ctx.minions.put(id, { grains: { g: id }, pillar: { p: id } });
      await h.ctx.minions.setMine(id, { "test.ping": true, "grains.items": { a: 1 } });
    }
    assert.equal(await h.run("cache.clear_pillar"), false);
    assert.equal(await h.run("cache.clear_pillar", ["m1"]), true);
    assert.deepEqual(h.ctx.minions.get("m1"), { grains: { g: "m1" } });
    assert.equal(await h.run("cache.clear_grains", ["m2"]), true);
    assert.deepEqual(h.ctx.minions.get("m2"), { pillar: { p: "m2" } });
    assert.equal(await h.run("cache.clear_mine_func", ["m2"], { clear_mine_func_flag: "test.ping" }), true);
    assert.deepEqual(h.ctx.minions.mine("m2"), { "grains.items": { a: 1 } });
    assert.equal(await h.run("cache.clear_mine", ["m2"]), true);
    assert.equal(h.ctx.minions.mine("m2"), undefined);
    assert.deepEqual(h.ctx.minions.get("m2"), { pillar: { p: "m2" } }, "clearing the mine leaves the data");
    assert.equal(await h.run("cache.clear_all", ["m3"]), true);
    assert.equal(h.ctx.minions.get("m3"), undefined);
    assert.equal(h.ctx.minions.mine("m3"), undefined);
    assert.deepEqual(h.ctx.minions.get("m1"), { grains: { g: "m1" } }, "untargeted minions keep theirs");
  } finally {
    await h.close();
  }
});

test("clustered, a cache clear is a stamped record for the peers: a tombstone for removed data, the kept half for a partial clear", async () => {
  const h = runnerHarness({ accepted: ["m1", "m2"] });
  try {
    await h.ctx.minions.put("m1", { grains: { g: 1 }, pillar: { p: 1 } });
    await h.ctx.minions.put("m2", { grains: { g: 2 }, pillar: { p: 2 } });
    await h.ctx.minions.setMine("m2", { f: 1 });
    const sent: (DataRecord | MineRecord)[] = [];
    h.ctx.minions.track("node-a", (r) => sent.push(r));
    await h.run("cache.clear_pillar", ["m1"]);
    await h.run("cache.clear_all", ["m2"]);
    assert.deepEqual(
      sent.map((r) => [r.k, r.id, r.o, r.v]),
      [
        ["data", "m1", "node-a", { grains: { g: 1 } }],
        ["data", "m2", "node-a", null],
        ["mine", "m2", "node-a", null],
      ],
    );
    assert.ok(h.ctx.minions.stampOf("data", "m2"), "the removal keeps its stamp (a tombstone), so an older peer copy cannot bring it back");
  } finally {
    await h.close();
  }
});

test("mine.get: one function gives {minion: data}, several give {function: {minion: data}}; ACL entries are unwrapped or withheld", async () => {
  const h = runnerHarness({ accepted: ["a1", "a2", "b1"] });
  try {
    await h.ctx.minions.setMine("a1", { "test.ping": true, "grains.item": { os: "Debian" } });
    await h.ctx.minions.setMine("a2", { "test.ping": true, secret: { __saltmine_acl__: 1, __data__: "s", allow_tgt: "b1" }, open: { __saltmine_acl__: 1, __data__: "o" } });
    await h.ctx.minions.setMine("b1", { "test.ping": false });
    assert.deepEqual(await h.run("mine.get", ["a*", "test.ping"]), { a1: true, a2: true });
    assert.deepEqual(await h.run("mine.get", ["*", "test.ping,grains.item"]), { "test.ping": { a1: true, a2: true, b1: false }, "grains.item": { a1: { os: "Debian" } } });
    assert.deepEqual(await h.run("mine.get", ["*", ["grains.item"]]), { "grains.item": { a1: { os: "Debian" } } }, "a list is always by function");
    assert.deepEqual(await h.run("mine.get", ["a1,b1", "test.ping"], { tgt_type: "list" }), { a1: true, b1: false });
    assert.deepEqual(await h.run("mine.get", ["*", "open"]), { a2: "o" });
    assert.deepEqual(await h.run("mine.get", ["*", "secret"]), {}, "allow_tgt b1 does not allow the master");
    assert.deepEqual(await h.run("mine.get", ["*", "nope"]), {});
  } finally {
    await h.close();
  }
});

test("pillar.show_pillar compiles on the master from the minion's cached grains, {fqdn: minion} without, key=value as grains; show_top gives the merged top", async () => {
  const h = runnerHarness({ accepted: ["web1"] });
  try {
    const pillarRoot = path.join(h.root, "srv", "pillar");
    writeFiles(pillarRoot, {
      "top.sls": "base:\n  '*':\n    - common\n  'os:Debian':\n    - match: grain\n    - debian\n",
      "common.sls": "who: '{{ grains.get('fqdn', 'none') }}'\nid: '{{ grains['id'] }}'\n",
      "debian.sls": "family: debian\n",
    });
    await h.ctx.minions.put("web1", { grains: { os: "Debian", fqdn: "web1.example" } });
    assert.deepEqual(await h.run("pillar.show_pillar", ["web1"]), { who: "web1.example", id: "web1", family: "debian" });
    assert.deepEqual(await h.run("pillar.show_pillar"), { who: "*", id: "*" }, "no minion: the pillar every minion gets");
    assert.deepEqual(await h.run("pillar.show_pillar", ["x"], { os: "Debian", fqdn: "given" }), { who: "given", id: "x", family: "debian" });
    assert.deepEqual(await h.run("pillar.show_top", ["web1"]), { base: { "*": ["common"], "os:Debian": [{ match: "grain" }, "debian"] } });
    writeFiles(pillarRoot, { "top.sls": "base: [unclosed\n" });
    const errors = (await h.run("pillar.show_top", ["web1"])) as string[];
    assert.ok(Array.isArray(errors) && /Rendering Primary Top file failed/.test(errors[0]!), JSON.stringify(errors));
  } finally {
    await h.close();
  }
});

test("fileserver.* list the roots backend's environments, files, directories, empty directories and symlinks, and answer Salt's roots no-ops", async () => {
  const h = runnerHarness({ cfg: {} });
  try {
    const base = path.join(h.root, "srv", "salt");
    const dev = path.join(h.root, "srv", "dev");
    h.ctx.cfg.file_roots = { base: [base], dev: [dev] };
    writeFiles(base, { "a.txt": "hi", "sub/b.sls": "x: 1", "sub/empty/.keep-not": "" });
    writeFiles(dev, { "d.txt": "dev" });
    symlinkSync("a.txt", path.join(base, "link.txt"));
    const { rmSync } = await import("node:fs");
    rmSync(path.join(base, "sub", "empty", ".keep-not"));
    assert.deepEqual(await h.run("fileserver.envs"), ["base", "dev"]);
    assert.deepEqual(await h.run("fileserver.envs", [], { backend: "-roots" }), []);
    assert.deepEqual(await h.run("fileserver.file_list"), ["a.txt", "link.txt", "sub/b.sls"]);
    assert.deepEqual(await h.run("fileserver.file_list", ["dev"]), ["d.txt"]);
    assert.deepEqual(await h.run("fileserver.file_list", [], { backend: "git" }), [], "a backend not enabled lists nothing");
    assert.deepEqual(await h.run("fileserver.dir_list"), ["sub", "sub/empty"]);
    assert.deepEqual(await h.run("fileserver.empty_dir_list"), ["sub/empty"]);
    assert.deepEqual(await h.run("fileserver.file_list_emptydirs"), ["sub/empty"]);
    assert.deepEqual(await h.run("fileserver.symlink_list"), { "link.txt": "a.txt" });
    assert.equal(await h.run("fileserver.update"), true);
    assert.equal(await h.run("fileserver.clear_cache"), "No cache was cleared");
    assert.equal(await h.run("fileserver.clear_lock"), "No locks were removed");
  } finally {
    await h.close();
  }
});

test("survey.hash pools minions by the str() of their return, largest pool first (survey_sort=up: smallest), a silent minion as False", async () => {
  const h = runnerHarness({
    answers: () => [ok("c", "x"), ok("a", "x"), ok("b", { k: [1, true] }), missing("d")],
  });
  try {
    assert.deepEqual(await h.run("survey.hash", ["*", "test.echo", "x"], { extra: 1, __pub_user: "root" }), [
      { pool: ["a", "c"], result: "x" },
      { pool: ["b"], result: "{'k': [1, True]}" },
      { pool: ["d"], result: "False" },
    ]);
    assert.deepEqual(h.published[0]!.arg, ["x", { extra: 1, __kwarg__: true }], "key=value go to the function, _-prefixed ones do not");
    assert.equal(h.published[0]!.tgtType, "compound");
    const up = (await h.run("survey.hash", ["*", "test.echo"], { survey_sort: "up" })) as { pool: string[] }[];
    assert.deepEqual(up.map((p) => p.pool), [["b"], ["d"], ["a", "c"]]);
  } finally {
    await h.close();
  }
});

test("survey.diff prints each pool and a zero-context unified diff of its result against the first pool's", async () => {
  const h = runnerHarness({ answers: () => [ok("a", "l1\nl2\nl3"), ok("b", "l1\nl2\nl3"), ok("c", "l1\nX\nl3\nl4")] });
  try {
    const pools = (await h.run("survey.diff", ["*", "cp.get_file_str", "file:///etc/hosts"])) as { pool: string[] }[];
    assert.deepEqual(pools.map((p) => p.pool), [["a", "b"], ["c"]]);
    const text = h.printed.join("\n");
    assert.match(text, /minion pool :\n------------\n\['a', 'b'\]\npool size :\n----------\n {4}2/);
    assert.ok(text.includes('differences from "a" results :\n-----------------------------'), text);
    assert.ok(text.includes("--- a\n+++ c\n@@ -2 +2 @@\n-l2\n+X\n@@ -3,0 +4 @@\n+l4\n"), text);
    assert.equal(unifiedDiff(["a\n"], ["a\n"], "x", "y"), "");
  } finally {
    await h.close();
  }
});

test("saltutil.sync_runners copies _runners JavaScript modules, names Python ones as unsupported, and a synced runner is callable", async () => {
  const h = runnerHarness();
  try {
    const base = path.join(h.root, "srv", "salt");
    writeFiles(base, {
      "_runners/hello.mjs": "export async function world(ctx, args, kwargs) { return { id: ctx.cfg.id, args, kwargs }; }\nexport const _hidden = () => 1;\n",
      "_runners/legacy.py": "def run():\n    return True\n",
    });
    assert.deepEqual(await h.run("saltutil.sync_runners"), ["runners.hello"]);
    assert.deepEqual(await h.run("saltutil.sync_runners"), [], "unchanged modules are not synced again");
    assert.ok(h.printed.some((l) => l.includes(path.join(base, "_runners", "legacy.py")) && /Python runners are not supported/.test(l)), h.printed.join("\n"));
    const extmods = path.join(h.ctx.cfg.cachedir, "extmods", "runners");
    assert.ok(existsSync(path.join(extmods, "hello.mjs")));
    assert.ok(!existsSync(path.join(extmods, "legacy.py")));
    const fn = await loadCustomRunner(h.ctx.cfg, "hello.world");
    assert.deepEqual(await fn(h.ctx, ["a"], { b: 1 }), { id: "runner_master", args: ["a"], kwargs: { b: 1 } });
    await assert.rejects(() => loadCustomRunner(h.ctx.cfg, "hello._hidden"), /'hello._hidden' is not available\./);
    await assert.rejects(() => loadCustomRunner(h.ctx.cfg, "legacy.run"), (e: Error) => e.message.includes(path.join(base, "_runners", "legacy.py")) && /Python runner/.test(e.message));
    const all = (await h.run("saltutil.sync_all")) as Record<string, string[]>;
    assert.deepEqual(Object.keys(all), ["clouds", "modules", "states", "grains", "renderers", "returners", "output", "proxymodules", "runners", "wheel", "engines", "thorium", "queues", "pillar", "utils", "sdb", "cache", "fileserver", "tops", "tokens", "serializers", "executors", "wrapper", "roster"]);
    const { rmSync } = await import("node:fs");
    rmSync(path.join(base, "_runners", "hello.mjs"));
    await h.run("saltutil.sync_runners");
    assert.ok(!existsSync(path.join(extmods, "hello.mjs")), "clean_dynamic_modules removes a module gone from the file roots");
  } finally {
    await h.close();
  }
});

test("manage.list_state show_ip=True names, for a minion on the master's host, its first non-loopback address (Salt's connected_ids)", async () => {
  const { createServer, connect } = await import("node:net");
  const os = await import("node:os");
  const local = Object.values(os.networkInterfaces()).flat().find((a) => a && !a.internal && a.family === "IPv4")?.address;
  if (!local) return; // no non-loopback IPv4 address on this host: nothing to name
  const server = createServer(() => {});
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  const sock = connect(port, "127.0.0.1");
  await new Promise((r) => sock.once("connect", r));
  const h = runnerHarness({ accepted: ["here", "away"], cfg: { publish_port: port, brine_presence: "connections" } as never });
  try {
    await h.ctx.minions.put("here", { grains: { ipv4: ["127.0.0.1", local] } });
    await h.ctx.minions.put("away", { grains: { ipv4: ["203.0.113.9"] } });
    assert.deepEqual(await h.run("manage.list_state", [], { show_ip: true }), { here: local });
    assert.deepEqual(await h.run("manage.not_joined"), ["away"]);
  } finally {
    sock.destroy();
    server.close();
    await h.close();
  }
});

test("mine.update publishes mine.update with clear and mine_functions to the target; a silent minion is False", async () => {
  const h = runnerHarness({ answers: () => [ok("a1", true), missing("a2")] });
  try {
    assert.deepEqual(await h.run("mine.update", ["a*"], { mine_functions: ["test.ping"] }), { a1: true, a2: false });
    assert.equal(h.published[0]!.fun, "mine.update");
    assert.equal(h.published[0]!.tgt, "a*");
    assert.deepEqual(h.published[0]!.arg, [{ clear: false, mine_functions: ["test.ping"], __kwarg__: true }]);
  } finally {
    await h.close();
  }
});
