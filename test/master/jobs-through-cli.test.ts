/**
 * Jobs end to end through brine's own `salt` CLI and test minions: every target type, the find_job
 * loop for a job longer than -t, "[Not connected]" for a stopped minion, --async, exit codes, the job
 * cache (jobs.lookup_jid) and a restart that keeps keys and jobs.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import { startTestMaster, type TestMaster } from "../helpers/master.js";
import { fastMinion, testKeys } from "../helpers/minions.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";

describe("jobs through the salt CLI", { timeout: 300_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  const minions: TestMinion[] = [];
  const salt = (...a: string[]) => runCli("salt", ["-c", conf, ...a]);
  const json = (s: string) => Object.assign({}, ...s.trim().split(/\n(?=\{)/).filter(Boolean).map((b) => JSON.parse(b)));

  before(async () => {
    tm = await startTestMaster({ auto_accept: true, nodegroups: { dbs: "L@tg-db1,tg-db2", webs: "tg-web*" } });
    conf = writeConfigDir(tm);
    const k = await testKeys(4);
    const specs = [
      { id: "tg-web1", ip: "127.0.0.21", grains: { os: "Debian", roles: ["web"], env: "prod" } },
      { id: "tg-web2", ip: "127.0.0.22", grains: { os: "Ubuntu", roles: ["web"], env: "dev" } },
      { id: "tg-db1", ip: "127.0.0.23", grains: { os: "Debian", roles: ["db"], env: "prod" } },
      { id: "tg-db2", ip: "127.0.0.24", grains: { os: "RedHat", roles: ["db"], env: "dev" } },
    ];
    for (const [i, s] of specs.entries()) {
      const m = fastMinion(tm, s.id, k[i]!, { sourceIp: s.ip, grains: { id: s.id, ipv4: [s.ip], ...s.grains } });
      minions.push(m);
    }
    await Promise.all(minions.map((m) => m.start()));
  });
  after(async () => {
    for (const m of minions) await m.stop();
    await tm.stop();
  });

  const cases: [string, string[], string[]][] = [
    ["glob", ["tg-web*"], ["tg-web1", "tg-web2"]],
    ["list", ["-L", "tg-web1,tg-db2"], ["tg-db2", "tg-web1"]],
    ["pcre", ["-E", "tg-(db|web)1"], ["tg-db1", "tg-web1"]],
    ["grain", ["-G", "os:Debian"], ["tg-db1", "tg-web1"]],
    ["grain_pcre", ["-P", "os:(Red|Ubu).*"], ["tg-db2", "tg-web2"]],
    ["compound", ["-C", "G@roles:db and not G@env:dev"], ["tg-db1"]],
    ["compound with list, pcre and parentheses", ["-C", "( L@tg-web2 or E@tg-db. ) and not tg-db2"], ["tg-db1", "tg-web2"]],
    ["nodegroup", ["-N", "dbs"], ["tg-db1", "tg-db2"]],
    ["compound with a nodegroup", ["-C", "N@webs and G@env:prod"], ["tg-web1"]],
  ];
  for (const [name, tgt, want] of cases) {
    test(`target type ${name}: exactly the matching minions return`, async () => {
      const r = await salt(...tgt, "test.ping", "--out", "json", "-t", "10");
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(Object.keys(json(r.stdout)).sort(), want);
    });
  }

  test("arguments: positional YAML values and key=value kwargs reach the function", async () => {
    const r = await salt("tg-web1", "test.arg", "1", "two", "[3, 4]", "k=v", "n=5", "--out", "json");
    assert.deepEqual(json(r.stdout)["tg-web1"], { args: [1, "two", [3, 4]], kwargs: { k: "v", n: 5 } });
  });

  test("no match: nothing is sent and the CLI says so", async () => {
    const r = await salt("nosuch*", "test.ping");
    // as the Python CLI: the client's message on stdout, then no return to show (exit 2)
    assert.equal(r.code, 2);
    assert.equal(r.stdout, "No minions matched the target. No command was sent, no jid was assigned.\n");
    assert.equal(r.stderr, "ERROR: No return received\n");
  });

  test("a job longer than -t keeps the CLI waiting through find_job rounds and its return is printed", async () => {
    const r = await salt("tg-db1", "test.sleep", "3", "-t", "1", "--gather-job-timeout", "2", "--out", "json");
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(json(r.stdout), { "tg-db1": true });
  });

  test("--async prints the jid; jobs.lookup_jid later shows the returns", async () => {
    const r = await salt("tg-web*", "test.echo", "later", "--async");
    const m = /Executed command with job ID: (\d{20})/.exec(r.stdout);
    assert.ok(m, r.stdout);
    let got: Record<string, unknown> = {};
    for (let i = 0; i < 40 && Object.keys(got).length < 2; i++) {
      await new Promise((res) => setTimeout(res, 100));
      got = JSON.parse((await runCli("salt-run", ["-c", conf, "jobs.lookup_jid", m[1]!, "--out", "json"])).stdout);
    }
    assert.deepEqual(got, { "tg-web1": "later", "tg-web2": "later" });
  });

  test("a failing command makes the CLI exit 1 with Salt's message", async () => {
    const r = await salt("tg-web2", "test.retcode", "3", "--out", "json");
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Minions returned with non-zero exit code/);
  });

  test("a stopped minion is reported [Not connected]; connected ones answer", async () => {
    const gone = minions.find((m) => m.id === "tg-db2")!;
    await gone.stop();
    await new Promise((res) => setTimeout(res, 300));
    const r = await salt("tg-db*", "test.ping", "-t", "1", "--gather-job-timeout", "1", "--out", "json");
    assert.equal(r.code, 1);
    const out = json(r.stdout);
    assert.equal(out["tg-db1"], true);
    assert.equal(out["tg-db2"], "Minion did not return. [Not connected]");
    const up = JSON.parse((await runCli("salt-run", ["-c", conf, "manage.present", "--out", "json"])).stdout);
    assert.deepEqual(up, ["tg-db1", "tg-web1", "tg-web2"]);
    await gone.start();
  });

  test("a restarted master keeps accepted keys and the job cache", async () => {
    const before = JSON.parse((await runCli("salt-run", ["-c", conf, "jobs.list_jobs", "--out", "json"])).stdout);
    assert.ok(Object.keys(before).length >= 10);
    tm = await tm.restart();
    const keys = await runCli("salt-key", ["-c", conf, "-L", "--out", "json"]);
    assert.deepEqual(JSON.parse(keys.stdout).minions, ["tg-db1", "tg-db2", "tg-web1", "tg-web2"]);
    const after = JSON.parse((await runCli("salt-run", ["-c", conf, "jobs.list_jobs", "--out", "json"])).stdout);
    for (const jid of Object.keys(before)) assert.ok(jid in after, `${jid} kept across the restart`);
    // the only new job: the first jobs.list_jobs call itself (runner calls are stored when they end, as in Salt)
    assert.deepEqual(Object.keys(after).filter((j) => !(j in before)).map((j) => after[j].Function), ["runner.jobs.list_jobs"]);
  });
});
