/**
 * salt-run and a runner that takes its time (issue 17 leftovers: cluster.sync_roots and collect_from_peers may wait
 * for a restarted state-sync thread, two pulls and up to 90 s). Salt's salt-run waits for a runner's return without a
 * timeout of its own (salt/runner.py Runner.run runs it in salt-run's process; `-t` is only opts["timeout"], what the
 * runner waits on); brine's does the same through the control socket. A salt-run left with Ctrl-C ends its runner as
 * Salt's does (salt/scripts.py's SIGINT handler raises SystemExit inside the runner, salt/client/mixins.py stores the
 * job failed with retcode 1, salt-run exits 1, checked against the Python master): brine's master stops the runner
 * thread when its caller leaves and the thread records the job as failed first (before: the thread was ended and the
 * job never had a return). And `-t` is the call's option, as in Salt (before: it was added to every runner's keyword
 * arguments). `--async` starts the runner and returns its tag at once, as Salt's (before: refused as an unknown option).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { CLI_DIR, runCli, writeConfigDir } from "../helpers/cli.js";
import { EventClient } from "../../src/lib/client/event-client.js";
import { controlCall } from "../../src/lib/client/control-client.js";

const runnersRunning = async (tm: TestMaster) => ((await controlCall(tm.sockDir, { op: "status" })).ret as { runners: number }).runners;

async function until(what: string, ok: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** salt-run started in the background, its output collected. */
function saltRun(conf: string, args: string[]) {
  const p = spawn(process.execPath, [new URL("salt-run.js", CLI_DIR).pathname, "-c", conf, ...args], { stdio: ["ignore", "pipe", "pipe"] });
  const out = { stdout: "", stderr: "" };
  p.stdout.on("data", (d) => (out.stdout += d));
  p.stderr.on("data", (d) => (out.stderr += d));
  const closed = new Promise<number | null>((r) => p.on("close", (code) => r(code)));
  return { p, out, closed };
}

