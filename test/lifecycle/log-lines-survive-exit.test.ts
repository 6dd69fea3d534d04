/**
 * The master's log writer (src/shared/log.ts): each line is written before the logging call returns, so a
 * process that logs and exits at once (a failed start, a signal's stop, a thread's last word) leaves every
 * line in the file; each sink keeps its own level; the console copy goes to stderr.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { configureLogging, getLogger } from "../../src/shared/log.js";

const LOG_MODULE = new URL("../../src/shared/log.js", import.meta.url).href;

test("a line logged just before process.exit() is in the log file", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-log-exit-"));
  try {
    const file = path.join(dir, "sub", "master.log");
    const script = `import { configureLogging, getLogger } from ${JSON.stringify(LOG_MODULE)};
configureLogging({ level: "quiet", file: ${JSON.stringify(file)}, fileLevel: "info" });
const log = getLogger("brine.exit-test");
for (let i = 0; i < 200; i++) log.info("line " + i);
log.critical("the last word");
process.exit(3);`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
    assert.equal(r.status, 3, r.stderr);
    const lines = readFileSync(file, "utf8").split("\n").filter(Boolean);
    assert.equal(lines.length, 201, lines.slice(-3).join("\n"));
    assert.match(lines[200]!, /\[brine\.exit-test {2}\]\[CRITICAL\]\[\d+\] the last word$/);
    assert.equal(r.stderr, "", "the console's level is quiet");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("each sink keeps its level: the file takes info, the console only errors, on stderr", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-log-levels-"));
  try {
    const file = path.join(dir, "master.log");
    const script = `import { configureLogging, getLogger } from ${JSON.stringify(LOG_MODULE)};
configureLogging({ level: "error", file: ${JSON.stringify(file)}, fileLevel: "info" });
const log = getLogger("brine.levels");
log.debug("debug line"); log.info("info line"); log.warning("warning line"); log.error("error line");`;
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    const lines = readFileSync(file, "utf8").split("\n").filter(Boolean);
    assert.deepEqual(lines.map((l) => l.replace(/^.*\] /, "")), ["info line", "warning line", "error line"]);
    assert.deepEqual(r.stderr.split("\n").filter(Boolean).map((l) => l.replace(/^.*\] /, "")), ["error line"]);
    assert.equal(r.stdout, "");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("reconfiguring moves the file: later lines go to the new one only", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-log-move-"));
  try {
    const [a, b] = [path.join(dir, "a.log"), path.join(dir, "b.log")];
    configureLogging({ level: "quiet", file: a, fileLevel: "info" });
    getLogger("brine.move").info("to a");
    configureLogging({ level: "quiet", file: b, fileLevel: "info" });
    getLogger("brine.move").info("to b");
    configureLogging({ level: "quiet" });
    getLogger("brine.move").info("nowhere");
    assert.match(readFileSync(a, "utf8"), /\] to a\n$/);
    assert.match(readFileSync(b, "utf8"), /\] to b\n$/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
