/**
 * Pillar compiled per minion from the fixture tree (test/fixtures/pillar-tree), through `_pillar` from
 * test minions with different ids and grains: the top file's glob, list, pcre, grain and compound
 * targets (default compound and `match:` forms), includes (relative and keyed), a Jinja loop, shebang
 * renderers, and the private signed reply the minion verifies.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import type { TestMinion } from "../../src/lib/minion/test-minion.js";
import type { TestMaster } from "../helpers/master.js";
import { copyTree, fixture, minion, pillarOf, startFsMaster, tempRoot } from "../fileserver/helpers.js";

const COMMON = { ntp: "pool.ntp.org", role: "none" };
const USERS = {
  users: { alice: { uid: 1001, admin: true }, bob: { uid: 1002, admin: false }, carol: { uid: 1003, admin: false } },
  admins: ["alice"],
};

describe("pillar top targeting, per minion", () => {
  let tm: TestMaster;
  const minions = new Map<string, TestMinion>();
  const pillar = (id: string) => pillarOf(minions.get(id)!) as Promise<Record<string, unknown>>;

  before(async () => {
    const dir = tempRoot("brine-pillar-");
    copyTree(fixture("pillar-tree", "base"), path.join(dir, "srv", "pillar"));
    tm = await startFsMaster({ worker_threads: 2 }, dir);
    const specs: Array<[string, Record<string, unknown>]> = [
      ["web01", { role: "web", os_family: "Debian" }],
      ["db01", { role: "db", os_family: "Debian" }],
      ["cache1", { role: "cache", os_family: "RedHat" }],
      ["webcache", { role: "cache", os_family: "Debian" }],
      ["app7", { os_family: "Debian" }],
      ["nested1", { os_family: "Debian" }],
    ];
    await Promise.all(specs.map(async ([id, grains], i) => minions.set(id, await minion(tm, id, i, grains))));
  });
  after(async () => {
    await Promise.all([...minions.values()].map((m) => m.stop()));
    await tm?.stop();
  });

  test("the pillar sent at minion start is the compiled pillar", async () => {
    const m = minions.get("db01")!;
    assert.deepEqual((m.pillar as Record<string, unknown>).db, { engine: "postgres", note: "{{ not rendered by jinja }}" });
  });

  test("'*' (default compound) reaches every minion, with Jinja on grains, saltenv and sls", async () => {
    for (const id of minions.keys()) {
      const p = await pillar(id);
      assert.equal((p.common as Record<string, unknown>).ntp, COMMON.ntp);
      assert.equal((p.common as Record<string, unknown>).motd, `Welcome to ${id} (base/common)`);
    }
  });

  test("a glob target ('web*') with a relative include: the including file wins", async () => {
    const p = await pillar("web01");
    assert.deepEqual(p.web, { managed_by: "common", server: "nginx", port: 80, sls_dir: "web" });
    assert.deepEqual(p.packages, ["nginx"]);
  });

  test("a list target (match: list)", async () => {
    assert.ok("db" in (await pillar("db01")));
    assert.ok(!("db" in (await pillar("web01"))));
  });

  test("a compound target with grains and a negated glob (match: compound)", async () => {
    assert.deepEqual((await pillar("cache1")).cache, { size_mb: 128 });
    assert.ok(!("cache" in (await pillar("webcache"))), "webcache is excluded by 'not web*'");
  });

  test("a grain target (match: grain)", async () => {
    assert.equal((await pillar("cache1")).pkg_manager, "yum");
    assert.ok(!("pkg_manager" in (await pillar("db01"))));
  });

  test("a pcre target (match: pcre) with a Jinja filter on the id", async () => {
    assert.deepEqual((await pillar("app7")).app, { tier: "tier-7" });
    assert.ok(!("app" in (await pillar("web01"))));
  });

  test("a compound 'or' of grain targets renders the Jinja loop for both roles", async () => {
    for (const id of ["web01", "db01"]) {
      const p = await pillar(id);
      assert.deepEqual(p.users, USERS.users);
      assert.deepEqual(p.admins, USERS.admins);
    }
    assert.ok(!("users" in (await pillar("app7"))));
  });

  test("an include with key: and defaults: nests the included data and feeds it variables", async () => {
    const p = await pillar("nested1");
    assert.deepEqual(p.team, { members: { names: ["x", "y"], extra: "from-defaults" } });
    assert.equal(p.outer, true);
  });

  test("#!yaml skips Jinja; #!jinja|yaml renders", async () => {
    assert.equal(((await pillar("db01")).db as Record<string, unknown>).note, "{{ not rendered by jinja }}");
    assert.deepEqual((await pillar("cache1")).cache, { size_mb: 128 });
  });

  test("no minion gets another minion's targeted data, and no errors appear", async () => {
    for (const id of minions.keys()) assert.ok(!("_errors" in (await pillar(id))), id);
    const app = await pillar("app7");
    assert.deepEqual(Object.keys(app).sort(), ["app", "common", "packages", "web"]);
  });
});
