/**
 * salt-run and a runner that takes its time (issue 17 leftovers: cluster.sync_roots and collect_from_peers may wait
 * for a restarted state-sync thread, two pulls and up to 90 s). Salt's salt-run waits for a runner's return without a
 * timeout of its own (salt/runner.py Runner.run runs it in salt-run's process; `-t` is only opts["timeout"], what the
 * runner waits on); brine's does the same through the control socket. A salt-run that leaves before the return
 * (Ctrl-C) exits 0 as Salt's does (salt/scripts.py _handle_signals) and says the runner's jid; the runner, which runs in
 * the master here, goes on and records its job, so `jobs.lookup_jid` answers it (before: the runner thread was ended
 * with its caller and its job never recorded). `state.event`, which only streams to its caller, is ended with it.
 * And `-t` is the call's option, as in Salt (before: it was added to every runner's keyword arguments).
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

  test("a salt-run left with Ctrl-C exits 0 naming the jid; the runner goes on and jobs.lookup_jid answers its return", async () => {
    const seen = tags.length;
    const run = saltRun(conf, ["test.sleep", "3", "--out", "json", "-l", "debug"]);
    await until("the runner's salt/run/<jid>/new", async () => tags.slice(seen).some((e) => /^salt\/run\/\d{20}\/new$/.test(e.tag) && e.data.fun === "runner.test.sleep"));
    const jid = tags.slice(seen).find((e) => e.tag.endsWith("/new") && e.data.fun === "runner.test.sleep")!.tag.split("/")[2]!;
    // salt-run has the jid (the control socket's first message; logged at debug)
    await until("salt-run has the jid", async () => run.out.stderr.includes(`runner test.sleep: jid ${jid}`));
    await until("the runner is sleeping (its print came)", async () => run.out.stdout === "3\n");
    run.p.kill("SIGINT");
    assert.equal(await run.closed, 0, run.out.stderr);
    assert.match(run.out.stderr, /Exiting gracefully on Ctrl-c/);
    assert.ok(run.out.stderr.includes(`This runner's jid is: ${jid}`), run.out.stderr);
    assert.ok(run.out.stderr.includes(`salt-run jobs.lookup_jid ${jid}`), run.out.stderr);
    assert.equal(run.out.stdout, "3\n", "test.sleep's print, and no return: it had not come");
    assert.equal(await runnersRunning(tm), 1, "the runner still runs once its caller left");

    await until("salt/run/<jid>/ret", async () => tags.some((e) => e.tag === `salt/run/${jid}/ret`));
    assert.equal(tags.find((e) => e.tag === `salt/run/${jid}/ret`)!.data.return, true);
    const look = await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", jid, "--out", "json"]);
    assert.equal(look.code, 0, look.stderr);
    // Salt's answer for a runner job: the call's record, its return inside
    const rec = JSON.parse(look.stdout)[tm.cfg.id];
    assert.deepEqual([rec.fun, rec.jid, rec.return, rec.success], ["runner.test.sleep", jid, true, true]);
  });

  test("state.event, which only streams to its caller, ends when the caller leaves", async () => {
    const seen = tags.length;
    const run = saltRun(conf, ["state.event"]);
    await until("the runner's salt/run/<jid>/new", async () => tags.slice(seen).some((e) => e.tag.endsWith("/new") && e.data.fun === "runner.state.event"));
    await until("state.event running", async () => (await runnersRunning(tm)) === 1);
    run.p.kill("SIGINT");
    assert.equal(await run.closed, 0, run.out.stderr);
    assert.doesNotMatch(run.out.stderr, /jid is/, "no jid to look up: the runner does not go on");
    await until("no runner left", async () => (await runnersRunning(tm)) === 0);
  });
});
