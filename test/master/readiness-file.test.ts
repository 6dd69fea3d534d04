/**
 * A single master's readiness file (`cachedir/health/ready`): present once it serves, gone once it stops;
 * `salt-run cluster.health` on a master without `cluster_id` answers as the other cluster runners do.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync } from "node:fs";
import path from "node:path";
import { startTestMaster } from "../helpers/master.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

test("a single master's readiness file is there while it serves and removed when it stops", { timeout: 60_000 }, async () => {
  const tm = await startTestMaster();
  const file = path.join(tm.cachedir, "health", "ready");
  try {
    assert.ok(existsSync(file), "written before start() returned");
    assert.match(readFileSync(file, "utf8"), /^\d{4}-\d\d-\d\dT.* serving\n$/);
    const r = await runCli("salt-run", ["-c", writeConfigDir(tm), "cluster.health", "--out", "json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { status: "skipped", reason: "cluster_id is not set" });
  } finally {
    await tm.stop(true);
  }
  assert.equal(existsSync(file), false, "a stopped master is not ready");
  rmSync(tm.root, { recursive: true, force: true });
});
