/**
 * A git command that fails is a BrineError GIT_FAILED from the one catalogue (it was a side GitError class),
 * with the subcommand and git's exit status in its text, so gitfs and git_pillar log one coded error.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { git } from "../../src/lib/fileserver/git-cli.js";
import { isBrineError } from "../../src/shared/errors.js";

test("git in a directory that is no repository fails with GIT_FAILED naming the subcommand and its exit status", async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "brine-git-err-"));
  try {
    await assert.rejects(git(["rev-parse", "HEAD"], { gitDir: path.join(dir, "none.git") }), (e) => {
      assert.ok(isBrineError(e, "GIT_FAILED"), String(e));
      assert.match(e.message, /^a git command failed: git rev-parse exited 128: /);
      return true;
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
