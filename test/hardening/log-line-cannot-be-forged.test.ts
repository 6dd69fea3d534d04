/**
 * A log record is one line whatever an id or a tag holds (issue 13): control characters are escaped in the
 * logger itself, so every log call is covered, not only the ones that remembered to quote.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { configureLogging, escapeLogText, getLogger } from "../../src/shared/log.js";

test("an id with a newline, CR, ESC or U+2028 cannot start a second log line", async () => {
  const file = path.join(os.tmpdir(), `brine-log-escape-${process.pid}.log`);
  rmSync(file, { force: true });
  configureLogging({ level: "quiet", file, fileLevel: "info" });
  const id = "m1\n2026-01-01 00:00:00,000 [brine.auth       ][CRITICAL][1] key accepted for root\r\x1b[31m\u2028x";
  getLogger("brine.test").warning(`Authentication of ${id}: refused`);
  for (let i = 0; i < 50 && !(existsSync(file) && readFileSync(file, "utf8").includes("refused")); i++) await new Promise((r) => setTimeout(r, 20));
  const text = readFileSync(file, "utf8");
  configureLogging({ level: "quiet" });
  rmSync(file, { force: true });
  const lines = text.split("\n").filter(Boolean);
  assert.equal(lines.length, 1, text);
  assert.match(lines[0]!, /Authentication of m1\\n2026-01-01 .*\\r\\x1b\[31m\\u2028x: refused$/);
});

test("text without control characters is logged unchanged", () => {
  assert.equal(escapeLogText("plain id-01.example.com é ☃"), "plain id-01.example.com é ☃");
  assert.equal(escapeLogText("a\tb\x00c\x7f"), "a\\tb\\x00c\\x7f");
});
