/**
 * The master's pidfile (issue 20): written at start under root_dir, removed at a clean stop, held while the
 * master runs (a second master on the same pidfile refuses to start, naming the file and the running pid), and
 * a stale one (its pid dead) taken over with a warning.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { freePort } from "../../tools/free-port.js";
import { acquirePidfile, pidfilePath } from "../../src/main-thread/pidfile.js";
import { masterDefaults } from "../../src/shared/config/defaults.js";
import { CLI_DIR, runCli } from "../helpers/cli.js";
import { onThisProcessEnd } from "../../tools/local-cluster.js";

async function masterRoot(): Promise<{ root: string; conf: string }> {
  const root = mkdtempSync(path.join(os.tmpdir(), "brine-pid-"));
  const conf = path.join(root, "etc");
  mkdirSync(conf, { recursive: true });
  writeFileSync(path.join(conf, "master"), `root_dir: ${root}\ninterface: 127.0.0.1\nret_port: ${await freePort()}\npublish_port: ${await freePort()}\nworker_threads: 1\n`);
  return { root, conf };
}

test("salt-master writes its pidfile under root_dir, a second master on it refuses naming the file and pid, and a clean stop removes it", { timeout: 120_000 }, async () => {
  const { root, conf } = await masterRoot();
  const pidfile = path.join(root, "var", "run", "salt-master.pid");
  const p = spawn(process.execPath, [new URL("salt-master.js", CLI_DIR).pathname, "-c", conf, "-l", "quiet"], { stdio: ["ignore", "pipe", "pipe"] });
  try {
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    const deadline = Date.now() + 60_000;
    while (!out.includes("ready") && Date.now() < deadline && p.exitCode === null) await new Promise((r) => setTimeout(r, 100));
    assert.ok(out.includes("ready"), out);
    assert.equal(readFileSync(pidfile, "utf8").trim(), String(p.pid));

    // the second master has other ports: only the pidfile (--pid-file, not under its root_dir) stops it
    const second = await masterRoot();
    const r = await runCli("salt-master", ["-c", second.conf, "-l", "quiet", "--pid-file", pidfile], { timeoutMs: 60_000 });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.ok(r.stderr.includes(`${pidfile} names pid ${p.pid}, a salt-master that is running`), r.stderr);
    assert.equal(readFileSync(pidfile, "utf8").trim(), String(p.pid), "the refused master leaves the file alone");
    rmSync(second.root, { recursive: true, force: true });

    p.kill("SIGTERM");
    await new Promise((r) => p.once("exit", r));
    assert.equal(p.exitCode, 0);
    assert.ok(!existsSync(pidfile), "a clean stop removes the pidfile");
  } finally {
    if (p.exitCode === null) p.kill("SIGKILL");
    rmSync(root, { recursive: true, force: true });
  }
});

test("a stale pidfile (its pid dead, or not a number) is taken over; release removes only this process's file", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-pid-"));
  try {
    const file = path.join(dir, "run", "m.pid");
    mkdirSync(path.dirname(file));
    writeFileSync(file, "2147483646\n"); // no such process
    const hold = acquirePidfile(file, 4242);
    assert.equal(readFileSync(file, "utf8"), "4242\n");
    writeFileSync(file, "garbage");
    const again = acquirePidfile(file, 4243);
    assert.equal(readFileSync(file, "utf8"), "4243\n");
    hold.release();
    assert.ok(existsSync(file), "another process's file is not removed");
    again.release();
    assert.ok(!existsSync(file));
    assert.equal(pidfilePath({ ...masterDefaults(), root_dir: "/srv/x" }), "/srv/x/var/run/salt-master.pid");
    assert.equal(pidfilePath({ ...masterDefaults(), root_dir: "/srv/x", pidfile: "/run/b.pid" } as never), "/srv/x/run/b.pid");
    assert.equal(pidfilePath({ ...masterDefaults(), root_dir: "/" }, "rel.pid"), path.resolve("rel.pid"));
    assert.throws(() => pidfilePath({ ...masterDefaults(), pidfile: 3 } as never), /pidfile: must be a file path/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("salt-master -d starts the detached master with node's own flags (execArgv) and without -d, in / with umask 022 as Salt's daemonize", { timeout: 120_000 }, async () => {
  const { root, conf } = await masterRoot();
  const pidfile = path.join(root, "var", "run", "salt-master.pid");
  const flags = ["--max-old-space-size=333", "--stack-size=900"];
  const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
    // started from another directory with another umask: the detached master keeps neither
    const before = process.umask(0o077);
    const p = spawn(process.execPath, [...flags, new URL("salt-master.js", CLI_DIR).pathname, "-c", conf, "-l", "quiet", "-d"], { stdio: ["ignore", "pipe", "inherit"], cwd: root });
    process.umask(before);
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.on("close", (code) => resolve({ code, out }));
  });
  const pid = Number(/pid (\d+)/.exec(r.out)?.[1]);
  // the detached master is in a session of its own, out of reach of the test runner's kill of this file's group:
  // it ends with this process if the test is ended before its `finally`
  const forget = pid > 0 ? onThisProcessEnd(() => process.kill(pid, "SIGKILL")) : () => false;
  try {
    assert.equal(r.code, 0, r.out);
    assert.ok(pid > 0, r.out);
    // the detached master writes its pidfile once it holds it: then its command line is final
    const deadline = Date.now() + 60_000;
    while (!(existsSync(pidfile) && readFileSync(pidfile, "utf8").trim() === String(pid)) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
    assert.equal(readFileSync(pidfile, "utf8").trim(), String(pid));
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    assert.deepEqual(argv.slice(1, 3), flags, argv.join(" "));
    assert.ok(argv[3].endsWith("salt-master.js"), argv.join(" "));
    assert.ok(!argv.includes("-d") && argv.includes("-c"), argv.join(" "));
    assert.equal(readlinkSync(`/proc/${pid}/cwd`), "/");
    assert.equal(/^Umask:\s*(\d+)$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1], "0022");
  } finally {
    if (pid > 0) {
      try {
        process.kill(pid, "SIGTERM");
      } catch {
        /* already gone */
      }
      const deadline = Date.now() + 30_000;
      while (existsSync(`/proc/${pid}`) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 100));
      if (existsSync(`/proc/${pid}`)) process.kill(pid, "SIGKILL");
    }
    forget();
    rmSync(root, { recursive: true, force: true });
  }
});
