/**
 * A runner thread loads only the module of the runner it runs: the registry's table of which module serves
 * which Salt module names must match what each module exports, or a runner would not be found.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { RUNNER_MODULES, RUNNERS, allRunnerNames, findRunner } from "../../src/runners/registry.js";

test("every runner a module exports is under a prefix the registry names for that module", async () => {
  for (const m of RUNNER_MODULES) {
    for (const name of Object.keys(await m.load())) {
      assert.ok(m.prefixes.includes(name.split(".")[0]!), `${name} is served by a module listed for ${m.prefixes.join(", ")}`);
      assert.equal(typeof (await findRunner(name)), "function", name);
    }
  }
});

test("no two modules serve the same prefix, and the everyday runners are found", async () => {
  const seen = RUNNER_MODULES.flatMap((m) => m.prefixes);
  assert.equal(new Set(seen).size, seen.length);
  const names = await allRunnerNames();
  for (const n of ["jobs.list_jobs", "jobs.lookup_jid", "manage.up", "cluster.ring_info", "state.event", "cache.grains", "brine.stats"]) assert.ok(names.includes(n), n);
  assert.equal(await findRunner("nosuch.thing"), undefined);
  assert.equal(await findRunner("jobs.nosuch"), undefined);
});

test("a runner registered in code is found before the modules", async () => {
  const fn = async () => "injected";
  RUNNERS["jobs.list_jobs"] = fn;
  try {
    assert.equal(await findRunner("jobs.list_jobs"), fn);
  } finally {
    delete RUNNERS["jobs.list_jobs"];
  }
});
