/**
 * brine's `salt` and `salt-cp` with a real 3007 salt-minion: the texts equal what the Python CLI printed for
 * the same commands on a Python master with a real minion (test/fixtures/cli-output/python-cli/, captured with
 * the real-salt harness; minion id, jids, start times and durations normalised): a state function's return
 * through the highstate outputter (full and terse), a batch run, yaml and raw outputs of test.arg, -d (sys.doc); and salt-cp
 * plain and --chunked writing files (content, mode, empty directory) through the minion's own cp module.
 * Skips when Salt's source is absent.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, readFileSync, statSync, writeFileSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { repoRoot } from "../helpers/paths.js";

const skip = realSaltSkipReason(["3007.x"]);
const golden = (name: string) => readFileSync(path.join(repoRoot, "test", "fixtures", "cli-output", "python-cli", `${name}.txt`), "utf8");

/** The fixtures' normalisation: minion id, jids, start times, durations, run time. */
function normalise(s: string, id: string): string {
  return s
    .replace(new RegExp(`\\b${id}\\b`, "g"), "MINION")
    .replace(/\d{20}/g, "JID")
    .replace(/Started: \S+/g, "Started: T")
    .replace(/Duration: [\d.]+ ms/g, "Duration: D ms")
    .replace(/Total run time: +[\d.]+ m?s/g, "Total run time: R");
}

describe("brine's salt and salt-cp with a real salt-minion, against the Python CLI's texts", { skip, timeout: 600_000 }, () => {
  let m: TestMaster;
  let conf: string;
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-cli-"));
  const tmp = mkdtempSync(path.join(os.tmpdir(), "brine-cli-real-"));
  const salt = (...a: string[]) => runCli("salt", ["-c", conf, ...a]);

  before(async () => {
    m = await startTestMaster({ auto_accept: true, worker_threads: 2 });
    conf = writeConfigDir(m);
    await startRealMinion(runDir, "a1", m.retPort, m.publishPort, "3007.x");
  });
  after(async () => {
    stopRealMinions(runDir);
    await m?.stop();
  });

  const cases: [string, string[], number][] = [
    ["state-single-changes", ["a1", "state.single", "test.succeed_with_changes", "name=foo"], 0],
    ["state-single-terse-failed", ["a1", "state.single", "test.fail_without_changes", "name=bad", "--state-output=terse"], 1],
    ["batch-state-terse", ["-b", "1", "a1", "state.single", "test.succeed_without_changes", "name=bar", "--state-output=terse"], 0],
    ["batch-ping", ["-b", "1", "a1", "test.retcode", "0"], 0],
    ["test-arg-yaml", ["a1", "test.arg", "1", "two", "k=v", "--out", "yaml"], 0],
    ["test-arg-raw", ["a1", "test.arg", "1", "two", "k=v", "--out", "raw"], 0],
    ["doc-test-ping", ["a1", "-d", "test.ping"], 0],
  ];
  for (const [name, args, code] of cases) {
    test(`salt ${args.join(" ")} prints what the Python CLI printed (${name})`, async () => {
      const r = await salt(...args, "-t", "30");
      assert.equal(r.code, code, r.stderr);
      assert.equal(normalise(r.stdout, "a1"), golden(name));
    });
  }

  test("salt-cp: a file with cp.recv, a tree with --chunked (a file of several chunks, a mode, an empty directory)", async () => {
    const src = path.join(tmp, "src");
    mkdirSync(path.join(src, "tree", "sub", "empty"), { recursive: true });
    writeFileSync(path.join(src, "motd"), "hello\n");
    const big = randomBytes(200_000);
    writeFileSync(path.join(src, "tree", "sub", "big.bin"), big);
    writeFileSync(path.join(src, "tree", "run.sh"), "#!/bin/sh\n", { mode: 0o750 });
    const dest = path.join(tmp, "dest");
    mkdirSync(dest);
    const p = await runCli("salt-cp", ["-c", conf, "a1", path.join(src, "motd"), dest + "/", "-t", "30"]);
    assert.equal(p.code, 0, p.stderr);
    assert.equal(p.stdout, `a1:\n    ----------\n    ${path.join(dest, "motd")}:\n        True\n`);
    assert.equal(readFileSync(path.join(dest, "motd"), "utf8"), "hello\n");
    const c = await runCli("salt-cp", ["-c", conf, "-L", "a1", "-C", path.join(src, "tree"), path.join(dest, "c1"), "-t", "30"]);
    assert.equal(c.code, 0, c.stderr);
    const t = path.join(dest, "c1", "tree");
    assert.equal(c.stdout, `a1:\n    ----------\n    ${t}/run.sh:\n        True\n    ${t}/sub/big.bin:\n        True\n    ${t}/sub/empty:\n        True\n`);
    assert.ok(readFileSync(path.join(t, "sub", "big.bin")).equals(big));
    assert.equal(statSync(path.join(t, "run.sh")).mode & 0o777, 0o750);
    assert.ok(existsSync(path.join(t, "sub", "empty")));
  });
});
