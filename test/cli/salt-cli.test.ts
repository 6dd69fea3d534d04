/**
 * brine's `salt` and `salt-cp` end to end against a test master and test minions: batch runs (the sub-job
 * lines, returns as each minion answers, a minion that did not answer the ping, --failhard, the exit code,
 * --batch-safe-limit), --static, --subset, the returner options in the publish load, --out-file and
 * --out-file-append, --summary, --version, and salt-cp plain and --chunked. The texts are those the Python CLI
 * printed for the same commands (the real-salt harness: a Python master and three 3007 minions).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, readFileSync, statSync, writeFileSync, existsSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys, waitForEvent } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

describe("the salt and salt-cp command lines", { timeout: 300_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  let tmp: string;
  const minions: TestMinion[] = [];
  const salt = (...a: string[]) => runCli("salt", ["-c", conf, ...a]);
  const saltCp = (...a: string[]) => runCli("salt-cp", ["-c", conf, ...a]);
  const jid = /\d{20}/g;

  before(async () => {
    tm = await startTestMaster({ auto_accept: true });
    conf = writeConfigDir(tm);
    tmp = mkdtempSync(path.join(os.tmpdir(), "brine-cli-"));
    const k = await testKeys(4);
    for (const [i, id] of ["cb1", "cb2", "cb3", "cbdown"].entries()) minions.push(fastMinion(tm, id, k[i]!));
    await Promise.all(minions.map((m) => m.start()));
    // cbdown has an accepted key but is not running: the batch's ping finds it silent
    await minions[3]!.stop();
  });
  after(async () => {
    for (const m of minions) await m.stop();
    await tm.stop();
    rmSync(tmp, { recursive: true, force: true });
  });

  test("batch: each sub-job is announced, each return shown as {minion, jid, retcode}, the silent minion named", async () => {
    const r = await salt("-b", "2", "cb*", "test.ping", "-t", "1", "--gather-job-timeout", "1");
    assert.equal(r.code, 0, r.stderr);
    const out = r.stdout.replace(jid, "JID");
    assert.match(out, /^Minion cbdown did not respond\. No job will be sent\.\n\nExecuting run on \['cb1', 'cb2'\]\n\n/);
    assert.match(out, /\nExecuting run on \['cb3'\]\n\n/);
    for (const id of ["cb1", "cb2", "cb3"]) assert.ok(out.includes(`${id}:\n    True\njid:\n    JID\nretcode:\n    0\n`), out);
  });

  test("batch: the exit code is the highest retcode; --failhard stops at the first failure with Salt's log line", async () => {
    const r = await salt("-b", "1", "-L", "cb1,cb2", "test.retcode", "3", "-t", "5");
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.equal(r.stdout.match(/Executing run on/g)?.length, 2);
    const f = await salt("-b", "1", "-L", "cb1,cb2", "test.retcode", "2", "--failhard", "-t", "5");
    assert.equal(f.code, 2);
    assert.equal(f.stdout.match(/Executing run on/g)?.length, 1);
    assert.match(f.stderr, /\[ERROR {3}\] Minion cb[12] returned with non-zero exit code\. Batch run stopped due to failhard/);
  });

  test("batch with N%: 50% of three minions runs one at a time", async () => {
    const r = await salt("-b", "50%", "-L", "cb1,cb2,cb3", "test.ping", "-t", "5");
    assert.equal(r.code, 0);
    assert.equal(r.stdout.match(/Executing run on \['cb\d'\]/g)?.length, 3);
  });

  test("--batch-safe-limit: a target that matches that many minions switches to batch mode with --batch-safe-size", async () => {
    const r = await salt("--batch-safe-limit", "2", "--batch-safe-size", "3", "-L", "cb1,cb2", "test.ping", "-t", "5");
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^\nNOTICE: Too many minions targeted, switching to batch execution\.\n\nExecuting run on \['cb1', 'cb2'\]\n/);
  });

  test("--preview-target lists the minions the target matches and publishes nothing", async () => {
    const r = await salt("--preview-target", "cb*");
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, "- cb1\n- cb2\n- cb3\n- cbdown\n");
  });

  test("no match: batch mode and --static say so as the Python CLI does (batch exits 0, --static 2)", async () => {
    const b = await salt("-b", "1", "nomatch*", "test.ping", "-t", "2");
    assert.equal(b.code, 0);
    assert.equal(b.stdout, "No minions matched the target. No command was sent, no jid was assigned.\nNo minions matched the target.\n");
    const s = await salt("--static", "nomatch*", "test.ping", "-t", "2");
    assert.equal(s.code, 2);
    assert.equal(s.stdout, "No minions matched the target. No command was sent, no jid was assigned.\n");
    assert.equal(s.stderr, "ERROR: No return received\n");
  });

  test("--static prints all returns together once they are in", async () => {
    const r = await salt("--static", "-L", "cb1,cb2", "test.ping", "--out", "json", "-t", "5");
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { cb1: true, cb2: true });
  });

  test("--subset 1 runs on exactly one targeted minion that has the function", async () => {
    const r = await salt("--subset", "1", "cb[123]", "test.ping", "--out", "json", "-t", "5");
    assert.equal(r.code, 0, r.stderr);
    assert.equal(Object.keys(JSON.parse(r.stdout)).length, 1);
  });

  test("--return, --return_config, --return_kwargs and --metadata reach the minion in the publish as Salt sends them", async () => {
    const seen = waitForEvent(minions[0]!, "publish", (x) => x.load.fun === "test.echo");
    const r = await salt("cb1", "test.echo", "hi", "--return", "syslog", "--return_config", "alt", "--return_kwargs", "{facility: LOG_USER}", "--metadata", "{ticket: 7}", "--module-executors", "[direct_call]", "--executor-opts", "{a: 1}", "-t", "5");
    assert.equal(r.code, 0, r.stderr);
    const { load } = await seen;
    assert.equal(load.ret, "syslog");
    assert.equal(load.ret_config, "alt");
    assert.deepEqual(load.ret_kwargs, { facility: "LOG_USER" });
    assert.deepEqual(load.metadata, { ticket: 7 });
    assert.deepEqual(load.module_executors, ["direct_call"]);
    assert.deepEqual(load.executor_opts, { a: 1 });
  });

  test("--args-stdin: stdin's lines are more arguments and options, after the command line's", async () => {
    const r = await runCli("salt", ["-c", conf, "--args-stdin", "cb1", "test.arg"], { input: "a b\nk=v\n--out\njson\n" });
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { cb1: { args: ["a b"], kwargs: { k: "v" } } });
  });

  test("--out-file writes the output to a file, emptied first; --out-file-append adds to it", async () => {
    const f = path.join(tmp, "out.txt");
    writeFileSync(f, "old\n");
    const a = await salt("cb1", "test.ping", "--out-file", f, "-t", "5");
    assert.equal(a.stdout, "");
    assert.equal(readFileSync(f, "utf8"), "cb1:\n    True\n");
    await salt("cb2", "test.ping", "--out-file", f, "--out-file-append", "-t", "5");
    assert.equal(readFileSync(f, "utf8"), "cb1:\n    True\ncb2:\n    True\n");
  });

  test("a state function's return goes to the highstate outputter; --state-output terse, --force-color and --out-indent apply", async () => {
    const r = await salt("cb1", "state.sls", "web", "-t", "5");
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^cb1:\n----------\n          ID: web\n    Function: test\.succeed_with_changes\n      Result: True\n/);
    assert.match(r.stdout, /\nSummary for cb1\n------------\nSucceeded: 1 \(changed=1\)\nFailed:    0\n------------\nTotal states run:     1\nTotal run time:   0\.500 ms\n$/);
    const t = await salt("cb1", "state.sls", "web,fail1", "--state-output", "terse", "-t", "5");
    assert.equal(t.code, 1);
    assert.match(t.stdout, /^cb1:\n  Name: web - Function: test\.succeed_with_changes - Result: Changed - Started: \S+ - Duration: 0\.5 ms\n  Name: fail1 - Function: test\.fail_with_changes - Result: Failed - Started: \S+ - Duration: 0\.5 ms\n/);
    const c = await salt("cb1", "test.ping", "--force-color", "-t", "5");
    assert.equal(c.stdout, "\x1b[0;36mcb1\x1b[0;0m:\n    \x1b[0;1;33mTrue\x1b[0;0m\n");
    const n = await salt("-L", "cb1,cb2", "test.arg", "a", "--out", "json", "--out-indent", "-1", "-t", "5");
    assert.deepEqual(n.stdout.trim().split("\n").map((l) => Object.keys(JSON.parse(l))[0]).sort(), ["cb1", "cb2"]);
  });

  test("an unknown --out is reported as Salt logs it and the return printed with nested", async () => {
    const r = await salt("cb1", "test.ping", "--out", "nosuch", "-t", "5");
    assert.equal(r.code, 0);
    assert.equal(r.stdout, "cb1:\n    True\n");
    assert.match(r.stderr, /\[ERROR {3}\] Invalid outputter nosuch specified, fall back to nested/);
  });

  test("--summary counts the returns as Salt's does", async () => {
    const r = await salt("-L", "cb1,cb2", "test.ping", "--summary", "-t", "5");
    assert.match(r.stdout, /\n\n\n-------------------------------------------\nSummary\n-------------------------------------------\n# of minions targeted: 2\n# of minions returned: 2\n# of minions that did not return: 0\n# of minions with errors: 0\n-------------------------------------------\n$/);
  });

  test("--config-dump prints the configuration brine reads, in YAML", async () => {
    const r = await salt("--config-dump");
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`\\nret_port: ${tm.retPort}\\n`));
  });

  test("--version says brine's version and the Salt version it speaks", async () => {
    const r = await salt("--version");
    assert.equal(r.code, 0);
    assert.match(r.stdout, /^salt \(brine \d+\.\d+\.\d+\) speaking Salt 3007\.\d+\n$/);
    const v = await salt("--versions-report");
    assert.match(v.stdout, /Salt Version:\n +Salt: 3007\.\d+ \(the Salt version brine speaks; this is brine, not Python Salt\)/);
  });

  test("salt-cp: one file to a directory with cp.recv; the answer is {minion: {path: True}}", async () => {
    const srcFile = path.join(tmp, "motd");
    writeFileSync(srcFile, "hello\n");
    const dest = path.join(tmp, "plain-dest");
    mkdirSync(dest);
    const r = await saltCp("-L", "cb1", srcFile, dest + "/", "-t", "5");
    assert.equal(r.code, 0, r.stderr);
    assert.equal(readFileSync(path.join(dest, "motd"), "utf8"), "hello\n");
    assert.equal(r.stdout, `cb1:\n    ----------\n    ${path.join(dest, "motd")}:\n        True\n`);
    const d = await saltCp("cb1", tmp, dest);
    assert.equal(d.code, 1);
    assert.match(d.stdout, /is a directory, only files are supported in non-chunked mode\. Use "--chunked" command line argument\./);
  });

  test("salt-cp --chunked: a tree with an empty directory and a file bigger than one chunk arrives whole, modes kept", async () => {
    const tree = path.join(tmp, "tree");
    mkdirSync(path.join(tree, "sub", "empty"), { recursive: true });
    const big = Buffer.alloc(250_000, "abcdefghij");
    writeFileSync(path.join(tree, "sub", "big.bin"), big);
    writeFileSync(path.join(tree, "run.sh"), "#!/bin/sh\n", { mode: 0o750 });
    const dest = path.join(tmp, "chunked-dest");
    for (const extra of [[], ["-n"]]) {
      rmSync(dest, { recursive: true, force: true });
      // one minion: test minions share this host's file system
      const r = await saltCp("-C", ...extra, "-L", "cb1", tree, dest, "-t", "5");
      assert.equal(r.code, 0, r.stderr);
      assert.ok(readFileSync(path.join(dest, "tree", "sub", "big.bin")).equals(big));
      assert.equal(statSync(path.join(dest, "tree", "run.sh")).mode & 0o777, 0o750);
      assert.ok(existsSync(path.join(dest, "tree", "sub", "empty")));
      assert.ok(r.stdout.includes(`cb1:\n    ----------\n    ${path.join(dest, "tree", "run.sh")}:\n        True\n`), r.stdout);
    }
  });
});
