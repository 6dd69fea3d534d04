/**
 * A real salt-minion (3007.x) against brine serving states from gitfs and pillar from git_pillar, cmd_json
 * and file_tree, all from local repositories made here: `cp.envs`, `cp.list_master`, `cp.get_file` and
 * `state.apply` from the base (master branch) and qa (branch) environments, a push picked up by the
 * running master (its maintenance timer fetches every second here) without a restart, and the external
 * pillar reaching the minion. Skips with a message when Salt's source is absent.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import type { MasterConfig } from "../../src/shared/config/defaults.js";
import type { TestMaster } from "../helpers/master.js";
import { realSaltSkipReason, startRealMinion, stopRealMinions } from "../helpers/real-salt.js";
import { runCli, writeConfigDir } from "../helpers/cli.js";
import { startFsMaster, tempRoot, writeTree } from "./helpers.js";
import { LocalRepo } from "./gitfs-helpers.js";

const skip = realSaltSkipReason(["3007.x"]);
const ID = "gitfs-rm";

describe("a real salt-minion with gitfs states and git_pillar pillar from brine", { skip, timeout: 600_000 }, () => {
  let tm: TestMaster;
  let conf: string;
  const out = tempRoot("brine-gitfs-out-");
  const runDir = mkdtempSync(path.join(os.tmpdir(), "rsgf-"));
  const states = new LocalRepo("brine-gitfs-states-");
  const pillar = new LocalRepo("brine-gitfs-pillar-");
  const salt = async (...a: string[]) => {
    const r = await runCli("salt", ["-c", conf, ID, ...a, "--out", "json", "-t", "90"], { timeoutMs: 300_000 });
    try {
      return (JSON.parse(r.stdout) as Record<string, unknown>)[ID];
    } catch {
      throw new Error(`salt ${a.join(" ")}: ${r.stdout.slice(0, 1000)} ${r.stderr.slice(0, 1000)}`);
    }
  };

  before(async () => {
    states.commit("master", {
      "top.sls": "base:\n  '*':\n    - gitapp\n",
      "gitapp/init.sls": `gitapp-conf:\n  file.managed:\n    - name: ${out}/{{ grains['id'] }}/conf.txt\n    - source: salt://gitapp/files/conf.txt\n    - template: jinja\n    - makedirs: True\n`,
      "gitapp/files/conf.txt": "color={{ pillar['color'] }}\nfrom={{ pillar['source'] }}\n",
      "plain.txt": "version 1\n",
    });
    states.commit("qa", { "qa.sls": `qa-marker:\n  file.managed:\n    - name: ${out}/{{ grains['id'] }}/qa.txt\n    - contents: qa branch\n    - makedirs: True\n` });
    pillar.commit("master", { "top.sls": "base:\n  '*':\n    - data\n", "data.sls": "color: green\nsource: git_pillar\n" });
    const ft = tempRoot("brine-gitfs-ft-");
    writeTree(ft, { [`hosts/${ID}/motd`]: "hello from file_tree\n" });
    tm = await startFsMaster({
      worker_threads: 2,
      fileserver_backend: ["roots", "gitfs"],
      gitfs_remotes: [states.url],
      gitfs_update_interval: 1,
      git_pillar_update_interval: 1,
      ext_pillar: [{ git: [`master ${pillar.url}`] }, { cmd_json: `echo '{"ext_id": "%s"}'` }, { file_tree: { root_dir: ft } }],
    } as Partial<MasterConfig>);
    conf = writeConfigDir(tm);
    await startRealMinion(runDir, ID, tm.retPort, tm.publishPort, "3007.x");
  });
  after(async () => {
    stopRealMinions(runDir);
    await tm?.stop();
    rmSync(runDir, { recursive: true, force: true });
  });

  test("cp.envs lists the branches, cp.list_master a branch's files; cp.get_file fetches from the base environment", async () => {
    const envs = await salt("cp.envs");
    assert.ok(Array.isArray(envs), JSON.stringify(envs));
    assert.deepEqual(envs.sort(), ["base", "qa"]);
    assert.deepEqual(await salt("cp.list_master", "saltenv=qa"), ["gitapp/files/conf.txt", "gitapp/init.sls", "plain.txt", "qa.sls", "top.sls"]);
    const dest = path.join(out, "got.txt");
    assert.equal(await salt("cp.get_file", "salt://plain.txt", dest), dest);
    assert.equal(readFileSync(dest, "utf8"), "version 1\n");
  });

  test("pillar.items: git_pillar, cmd_json and file_tree data reach the minion", async () => {
    const p = (await salt("pillar.items")) as Record<string, unknown>;
    assert.equal(p.color, "green");
    assert.equal(p.source, "git_pillar");
    assert.equal(p.ext_id, ID);
    assert.equal(p.motd, "hello from file_tree");
    assert.equal(p._errors, undefined);
  });

  test("state.apply (highstate from the master branch) renders a gitfs template with git_pillar data", async () => {
    const r = (await salt("state.apply")) as Record<string, { result: boolean }>;
    assert.ok(Object.values(r).length === 1 && Object.values(r).every((s) => s.result === true), JSON.stringify(r).slice(0, 1500));
    assert.equal(readFileSync(path.join(out, ID, "conf.txt"), "utf8"), "color=green\nfrom=git_pillar\n");
  });

  test("state.apply from the qa branch (saltenv=qa)", async () => {
    const r = (await salt("state.apply", "qa", "saltenv=qa")) as Record<string, { result: boolean }>;
    assert.ok(Object.values(r).every((s) => s.result === true), JSON.stringify(r).slice(0, 1500));
    assert.equal(readFileSync(path.join(out, ID, "qa.txt"), "utf8"), "qa branch\n");
  });

  test("a push to the states and pillar repositories is served without a restart", async () => {
    states.commit("master", { "plain.txt": "version 2\n" });
    pillar.commit("master", { "data.sls": "color: red\nsource: git_pillar\n" });
    const dest = path.join(out, "got2.txt");
    const deadline = Date.now() + 60_000;
    let text = "";
    while (Date.now() < deadline) {
      await salt("cp.get_file", "salt://plain.txt", dest);
      text = readFileSync(dest, "utf8");
      if (text === "version 2\n") break;
      await new Promise((r) => setTimeout(r, 1000));
    }
    assert.equal(text, "version 2\n");
    await salt("saltutil.refresh_pillar", "wait=True");
    assert.equal(await salt("pillar.get", "color"), "red");
  });
});
