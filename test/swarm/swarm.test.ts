/**
 * brine-swarm against a brine master in this process: 50 minions all sign in and all answer a ping, and the
 * report's counts agree with each other; a second run reuses the key pool; a minion whose key is rejected is
 * reported as such; forked workers and the CLI produce the same report; the descriptor check refuses
 * plans that cannot fit.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { isBrineError } from "../../src/shared/errors.js";
import { ensureKeyPool, loadKeySlot } from "../../src/lib/minion/keys.js";
import { checkFdLimit, fdLimits } from "../../tools/swarm/fd-limit.js";
import { formatReport, type SwarmReport } from "../../tools/swarm/report.js";
import { runSwarm, type SwarmOptions } from "../../tools/swarm/swarm.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";

const SHARED_KEYS = path.join(os.tmpdir(), "brine-test-swarm-keys");

function fastOpts(tm: TestMaster, extra: Partial<SwarmOptions>): SwarmOptions {
  return {
    scenario: "ping",
    master: "127.0.0.1",
    retPort: tm.retPort,
    minions: 10,
    rootKey: tm.rootKey,
    keyDir: SHARED_KEYS,
    acceptanceWaitMs: 200,
    randomReauthDelayMs: 0,
    reconDefaultMs: 100,
    reconMaxMs: 200,
    authTimeoutMs: 10_000,
    requestTimeoutMs: 20_000,
    jobTimeoutMs: 30_000,
    startTimeoutMs: 60_000,
    progress: false,
    ...extra,
  };
}

/** Run the CLI without blocking this process (the master under test lives here). */
function runCli(args: string[], timeoutMs = 120_000): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const cli = new URL("../../tools/swarm/cli.js", import.meta.url).pathname;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const t = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (status) => {
      clearTimeout(t);
      resolve({ status, stdout, stderr });
    });
  });
}

function consistent(r: SwarmReport): void {
  assert.equal(r.returned, r.jobs.reduce((s, j) => s + j.returned, 0));
  assert.equal(r.expected_returns, r.jobs.reduce((s, j) => s + j.expected, 0));
  assert.equal(r.missing_returns, r.expected_returns - r.returned);
  assert.equal(r.auth_failed, r.minions - r.authenticated);
  assert.equal(r.errors, Object.values(r.error_counts).reduce((s, n) => s + n, 0));
}

