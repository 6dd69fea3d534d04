/**
 * A ClusterHarness's masters and HAProxy end with the process that started them when that process is ended by a
 * signal: a test file killed by SIGTERM (the test runner's per-file watchdog, a CI job cancelled) runs no
 * `finally`, and its masters would otherwise go on holding their loopback addresses, failing the next run's
 * cluster tests on "address taken".
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { clusterPrerequisites, until } from "../../tools/local-cluster.js";

const LB = "127.0.0.210";
const HOSTS = ["127.0.0.211", "127.0.0.212", "127.0.0.213"];

/** Whether `pid` is a process that has not ended (a zombie nobody reaped has ended). */
function running(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

/**
 * Runs `script` (an ES module) in a node process of its own and waits for the first line it prints that starts with
 * `{"<key>"` (what it started, as JSON); fails if the process exits first.
 */
function startScript<T>(script: string, key: string, what: string, timeoutMs: number): { p: ChildProcess; exited: Promise<unknown>; started: Promise<T> } {
  const p = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  p.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  p.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise((r) => p.once("exit", r));
  const started = until(what, async () => {
    if (p.exitCode !== null) throw new Error(`the process exited: ${out}`);
    const line = out.split("\n").find((l) => l.startsWith(`{"${key}"`));
    return line ? (JSON.parse(line) as T) : undefined;
  }, timeoutMs, 50);
  return { p, exited, started };
}

// SIGINT and SIGHUP take the same path (checked once by hand with SIGINT); one signal spares a cluster's start
for (const signal of ["SIGTERM"] as const) {
  test(`a harness's masters and haproxy end when its process gets ${signal}`, { timeout: 180_000 }, async () => {
    await clusterPrerequisites(LB, HOSTS);
    const harness = new URL("../../tools/local-cluster.js", import.meta.url).href;
    const script = `
      import { ClusterHarness } from ${JSON.stringify(harness)};
      const h = await ClusterHarness.start({ lbHost: ${JSON.stringify(LB)}, hosts: ${JSON.stringify(HOSTS)}, clusterId: "brine-harness-ends" });
      console.log(JSON.stringify({ root: h.root, pids: [...h.masters.map((m) => m.proc.pid), h.haproxyPid] }));
      setInterval(() => {}, 60_000);`;
    const run = startScript<{ root: string; pids: number[] }>(script, "root", "the harness to start", 150_000);
    const { p, exited } = run;
    let started: { root: string; pids: number[] } | undefined;
    try {
      started = await run.started;
      assert.equal(started.pids.length, 4, "three masters and haproxy");
      assert.ok(started.pids.every(running), "all four run before the signal");
      p.kill(signal);
      await exited;
      const left = await until("the harness's children to end", async () => {
        const alive = started!.pids.filter(running);
        return alive.length === 0 ? alive : undefined;
      }, 10_000, 100).catch(() => started!.pids.filter(running));
      assert.deepEqual(left, [], `processes left running after ${signal}: ${left.join(", ")}`);
    } finally {
      p.kill("SIGKILL");
      for (const pid of started?.pids ?? []) if (running(pid)) process.kill(pid, "SIGKILL");
      if (started) rmSync(started.root, { recursive: true, force: true });
    }
  });
}

// what a test starts outside its own process group (the real-salt harness's daemons run under setsid) is ended by
// the same hook, through onThisProcessEnd: here a sleep in a session of its own stands for such a daemon
test("what a process registered with onThisProcessEnd is ended when that process gets SIGTERM, even in a session of its own", { timeout: 30_000 }, async () => {
  const harness = new URL("../../tools/local-cluster.js", import.meta.url).href;
  const script = `
    import { onThisProcessEnd } from ${JSON.stringify(harness)};
    import { spawn, spawnSync } from "node:child_process";
    // detached: a session of its own (setsid), as the harness's daemons
    const d = spawn("sleep", ["600"], { stdio: "ignore", detached: true });
    d.unref();
    const forgotten = spawn("sleep", ["600"], { stdio: "ignore", detached: true });
    forgotten.unref();
    onThisProcessEnd(() => spawnSync("kill", ["-KILL", String(d.pid)]));
    // a hook taken back before the end does not run: its daemon is the test's to end
    const forget = onThisProcessEnd(() => spawnSync("kill", ["-KILL", String(forgotten.pid)]));
    forget();
    console.log(JSON.stringify({ pids: [d.pid, forgotten.pid] }));
    setInterval(() => {}, 60_000);`;
  const run = startScript<{ pids: number[] }>(script, "pids", "the process to start its daemons", 20_000);
  const { p, exited } = run;
  let pids: number[] = [];
  try {
    pids = (await run.started).pids;
    assert.ok(pids.every(running), "both run before the signal");
    p.kill("SIGTERM");
    await exited;
    await until("the registered daemon to end", async () => (running(pids[0]!) ? undefined : true), 5_000, 50);
    assert.equal(running(pids[1]!), true, "the hook taken back did not run");
  } finally {
    p.kill("SIGKILL");
    for (const pid of pids) if (running(pid)) process.kill(pid, "SIGKILL");
  }
});
