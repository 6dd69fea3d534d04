/**
 * The real Python salt-api (rest_cherrypy, 3007.x from Salt's source) pointed at brine, as an operator
 * who keeps salt-api beside the master would run it: /login mints the token at brine (mk_token), `local`
 * publishes through brine with the user's rights and collects a real minion's return from brine's bus,
 * refusals are brine's eauth decisions, runner and wheel calls run in brine. Also Salt's own `salt` CLI
 * against brine. Skips without Salt's source (SALT_GIT_DIR) or Debian's python3-cherrypy3.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { stringify } from "yaml";
import { freePort, startTestMaster, type TestMaster } from "../helpers/master.js";
import { realSaltEnv, realSaltSkipReason, realSaltSource, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";

const SECRET = "python-api-secret-0123456789";

function skipReason(): string | undefined {
  const r = realSaltSkipReason(["3007.x"]);
  if (r) return r;
  if (spawnSync("/usr/bin/python3", ["-c", "import cherrypy"]).status !== 0) return "python3-cherrypy3 is not installed: the real salt-api test is skipped";
  return undefined;
}
const skip = skipReason();

describe("the real Python salt-api and salt CLI in front of brine", { skip, timeout: 300_000 }, () => {
  let tm: TestMaster;
  let dir: string;
  let api: ChildProcess;
  let apiPort: number;
  let src: string;
  let confDir: string;

  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "brine-pyapi-"));
    tm = await startTestMaster({
      auto_accept: true,
      sharedsecret: SECRET,
      external_auth: { sharedsecret: { ops: [".*", "@runner", "@wheel"], viewer: ["test.ping"] } },
    });
    await startRealMinion(path.join(dir, "m"), "pyapi-m1", tm.retPort, tm.publishPort, "3007.x");
    src = realSaltSource("3007.x");
    apiPort = await freePort();
    // salt-api reads the master's own config: the same ports, sock_dir and cachedir as brine
    confDir = path.join(dir, "api");
    const c = tm.cfg;
    const conf = {
      interface: "127.0.0.1",
      publish_port: c.publish_port,
      ret_port: c.ret_port,
      pki_dir: c.pki_dir,
      cachedir: c.cachedir,
      sock_dir: c.sock_dir,
      log_file: path.join(dir, "api.log"),
      external_auth: c.external_auth,
      rest_cherrypy: { port: apiPort, host: "127.0.0.1", disable_ssl: true },
      netapi_enable_clients: ["local", "local_async", "runner", "wheel"],
    };
    (await import("node:fs")).mkdirSync(confDir, { recursive: true });
    writeFileSync(path.join(confDir, "master"), stringify(conf));
    api = spawn("/usr/bin/python3", [path.join(src, "scripts", "salt-api"), "-c", confDir, "-l", "warning"], { env: realSaltEnv(src), cwd: src, stdio: "ignore", detached: true });
    for (let i = 0; i < 100; i++) {
      try {
        await fetch(`http://127.0.0.1:${apiPort}/`);
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  });
  after(async () => {
    if (api?.pid) {
      try {
        process.kill(-api.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
    stopRealMinions(path.join(dir, "m"));
    await tm?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const post = (p: string, form: Record<string, string>, token?: string) =>
    fetch(`http://127.0.0.1:${apiPort}${p}`, {
      method: "POST",
      headers: { Accept: "application/json", "Content-Type": "application/x-www-form-urlencoded", ...(token ? { "X-Auth-Token": token } : {}) },
      body: new URLSearchParams(form).toString(),
    });

  test("/login with a wrong password is 401; with the right one salt-api holds a token brine minted", async () => {
    assert.equal((await post("/login", { username: "viewer", password: "wrong", eauth: "sharedsecret" })).status, 401);
    const r = await post("/login", { username: "viewer", password: SECRET, eauth: "sharedsecret" });
    assert.equal(r.status, 200);
    const body = (await r.json()) as { return: { token: string; user: string }[] };
    assert.equal(body.return[0]!.user, "viewer");
  });

  test("local test.ping through salt-api reaches the real minion and its return comes back from brine's bus", async () => {
    const login = (await (await post("/login", { username: "viewer", password: SECRET, eauth: "sharedsecret" })).json()) as { return: { token: string }[] };
    const token = login.return[0]!.token;
    const r = await post("/", { client: "local", tgt: "pyapi-m1", fun: "test.ping" }, token);
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { return: [{ "pyapi-m1": true }] });
    assert.equal((await post("/", { client: "local", tgt: "*", fun: "cmd.run", arg: "id" }, token)).status, 401, "brine refuses what viewer may not run");
  });

  test("/run with eauth credentials: brine's decisions for local, runner and wheel", async () => {
    assert.equal((await post("/run", { client: "local", tgt: "*", fun: "cmd.run", arg: "id", username: "nobody", password: "wrong", eauth: "sharedsecret" })).status, 401);
    const ok = (await (await post("/run", { client: "local", tgt: "pyapi-m1", fun: "test.echo", arg: "hi", username: "ops", password: SECRET, eauth: "sharedsecret" })).json()) as { return: unknown[] };
    assert.deepEqual(ok.return, [{ "pyapi-m1": "hi" }]);
    const run = (await (await post("/run", { client: "runner", fun: "manage.up", username: "ops", password: SECRET, eauth: "sharedsecret" })).json()) as { return: unknown[] };
    assert.deepEqual(run.return, [["pyapi-m1"]]);
    const wheel = (await (await post("/run", { client: "wheel", fun: "key.list_all", username: "ops", password: SECRET, eauth: "sharedsecret" })).json()) as { return: { data: { return: { minions: string[] }; success: boolean } }[] };
    assert.equal(wheel.return[0]!.data.success, true);
    assert.deepEqual(wheel.return[0]!.data.return.minions, ["pyapi-m1"]);
  });

  test("Salt's own salt CLI publishes through brine and prints the real minion's return", async () => {
    // asynchronous on purpose: the master under test runs in this process and must keep serving
    const p = spawn("/usr/bin/python3", [path.join(src, "scripts", "salt"), "-c", confDir, "pyapi-m1", "test.echo", "from-python-cli", "-t", "10"], { env: realSaltEnv(src), cwd: src });
    let out = "";
    let err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    await new Promise((r) => p.on("close", r));
    assert.match(out, /pyapi-m1:\s+from-python-cli/, out + err);
    assert.doesNotMatch(err, /does not exist/, "the job's files are where Salt's CLI looks");
  });
});