describe("brine-swarm ⇄ brine master", () => {
  let tm: TestMaster;
  before(async () => {
    tm = await startTestMaster({ auto_accept: true });
  });
  after(async () => {
    await tm.stop();
  });

  test("50 minions: every minion authenticates, every ping returns, counts match; the key pool is reused on a second run", async () => {
    const keyDir = mkdtempSync(path.join(os.tmpdir(), "brine-swarm-pool-"));
    try {
      const r = await runSwarm(fastOpts(tm, { minions: 50, keyDir, idPrefix: "s50-", count: 2 }));
      assert.equal(r.key_pool.generated, 50);
      assert.equal(r.authenticated, 50);
      assert.equal(r.ready, 50);
      assert.equal(r.published, 2);
      assert.equal(r.expected_returns, 100);
      assert.equal(r.returned, 100, JSON.stringify(r.error_list.slice(0, 5)));
      assert.equal(r.missing_returns, 0);
      assert.equal(r.errors, 0, JSON.stringify(r.error_list.slice(0, 5)));
      for (const j of r.jobs) assert.equal(j.returned, 50);
      assert.ok(r.auth_per_s! > 0 && r.auth_p50_ms! <= r.auth_p99_ms!);
      assert.ok(r.first_return_ms! <= r.last_return_ms!);
      assert.ok(r.returns_per_s! > 0);
      consistent(r);
      assert.match(formatReport(r), /authenticated\s+50 \/ 50/);

      const again = await runSwarm(fastOpts(tm, { scenario: "auth-storm", minions: 50, keyDir, idPrefix: "s50-" }));
      assert.equal(again.key_pool.generated, 0);
      assert.equal(again.key_pool.reused, 50);
      assert.equal(again.authenticated, 50, "the master still accepts the same ids with the same keys");
      assert.equal(again.published, 0);
      consistent(again);
    } finally {
      rmSync(keyDir, { recursive: true, force: true });
    }
  });

  test("a minion whose key is rejected is reported as such", async () => {
    const rejected = "rej-00003";
    await ensureKeyPool(6, { dir: SHARED_KEYS });
    mkdirSync(path.join(tm.pkiDir, "minions_rejected"), { recursive: true });
    writeFileSync(path.join(tm.pkiDir, "minions_rejected", rejected), loadKeySlot(SHARED_KEYS, 3).pub);
    const r = await runSwarm(fastOpts(tm, { minions: 6, idPrefix: "rej-", keyDir: SHARED_KEYS }));
    assert.equal(r.authenticated, 5);
    assert.equal(r.auth_failed, 1);
    assert.equal(r.start_failures.MINION_AUTH_REJECTED, 1);
    assert.equal(r.auth_results.rejected, 1);
    assert.equal(r.error_counts.auth_rejected, 1);
    const listed = r.error_list.filter((e) => e.minion === rejected).map((e) => e.kind);
    assert.ok(listed.includes("auth_rejected") && listed.includes("minion_auth_rejected"), listed.join());
    assert.equal(r.returned, 5, "the others still answer");
    assert.equal(r.jobs[0]!.expected, 5);
    consistent(r);
  });

  test("v2 minions spread over two forked worker processes", async () => {
    const r = await runSwarm(fastOpts(tm, { minions: 12, procs: 2, protocol: "v2", idPrefix: "fork-", inProcess: false }));
    assert.equal(r.swarm_process.workers.length, 2);
    assert.ok(r.swarm_process.workers.every((w) => w.pid !== process.pid && w.minions === 6));
    assert.equal(r.authenticated, 12);
    assert.equal(r.returned, 12);
    assert.equal(r.errors, 0, JSON.stringify(r.error_list.slice(0, 5)));
    consistent(r);
  });

  test("steady and churn scenarios run and count", async () => {
    const s = await runSwarm(fastOpts(tm, { scenario: "steady", minions: 8, idPrefix: "st-", intervalS: 0.3, durationS: 1 }));
    assert.ok(s.published >= 2);
    assert.equal(s.returned, s.published * 8);
    consistent(s);
    const c = await runSwarm(fastOpts(tm, { scenario: "churn", minions: 8, idPrefix: "ch-", intervalS: 0.5, durationS: 1, churnFraction: 0.5, reconDefaultMs: 50, reconMaxMs: 100 }));
    assert.ok(c.churn && c.churn.rounds >= 1);
    assert.equal(c.churn!.reconnects, c.churn!.rounds * 4);
    assert.equal(c.churn!.reconnect_failures, 0);
    assert.equal(c.missing_returns, 0, JSON.stringify(c.error_list.slice(0, 5)));
    consistent(c);
  });

  test("the CLI: human table on stdout, every figure in --json", async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "brine-swarm-cli-"));
    try {
      const keyFile = path.join(dir, ".root_key");
      writeFileSync(keyFile, tm.rootKey);
      const out = path.join(dir, "report.json");
      const res = await runCli([
        "ping", "--master", "127.0.0.1", "--ret-port", String(tm.retPort), "--minions", "5", "--root-key", keyFile, "--json", out,
        "--key-dir", SHARED_KEYS, "--id-prefix", "cli-", "--accept-wait", "0.2", "--reauth-delay", "0", "--timeout", "30", "--master-pid", String(process.pid),
      ]);
      assert.equal(res.status, 0, res.stderr + res.stdout);
      assert.match(res.stdout, /authenticated\s+5 \/ 5/);
      assert.match(res.stdout, /returned\s+5 \/ 5/);
      const r = JSON.parse(readFileSync(out, "utf8")) as SwarmReport;
      for (const k of ["scenario", "minions", "authenticated", "auth_per_s", "auth_p50_ms", "auth_p99_ms", "returned", "returns_per_s", "first_return_ms", "last_return_ms", "errors"]) {
        assert.ok(k in r, k);
      }
      assert.equal(r.scenario, "ping");
      assert.equal(r.returned, 5);
      assert.ok(r.master_process && r.master_process.pid === process.pid && r.master_process.rss_mb_peak > 0);
      assert.ok(r.hardware.cpus > 0 && r.versions.libzmq);

      const bad = await runCli(["ping", "--master", "127.0.0.1", "--minions", "5"], 30_000);
      assert.equal(bad.status, 2);
      assert.match(bad.stderr, /root key/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("file-descriptor check", () => {
  test("reads /proc/self/limits", () => {
    const l = fdLimits();
    if (process.platform === "linux") assert.ok(l && l.soft > 0 && l.hard >= l.soft);
    assert.deepEqual(fdLimits("Max open files            1024                 4096                 files\n"), { soft: 1024, hard: 4096 });
  });

  test("refuses a plan that does not fit, and says what to change", () => {
    const limits = { soft: 1024, hard: 10_000 };
    assert.throws(
      () => checkFdLimit(1000, 1, true, 0, limits),
      (e: unknown) => isBrineError(e, "SWARM_FD_LIMIT") && /ulimit -n \d+/.test(e.message) && /--procs \d+/.test(e.message) && /no-pub-monitor/.test(e.message),
    );
    assert.equal(checkFdLimit(1000, 8, true, 0, limits).perProcess, 125);
    assert.throws(() => checkFdLimit(100_000, 1, false, 0, limits), (e: unknown) => isBrineError(e, "SWARM_FD_LIMIT") && /hard limit/.test(e.message));
  });
});
