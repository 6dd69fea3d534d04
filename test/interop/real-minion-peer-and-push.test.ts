/**
 * Issues 19 and 20 with real salt-minions (3007.x and 3006.8) against brine, each output compared with what
 * the Python master 3007 printed for the same command and config (peer: {a1: [test.*], b1: [test.ping]},
 * peer_run: {a1: [...]}, file_recv: True, file_recv_max_size: 1), captured in
 * test/fixtures/peer-and-push/python-master-3007.json:
 * - `salt a1 publish.publish a2 test.ping` → `{a1: {a2: True}}`; from the 3006.8 minion too; `full_data` →
 *   `{a2: {ret: True}}`;
 * - a minion without the right: `{a2: {}}`, exit status 0 (the Python master answers the same `{}`);
 * - `publish.runner` runs the allowed runner; a refused one answers `{}`;
 * - `cp.push` lands under cachedir/minions/<id>/files/<absolute path>; a 2 MB file over 1 MiB answers False
 *   (the Python master keeps a 1 MiB truncated part; brine removes it); an upload_path with `..` answers False
 *   (refused by the minion itself; the master's own check is tested with the test minion); `cp.push_dir`
 *   with a glob pushes the matching files of a tree.
 * Skips without Salt's source (SALT_GIT_DIR).
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { repoRoot } from "../helpers/paths.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

const skip = realSaltSkipReason();
/** `salt --out json` prints one object per minion as it returns: merged into one. */
const json = (s: string) => Object.assign({}, ...s.trim().split(/\n(?=\{)/).filter(Boolean).map((b) => JSON.parse(b))) as Record<string, unknown>;

describe("real salt-minions publish to each other and push files through brine", { skip, timeout: 600_000 }, () => {
  let m: TestMaster;
  let conf: string;
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rs-peer-"));
  const salt = async (...a: string[]) => {
    const r = await runCli("salt", ["-c", conf, ...a, "--out", "json", "-t", "60"], { timeoutMs: 120_000 });
    return { ...r, json: json(r.stdout) };
  };
  const python = JSON.parse(readFileSync(path.join(repoRoot, "test", "fixtures", "peer-and-push", "python-master-3007.json"), "utf8")) as Record<string, { out: unknown; rc: number }>;
  /** `salt <words>` prints what the Python master printed for `capture` (the command, with file names as placeholders), with its exit status. */
  const likePython = async (capture: string, ...words: string[]) => {
    const want = python[capture];
    assert.ok(want, `no capture named ${capture}`);
    const r = await salt(...words);
    assert.deepEqual(r.json, want.out, `${capture}: ${r.stdout}${r.stderr}`);
    assert.equal(r.code, want.rc, capture);
  };

  before(async () => {
    m = await startTestMaster({
      auto_accept: true,
      worker_threads: 2,
      peer: { a1: ["test.*"], b1: ["test.ping"] },
      peer_run: { a1: ["test\\.arg"] },
      file_recv: true,
      file_recv_max_size: 1,
    });
    conf = writeConfigDir(m);
    await Promise.all([
      startRealMinion(runDir, "a1", m.retPort, m.publishPort, "3007.x"),
      startRealMinion(runDir, "a2", m.retPort, m.publishPort, "3007.x"),
      startRealMinion(runDir, "b1", m.retPort, m.publishPort, "v3006.8"),
    ]);
    const r = await salt("*", "test.ping");
    assert.deepEqual(r.json, { a1: true, a2: true, b1: true }, r.stdout + r.stderr);
  });
  after(async () => {
    stopRealMinions(runDir);
    await m?.stop();
  });

  test("publish.publish: a1 (3007) and b1 (3006.8) ping a2; full_data gives {ret}; nothing matched gives None", async () => {
    await likePython("a1 publish.publish a2 test.ping", "a1", "publish.publish", "a2", "test.ping");
    await likePython("b1 publish.publish a2 test.ping", "b1", "publish.publish", "a2", "test.ping");
    await likePython("a1 publish.full_data a2 test.ping", "a1", "publish.full_data", "a2", "test.ping");
    await likePython("a1 publish.publish * test.echo hello", "a1", "publish.publish", "*", "test.echo", "hello");
    await likePython("a1 publish.publish nosuch* test.ping", "a1", "publish.publish", "nosuch*", "test.ping");
  });

  test("a refused peer publish answers {} with exit status 0, as the Python master's", async () => {
    await likePython("a2 publish.publish a1 test.ping", "a2", "publish.publish", "a1", "test.ping");
    await likePython("a1 publish.publish a2 cmd.run id", "a1", "publish.publish", "a2", "cmd.run", "id");
    const r = await salt("b1", "publish.publish", "a2", "test.echo", "x");
    assert.deepEqual(r.json, { b1: {} }, r.stdout + r.stderr);
  });

  test("publish.runner runs an allowed runner; a refused one answers {}", async () => {
    await likePython("a1 publish.runner test.arg hello", "a1", "publish.runner", "test.arg", "hello");
    await likePython("a2 publish.runner test.arg x", "a2", "publish.runner", "test.arg", "x");
  });

  test("cp.push lands under cachedir/minions/<id>/files; over file_recv_max_size or with .. it answers False", async () => {
    const small = path.join(runDir, "push1.txt");
    const mid = path.join(runDir, "mid.bin");
    const big = path.join(runDir, "big.bin");
    writeFileSync(small, "hello\n");
    writeFileSync(mid, randomBytes(600_000));
    writeFileSync(big, randomBytes(2_000_000));
    const landed = (id: string, p: string) => path.join(m.cachedir, "minions", id, "files", p);
    await likePython("a1 cp.push <small file>", "a1", "cp.push", small);
    assert.equal(readFileSync(landed("a1", small), "utf8"), "hello\n");
    await likePython("b1 cp.push <600 KB file>", "b1", "cp.push", mid);
    assert.ok(readFileSync(landed("b1", mid)).equals(readFileSync(mid)));
    await likePython("a1 cp.push <small file> upload_path=/new/p.txt", "a1", "cp.push", small, "upload_path=/new/p.txt");
    assert.equal(readFileSync(landed("a1", "new/p.txt"), "utf8"), "hello\n");
    await likePython("a1 cp.push <2 MB file>", "a1", "cp.push", big);
    assert.equal(existsSync(landed("a1", big)), false); // the Python master keeps a 1 MiB truncated part
    await likePython("a1 cp.push <small file> upload_path=/x/../../etc/y", "a1", "cp.push", small, "upload_path=/x/../../etc/y");
    const dir = path.join(runDir, "pd");
    mkdirSync(path.join(dir, "sub"), { recursive: true });
    writeFileSync(path.join(dir, "a.conf"), "x");
    writeFileSync(path.join(dir, "sub", "b.conf"), "y");
    writeFileSync(path.join(dir, "c.txt"), "z");
    await likePython("a1 cp.push_dir <dir> glob=*.conf", "a1", "cp.push_dir", dir, "glob=*.conf");
    assert.equal(readFileSync(landed("a1", path.join(dir, "sub", "b.conf")), "utf8"), "y");
    assert.equal(existsSync(landed("a1", path.join(dir, "c.txt"))), false);
  });
});
