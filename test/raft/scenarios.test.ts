/**
 * Replays every golden scenario under test/raft/testdata and compares each command's output with the text
 * stored after it. A difference fails with the command, so the diff points at the first divergent step.
 * `REWRITE=1` regenerates the files instead (review the diff before committing).
 */
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { repoRoot } from "../helpers/paths.js";
import { runScenario } from "./scenario.js";

const dir = path.join(repoRoot, "test", "raft", "testdata");
const files = readdirSync(dir).filter((f) => f.endsWith(".txt")).sort();

test("golden scenario files exist", () => {
  assert.ok(files.length >= 7, `expected at least 7 scenarios in ${dir}, found ${files.length}`);
});

for (const f of files) {
  test(`scenario ${f}`, () => {
    const { blocks, actual } = runScenario(path.join(dir, f));
    blocks.forEach((b, k) => {
      assert.equal(actual[k], b.expected, `${f}: output of "${b.command}" (block ${k + 1}) differs`);
    });
  });
}
