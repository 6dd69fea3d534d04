/**
 * The `salt` CLI with external authentication, as Salt's CLI behaves: `-a <eauth>` sends the
 * credentials (asked for, or `--username`/`--password`), a refusal prints Salt's text on stdout with
 * exit 1, and `-T` trades them for a token kept in token_file for the next commands.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { eauthKwargs } from "../../src/lib/client/eauth-cli.js";

const SECRET = "cli-shared-secret-0123456789";

describe("salt -a (eauth from the command line)", { timeout: 300_000 }, () => {
  let tm: TestMaster;
  let m: TestMinion;
  let conf: string;
  let tokenFile: string;

  before(async () => {
    tm = await startTestMaster({
      auto_accept: true,
      sharedsecret: SECRET,
      external_auth: { sharedsecret: { pinger: ["test.ping"] } },
    });
    tokenFile = path.join(tm.root, "salt_token");
    tm.cfg.token_file = tokenFile;
    conf = writeConfigDir(tm);
    m = fastMinion(tm, "cli-eauth-1", (await testKeys(1))[0]!);
    await m.start();
  });
  after(async () => {
    await m.stop();
    await tm.stop();
  });

  test("a wrong password prints \"Authentication error occurred.\" and exits 1", async () => {
    const r = await runCli("salt", ["-c", conf, "-a", "sharedsecret", "--username", "pinger", "--password", "wrong", "*", "test.ping"]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout.trim(), "Authentication error occurred.");
  });

  test("a function outside the user's list prints \"Authorization error occurred.\" and exits 1", async () => {
    const r = await runCli("salt", ["-c", conf, "--eauth", "sharedsecret", "--username", "pinger", "--password", SECRET, "*", "cmd.run", "id"]);
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.stdout.trim(), "Authorization error occurred.");
  });

  test("the right credentials run the job; the username and password are asked for when not given", async () => {
    const r = await runCli("salt", ["-c", conf, "-a", "sharedsecret", "*", "test.ping"], { input: `pinger\n${SECRET}\n` });
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.match(r.stdout, /cli-eauth-1:\s+True/);
  });

  test("-T keeps a token (mode 0600); a refused -T login exits 2 with Salt's \"Authentication failed\"", async () => {
    const r = await runCli("salt", ["-c", conf, "-a", "sharedsecret", "-T", "--username", "pinger", "--password", SECRET, "*", "test.ping"]);
    assert.equal(r.code, 0, r.stderr + r.stdout);
    assert.ok(existsSync(tokenFile));
    assert.match(readFileSync(tokenFile, "utf8"), /^[0-9a-f]{64}$/);
    assert.equal(statSync(tokenFile).mode & 0o777, 0o600);
    const bad = await runCli("salt", ["-c", conf, "-a", "sharedsecret", "-T", "--username", "pinger", "--password", "nope", "*", "test.ping"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /ERROR: Authentication failed/);
  });
});

test("a user who cannot read the master's CLI key publishes with the saved token; one who can sends the key alone", async () => {
  const dir = (await import("node:fs")).mkdtempSync(path.join((await import("node:os")).tmpdir(), "brine-tok-"));
  const file = path.join(dir, "tok");
  (await import("node:fs")).writeFileSync(file, "ab".repeat(32) + "\n");
  const cfg = { token_file: file } as never;
  const never = async () => assert.fail("no mk_token without -T");
  assert.deepEqual(await eauthKwargs(cfg, {}, false, never), { token: "ab".repeat(32) });
  assert.deepEqual(await eauthKwargs(cfg, {}, true, never), {});
  assert.deepEqual(await eauthKwargs({ token_file: path.join(dir, "none") } as never, {}, false, never), {});
});
