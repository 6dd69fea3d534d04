/**
 * Acceptance by salt-api's own CLI client: `pepper` (Debian's salt-pepper, which .ci/run installs) logs
 * in to brine's HTTP API with sharedsecret eauth and runs test.ping on the test minions, the runner
 * jobs.list_jobs and the wheel key.list_all. Skipped, with a message, only when pepper is absent.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { TestMaster } from "../helpers/master.js";
import { API_SECRET, startApiMaster } from "../helpers/api.js";
import { fastMinion, testKeys } from "../helpers/minions.js";

/** Debian installs the CLI as `salt-pepper`; pip as `pepper`. */
const PEPPER = ["salt-pepper", "pepper"].find((c) => spawnSync(c, ["--version"], { stdio: "ignore" }).status === 0);
const skip = PEPPER ? false : "salt-pepper is not installed (apt-get install salt-pepper; .ci/run installs it)";

function pepper(base: string, home: string, args: string[], password = API_SECRET): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(PEPPER!, ["--saltapi-url", base, "--username", "alice", "--password", password, "-a", "sharedsecret", ...args], {
      env: { ...process.env, HOME: home, PEPPERRC: path.join(home, "none") },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    p.stdout.on("data", (d) => (stdout += d));
    p.stderr.on("data", (d) => (stderr += d));
    const t = setTimeout(() => p.kill("SIGKILL"), 60_000);
    p.on("close", (code) => {
      clearTimeout(t);
      resolve({ code, stdout, stderr });
    });
  });
}

describe("pepper against brine's HTTP API", { skip, timeout: 180_000 }, () => {
  let tm: TestMaster;
  let base: string;
  let home: string;
  const minions: TestMinion[] = [];

  before(async () => {
    ({ tm, base } = await startApiMaster());
    home = mkdtempSync(path.join(os.tmpdir(), "brine-pepper-"));
    const k = await testKeys(2);
    for (const [i, id] of ["pep-m1", "pep-m2"].entries()) minions.push(fastMinion(tm, id, k[i]!));
    await Promise.all(minions.map((m) => m.start()));
  });
  after(async () => {
    for (const m of minions) await m.stop();
    await tm?.stop();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  test("pepper '*' test.ping", async () => {
    const r = await pepper(base, home, ["*", "test.ping"]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { return: [{ "pep-m1": true, "pep-m2": true }] });
  });

  test("pepper --client runner jobs.list_jobs", async () => {
    const r = await pepper(base, home, ["--client", "runner", "jobs.list_jobs"]);
    assert.equal(r.code, 0, r.stderr);
    const jobs = JSON.parse(r.stdout).return[0];
    assert.ok(Object.values(jobs).some((j: any) => j.Function === "test.ping"), r.stdout);
  });

  test("pepper --client wheel key.list_all", async () => {
    const r = await pepper(base, home, ["--client", "wheel", "key.list_all"]);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).return[0].data.return.minions, ["pep-m1", "pep-m2"]);
  });

  test("pepper with a wrong password is refused", async () => {
    // (asynchronously: the master runs in this process)
    const p = await pepper(base, home, ["*", "test.ping"], "nope");
    assert.notEqual(p.code, 0);
    assert.match(p.stdout + p.stderr, /Authentication denied|401/);
  });
});
