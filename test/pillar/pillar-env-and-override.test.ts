/**
 * Pillar environments and overrides as the minion's `_pillar` request selects them: all environments'
 * top files by default, only `pillarenv` when the minion (or the master option) names one,
 * `pillarenv_from_saltenv`, the `none` merging strategy (only the saltenv's top), `__env__` roots, and
 * `pillar_override` merged over the compiled pillar.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { masterDefaults, type MasterConfig } from "../../src/shared/config/defaults.js";
import { configureLogging } from "../../src/shared/log.js";
import { PillarCompiler, type CompileRequest } from "../../src/lib/pillar/compile.js";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { TestMaster } from "../helpers/master.js";
import { copyTree, fixture, minion, pillarOf, startFsMaster, tempRoot, writeTree } from "../fileserver/helpers.js";

configureLogging({ level: process.env.BRINE_TEST_LOG ?? "quiet" });

function twoEnvs(extra: Partial<MasterConfig> = {}): PillarCompiler {
  const root = tempRoot("brine-penv-");
  writeTree(root, {
    "base/top.sls": "base:\n  '*':\n    - common\n",
    "base/common.sls": "where: base\nbase_only: 1\n",
    "dev/top.sls": "dev:\n  '*':\n    - devonly\n",
    "dev/devonly.sls": "where: dev\ndev_only: 1\n",
  });
  return new PillarCompiler({ ...masterDefaults(), pillar_roots: { base: [path.join(root, "base")], dev: [path.join(root, "dev")] }, ...extra });
}
const req = (r: Partial<CompileRequest> = {}): CompileRequest => ({ id: "m1", grains: {}, ...r });

describe("pillar environments", () => {
  test("without pillarenv every environment's top file applies (brine merges base first, then the others in config order)", async () => {
    assert.deepEqual(await twoEnvs().compile(req()), { where: "dev", base_only: 1, dev_only: 1 });
  });

  test("the minion's pillarenv limits the pillar to that environment", async () => {
    assert.deepEqual(await twoEnvs().compile(req({ pillarenv: "dev" })), { where: "dev", dev_only: 1 });
    assert.deepEqual(await twoEnvs().compile(req({ pillarenv: "base" })), { where: "base", base_only: 1 });
  });

  test("a pillarenv that is not configured gives an empty pillar", async () => {
    assert.deepEqual(await twoEnvs().compile(req({ pillarenv: "nosuch" })), {});
  });

  test("the master's pillarenv option applies when the minion sends none", async () => {
    assert.deepEqual(await twoEnvs({ pillarenv: "base" }).compile(req()), { where: "base", base_only: 1 });
  });

  test("pillarenv_from_saltenv takes the minion's saltenv", async () => {
    assert.deepEqual(await twoEnvs({ pillarenv_from_saltenv: true }).compile(req({ saltenv: "dev" })), { where: "dev", dev_only: 1 });
  });

  test("the none merging strategy reads only the saltenv's (or base's) top file", async () => {
    assert.deepEqual(await twoEnvs({ pillar_source_merging_strategy: "none" }).compile(req()), { where: "base", base_only: 1 });
    assert.deepEqual(await twoEnvs({ pillar_source_merging_strategy: "none" }).compile(req({ saltenv: "dev" })), { where: "dev", dev_only: 1 });
  });

  test("an __env__ root serves the requested pillarenv with the name substituted", async () => {
    const root = tempRoot("brine-penv-");
    writeTree(root, { "qa/top.sls": "qa:\n  '*':\n    - q\n", "qa/q.sls": "q: from qa\n" });
    const c = new PillarCompiler({ ...masterDefaults(), pillar_roots: { __env__: [path.join(root, "__env__")] } });
    assert.deepEqual(await c.compile(req({ pillarenv: "qa" })), { q: "from qa" });
  });

  test("pillar_override is merged over the compiled pillar", async () => {
    const p = await twoEnvs().compile(req({ pillarOverride: { where: "override", extra: { a: 1 } } }));
    assert.deepEqual(p, { where: "override", base_only: 1, dev_only: 1, extra: { a: 1 } });
  });
});

describe("pillarenv and pillar_override from a test minion's _pillar", () => {
  let tm: TestMaster;
  let m: TestMinion;
  before(async () => {
    const dir = tempRoot("brine-penv-");
    copyTree(fixture("pillar-tree", "base"), path.join(dir, "srv", "pillar"));
    copyTree(fixture("pillar-tree", "dev"), path.join(dir, "srv", "pillar-dev"));
    tm = await startFsMaster({ pillar_roots: { base: [path.join(dir, "srv", "pillar")], dev: [path.join(dir, "srv", "pillar-dev")] } }, dir);
    m = await minion(tm, "db01", 2, { role: "db" });
  });
  after(async () => {
    await m?.stop();
    await tm?.stop();
  });

  test("pillarenv: dev gives only the dev environment's pillar", async () => {
    assert.deepEqual(await pillarOf(m, { pillarenv: "dev" }), { env_marker: "dev" });
  });

  test("pillar_override values win and appear even when nothing else matches", async () => {
    const p = (await pillarOf(m, { pillar_override: { db: { engine: "mysql" }, cli: true } })) as Record<string, unknown>;
    assert.deepEqual(p.db, { engine: "mysql", note: "{{ not rendered by jinja }}" });
    assert.equal(p.cli, true);
    assert.equal(p.env_marker, "dev");
  });
});
