/**
 * The test runner (scripts/run-tests.mjs) on a file that never ends: before it kills the file's process, it asks
 * node for a diagnostic report and prints where the file waits (each thread's JavaScript stack, the open handles),
 * so that a rare hang in CI says what it waited on. The file is a fixture written here, in a directory of its own
 * laid out as the repository is (dist/test/…, with its source under test/), run with a 3 s limit.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { repoRoot } from "../helpers/paths.js";

const HANGING_FILE = `
import net from "node:net";
import { Worker } from "node:worker_threads";
const server = net.createServer().listen(0, "127.0.0.1");
// a worker that never ends either, busy in a function the report must name
new Worker("function busyInTheWorker() { for (;;); } busyInTheWorker();", { eval: true });
function neverSettles() { return new Promise(() => {}); }
await neverSettles();
`;

test("a test file past its limit is reported with its threads' stacks and open handles before it is killed", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-hang-"));
  try {
    mkdirSync(path.join(dir, "dist", "test"), { recursive: true });
    mkdirSync(path.join(dir, "test"), { recursive: true });
    writeFileSync(path.join(dir, "dist", "test", "hangs.test.js"), HANGING_FILE);
    writeFileSync(path.join(dir, "test", "hangs.test.ts"), "// the source the runner looks for\n");
    const runner = spawn(process.execPath, [path.join(repoRoot, "scripts", "run-tests.mjs")], { cwd: dir, env: { ...process.env, BRINE_TEST_FILE_TIMEOUT_S: "3" }, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    runner.stdout.on("data", (b: Buffer) => (out += b.toString("utf8")));
    runner.stderr.on("data", (b: Buffer) => (out += b.toString("utf8")));
    const code = await new Promise<number | null>((r) => runner.on("close", r));
    assert.equal(code, 1, out);
    assert.match(out, /ran past its 3 s and was killed/, out);
    assert.match(out, /# hang report \(node diagnostic report/, out);
    // the main thread idle, with the listening server among its handles; the worker's stack names where it is
    assert.match(out, /## main thread: no JavaScript running[^\n]*\n\s+active libuv handles: \d+ referenced[^\n]*\n(?:\s+- [^\n]*\n)*?\s+- tcp[^\n]*127\.0\.0\.1/, out);
    assert.match(out, /## worker 1[^\n]*\n(?:[^\n]*\n)*?[^\n]*busyInTheWorker/, out);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