describe("salt-run and a runner that takes its time", { timeout: 120_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  let bus: EventClient;
  const tags: { tag: string; data: Record<string, unknown> }[] = [];
  before(async () => {
    tm = await startTestMaster();
    conf = writeConfigDir(tm);
    bus = new EventClient(tm.sockDir);
    await bus.connect();
    bus.on((e) => tags.push({ tag: e.tag, data: e.data as Record<string, unknown> }));
  });
  after(async () => {
    bus.close();
    await tm.stop();
  });

  test("salt-run waits for a runner that outlasts its -t: the return is printed, exit code 0", async () => {
    const t0 = performance.now();
    const r = await runCli("salt-run", ["-c", conf, "test.sleep", "3", "-t", "1", "--out", "json"], { timeoutMs: 60_000 });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, "3\ntrue\n", "as the Python master's salt-run prints it (test.sleep prints its s_time first)");
    assert.ok(performance.now() - t0 >= 3000, "the answer came after the runner's 3 s");
  });

  test("-t is the call's timeout option, as Salt's salt-run sets opts['timeout'], not one of the runner's arguments; a bad one is refused", async () => {
    const r = await runCli("salt-run", ["-c", conf, "test.arg", "a", "b=1", "-t", "7", "--out", "json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { args: ["a"], kwargs: { b: 1 } }, "Salt 3007's answer");
    // what a runner reads as its timeout (a custom runner answers its cfg.timeout): -t, else the master's `timeout`
    mkdirSync(path.join(tm.cfg.file_roots.base![0]!, "_runners"), { recursive: true });
    writeFileSync(path.join(tm.cfg.file_roots.base![0]!, "_runners", "opts.mjs"), "export async function timeout(ctx) { return ctx.cfg.timeout; }\n");
    assert.equal((await runCli("salt-run", ["-c", conf, "saltutil.sync_runners"])).code, 0);
    assert.equal((await runCli("salt-run", ["-c", conf, "opts.timeout", "-t", "9", "--out", "json"])).stdout.trim(), "9");
    assert.equal((await runCli("salt-run", ["-c", conf, "opts.timeout", "--out", "json"])).stdout.trim(), String(tm.cfg.timeout));
    const bad = await runCli("salt-run", ["-c", conf, "test.arg", "-t", "soon"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /-t\/--timeout must be a number of seconds above 0, not 'soon'/);
  });

  test("a salt-run left with Ctrl-C stops its runner and exits 1; the job is recorded as failed, retcode 1, as Salt's", async () => {
    const seen = tags.length;
    const run = saltRun(conf, ["test.sleep", "5", "--out", "json", "-l", "debug"]);
    await until("the runner's salt/run/<jid>/new", async () => tags.slice(seen).some((e) => /^salt\/run\/\d{20}\/new$/.test(e.tag) && e.data.fun === "runner.test.sleep"));
    const jid = tags.slice(seen).find((e) => e.tag.endsWith("/new") && e.data.fun === "runner.test.sleep")!.tag.split("/")[2]!;
    // salt-run has the jid (the control socket's first message; logged at debug)
    await until("salt-run has the jid", async () => run.out.stderr.includes(`runner test.sleep: jid ${jid}`));
    await until("the runner is sleeping (its print came)", async () => run.out.stdout === "5\n");
    const t0 = performance.now();
    run.p.kill("SIGINT");
    assert.equal(await run.closed, 1, run.out.stderr);
    assert.match(run.out.stderr, /Exiting gracefully on Ctrl-c/);
    assert.equal(run.out.stdout, "5\n", "test.sleep's print, and no return: it had not come");
    await until("no runner left", async () => (await runnersRunning(tm)) === 0, 4000);
    assert.ok(performance.now() - t0 < 4000, "the runner was stopped, not left to finish its 5 s");

    await until("salt/run/<jid>/ret", async () => tags.some((e) => e.tag === `salt/run/${jid}/ret`));
    const ret = tags.find((e) => e.tag === `salt/run/${jid}/ret`)!.data;
    assert.equal(ret.success, false);
    assert.match(String(ret.return), /^Exception occurred in runner test\.sleep: its caller left/);
    const look = await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", jid, "--out", "json"]);
    assert.equal(look.code, 0, look.stderr);
    // Salt's answer for a runner job ended by its caller's Ctrl-C: the call's record, failed, retcode 1
    const rec = JSON.parse(look.stdout)[tm.cfg.id];
    assert.deepEqual([rec.fun, rec.jid, rec.success, rec.retcode], ["runner.test.sleep", jid, false, 1]);
    assert.match(String(rec.return), /^Exception occurred in runner test\.sleep: its caller left/);
    await new Promise((r) => setTimeout(r, 5500));
    assert.equal(JSON.parse((await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", jid, "--out", "json"])).stdout)[tm.cfg.id].success, false, "no later success overwrote it");
  });

  test("salt-run --async answers once the runner is found, with the tag it runs under, exit 0, nothing on stdout; the runner runs on after salt-run left and its job is recorded", async () => {
    const seen = tags.length;
    const r = await runCli("salt-run", ["-c", conf, "--async", "test.sleep", "2", "--out", "json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, "", "Salt's salt-run --async prints nothing on stdout (checked against the Python master)");
    const m = /Running in asynchronous mode\. Results of this execution may be collected by attaching to the master event bus or by examining the master job cache, if configured\. This execution is running under tag salt\/run\/(\d{20})/.exec(r.stderr);
    assert.ok(m, r.stderr);
    const jid = m[1]!;
    assert.ok(!tags.some((e) => e.tag === `salt/run/${jid}/ret`), "salt-run returned before the runner's return");
    assert.ok(tags.slice(seen).some((e) => e.tag === `salt/run/${jid}/new` && e.data.fun === "runner.test.sleep"));
    await until("salt/run/<jid>/ret", async () => tags.some((e) => e.tag === `salt/run/${jid}/ret`));
    assert.equal(tags.find((e) => e.tag === `salt/run/${jid}/ret`)!.data.success, true, "its caller's leaving did not stop it");
    const rec = JSON.parse((await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", jid, "--out", "json"])).stdout)[tm.cfg.id];
    assert.deepEqual([rec.fun, rec.jid, rec.success, rec.return, rec.fun_args], ["runner.test.sleep", jid, true, true, [2]]);

    const beforeUnknown = tags.length;
    const unknown = await runCli("salt-run", ["-c", conf, "--async", "nosuch.fun"]);
    assert.deepEqual([unknown.code, unknown.stdout, unknown.stderr.trim()], [1, "", "'nosuch.fun' is not available."], "as without --async");
    // and its job's ret event says so with Salt's retcode for it (runner.py: 254, success False)
    await until("the unknown runner's salt/run/<jid>/ret", async () => tags.slice(beforeUnknown).some((e) => /^salt\/run\/\d{20}\/ret$/.test(e.tag) && e.data.fun === "runner.nosuch.fun"));
    const unknownRet = tags.slice(beforeUnknown).find((e) => e.tag.endsWith("/ret") && e.data.fun === "runner.nosuch.fun")!.data;
    assert.deepEqual([unknownRet.success, unknownRet.retcode, unknownRet.return], [false, 254, "'nosuch.fun' is not available."]);
  });

  test("state.event, which only streams to its caller, ends when the caller leaves", async () => {
    const seen = tags.length;
    const run = saltRun(conf, ["state.event"]);
    await until("the runner's salt/run/<jid>/new", async () => tags.slice(seen).some((e) => e.tag.endsWith("/new") && e.data.fun === "runner.state.event"));
    await until("state.event running", async () => (await runnersRunning(tm)) === 1);
    run.p.kill("SIGINT");
    assert.equal(await run.closed, 1, run.out.stderr);
    await until("no runner left", async () => (await runnersRunning(tm)) === 0);
  });
});
