/**
 * A master stops while a runner thread is blocked outside JavaScript (here a custom runner reading a FIFO nobody
 * writes; in life a hung network filesystem). `terminate()` cannot end such a thread, and the stop used to wait for
 * its exit for ever. Now the stop goes on after a bound and names the call it left running; and since Node's
 * process.exit() itself waits for every thread, salt-master then ends itself by SIGKILL, saying why, instead of
 * hanging until its service manager kills it.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { controlCall } from "../../src/lib/client/control-client.js";
import { extensionModulesDir } from "../../src/runners/custom.js";
import { runnerStopWaitMs } from "../../src/main-thread/control-server.js";
import { threadExitWaitMs } from "../../src/shared/thread-kit.js";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import { pidfilePath } from "../../src/main-thread/pidfile.js";
import { startTestMaster } from "../helpers/master.js";
import { until } from "../../tools/local-cluster.js";
import { CLI_DIR, writeConfigDir } from "../helpers/cli.js";
import { neverWritten } from "../helpers/fifo.js";

/** how long the stop may take here: the bounds it waits through, and room for a loaded box, ms */
const stopWithinMs = runnerStopWaitMs + threadExitWaitMs + 20_000;

/** The custom runner `block.fifo(fifo, marker)`: writes the marker, then reads the FIFO. */
function installBlockingRunner(cfg: MasterConfig): void {
  const runners = path.join(extensionModulesDir(cfg), "runners");
  mkdirSync(runners, { recursive: true });
  writeFileSync(path.join(runners, "block.mjs"), `import { readFileSync, writeFileSync } from "node:fs";\nexport function fifo(ctx, args) { writeFileSync(args[1], "in"); return readFileSync(args[0], "utf8"); }\n`);
}

/** The runner is inside its call (it wrote its marker, then went to read the FIFO). */
const untilExists = (file: string) => until(file, async () => (existsSync(file) ? true : undefined), 60_000, 50);

test("a master stops while a runner thread is blocked in a native call, and says which call it left running", { timeout: 120_000 }, async () => {
  const logFile = path.join(os.tmpdir(), `brine-stop-blocked-${process.pid}.log`);
  const tm = await startTestMaster({}, undefined, { logFile });
  const f = neverWritten();
  try {
    installBlockingRunner(tm.cfg);
    const call = controlCall(tm.cfg.sock_dir, { op: "run", fun: "block.fifo", arg: [f.fifo, f.inside], kwarg: {} }).catch((e: Error) => e);
    await untilExists(f.inside);
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([tm.stop().then(() => "stopped"), new Promise<string>((r) => (timer = setTimeout(() => r("still stopping"), stopWithinMs)))]);
    clearTimeout(timer);
    assert.equal(outcome, "stopped", `the stop waited over ${stopWithinMs / 1000} s for a runner thread blocked in a read`);
    assert.match(readFileSync(logFile, "utf8"), /runner block\.fifo thread still running \d+ ms after it was ended: blocked outside JavaScript; going on without it/);
    f.release();
    await call;
  } finally {
    f.release();
    rmSync(logFile, { force: true });
  }
});

test("salt-master asked to stop with a runner thread blocked in a native call exits (by SIGKILL, saying why) instead of hanging", { timeout: 120_000 }, async () => {
  const tm = await startTestMaster();
  await tm.stop(true);
  const conf = writeConfigDir(tm);
  installBlockingRunner(tm.cfg);
  const f = neverWritten();
  const logFile = path.join(tm.root, "master.log");
  const master = spawn(process.execPath, [new URL("salt-master.js", CLI_DIR).pathname, "-c", conf, "-l", "info", "--log-file", logFile], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  master.stdout!.on("data", (d) => (out += d));
  master.stderr!.on("data", (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => master.once("exit", (code, signal) => r({ code, signal })));
  try {
    await until("the master's ready line", async () => (/ready/.test(out) ? true : master.exitCode !== null ? Promise.reject(new Error(out)) : undefined), 60_000, 100);
    const call = controlCall(tm.cfg.sock_dir, { op: "run", fun: "block.fifo", arg: [f.fifo, f.inside], kwarg: {} }).catch((e: Error) => e);
    await untilExists(f.inside);
    master.kill("SIGTERM");
    let timer: NodeJS.Timeout | undefined;
    const how = await Promise.race([exited, new Promise<"hanging">((r) => (timer = setTimeout(() => r("hanging"), stopWithinMs)))]);
    clearTimeout(timer);
    assert.notEqual(how, "hanging", `salt-master still running ${stopWithinMs / 1000} s after SIGTERM:\n${out}`);
    assert.deepEqual(how, { code: null, signal: "SIGKILL" });
    const text = readFileSync(logFile, "utf8");
    assert.match(text, /exiting by SIGKILL: runner block\.fifo \(thread \d+\) still running, blocked outside JavaScript/);
    assert.equal(existsSync(pidfilePath(tm.cfg)), false, "the pidfile was released before the exit");
    await call;
  } finally {
    f.release();
    if (master.exitCode === null && master.signalCode === null) master.kill("SIGKILL");
    rmSync(tm.root, { recursive: true, force: true });
  }
});
