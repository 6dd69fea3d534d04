/**
 * Custom runners end to end: `salt-run saltutil.sync_runners` on a running master copies `_runners/*.mjs` from
 * the file roots, the next `salt-run <module>.<function>` runs it in a runner thread with Salt's argument
 * conventions, a Python runner's call names its file, and the everyday runners answer through the control socket.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { writeFiles } from "./helpers.js";

let tm: TestMaster;
let conf: string;
before(async () => {
  tm = await startTestMaster();
  conf = writeConfigDir(tm);
});
after(async () => {
  await tm.stop();
});

const run = (...args: string[]) => runCli("salt-run", ["-c", conf, ...args]);

test("a _runners module synced with saltutil.sync_runners runs through salt-run, and a re-sync is seen without a restart", async () => {
  const base = tm.cfg.file_roots.base![0]!;
  writeFiles(base, {
    "_runners/hello.mjs": "export async function world(ctx, args, kwargs) { ctx.print('hi from hello'); return { master: ctx.cfg.id, args, kwargs }; }\n",
    "_runners/legacy.py": "def run():\n    return True\n",
  });
  const synced = await run("saltutil.sync_runners", "--out", "json");
  assert.equal(synced.code, 0, synced.stderr);
  assert.match(synced.stdout, /_runners\/legacy\.py: Python runners are not supported by brine/);
  assert.deepEqual(JSON.parse(synced.stdout.slice(synced.stdout.indexOf("["))), ["runners.hello"]);
  const called = await run("hello.world", "a", "n=2", "--out", "json");
  assert.equal(called.code, 0, called.stderr);
  assert.ok(called.stdout.startsWith("hi from hello\n"), called.stdout);
  assert.deepEqual(JSON.parse(called.stdout.slice(called.stdout.indexOf("{"))), { master: "test_master", args: ["a"], kwargs: { n: 2 } });

  writeFiles(base, { "_runners/hello.mjs": "export const world = () => 'v2';\n" });
  assert.deepEqual(JSON.parse((await run("saltutil.sync_runners", "--out", "json")).stdout.split("\n").filter((l) => !l.includes("legacy.py")).join("\n")), ["runners.hello"]);
  assert.equal((await run("hello.world", "--out", "json")).stdout.trim(), '"v2"');

  const py = await run("legacy.run");
  assert.equal(py.code, 1);
  assert.ok(py.stderr.includes(path.join(base, "_runners", "legacy.py")) && /Python runner/.test(py.stderr), py.stderr);
  const unknown = await run("nosuch.thing");
  assert.equal(unknown.code, 1);
  assert.equal(unknown.stderr.trim(), "'nosuch.thing' is not available.");
  assert.deepEqual(JSON.parse((await run("jobs.list_jobs", "search_function=nosuch", "--out", "json")).stdout), {}, "an unknown runner is no job (no custom module is loaded for it)");
});

test("the everyday runners answer through salt-run: fileserver.file_list, pillar.show_top, cache.grains, jobs.last_run", async () => {
  const base = tm.cfg.file_roots.base![0]!;
  writeFiles(base, { "top.sls": "base:\n  '*': []\n" });
  writeFiles(tm.cfg.pillar_roots.base![0]!, { "top.sls": "base:\n  '*':\n    - common\n", "common.sls": "k: v\n" });
  const files = await run("fileserver.file_list", "--out", "json");
  assert.ok((JSON.parse(files.stdout) as string[]).includes("top.sls"), files.stdout + files.stderr);
  assert.deepEqual(JSON.parse((await run("pillar.show_top", "--out", "json")).stdout), { base: { "*": ["common"] } });
  assert.deepEqual(JSON.parse((await run("pillar.show_pillar", "--out", "json")).stdout), { k: "v" });
  assert.deepEqual(JSON.parse((await run("cache.grains", "*", "--out", "json")).stdout), {});
  assert.equal((await run("jobs.last_run", "function=test.ping", "--out", "json")).stdout.trim(), "false", "no such job was published");
  const last = JSON.parse((await run("jobs.last_run", "--out", "json")).stdout) as Record<string, Record<string, unknown>>;
  assert.equal(Object.values(last)[0]!.Function, "runner.jobs.last_run", "runner calls are jobs too, as in Salt");
});
