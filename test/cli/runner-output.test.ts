/**
 * salt-run prints a runner's return with the outputter the return names (state.orchestrate's
 * {"outputter": "highstate", "data": ..., "retcode": N}) and exits with its retcode, as Salt's salt-run does;
 * the text is the golden one captured from Salt's highstate outputter for the same envelope.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { runnerOutput } from "../../src/lib/output/display.js";
import { chooseOutputter, render } from "../../src/lib/output/outputters.js";
import { repoRoot } from "../helpers/paths.js";

const dir = path.join(repoRoot, "test", "fixtures", "cli-output");
const cases = JSON.parse(readFileSync(path.join(dir, "cases.json"), "utf8")) as { name: string; data: unknown }[];

test("an orchestration's return is printed by the highstate outputter, its retcode the exit code", () => {
  const env = structuredClone(cases.find((c) => c.name === "highstate-orchestrate")!.data) as Record<string, unknown>;
  env.retcode = 1;
  const shown = runnerOutput(env);
  assert.equal(shown.out, "highstate");
  assert.equal(shown.retcode, 1);
  const text = render(chooseOutputter(shown.out, {}), shown.data, { color: false });
  assert.equal(text, readFileSync(path.join(dir, "highstate-orchestrate.txt"), "utf8"));
});

test("exactly {data, outputter}: the data alone goes to the named outputter; --out wins over it", () => {
  assert.deepEqual(runnerOutput({ outputter: "json", data: { a: 1 } }), { data: { a: 1 }, out: "json", retcode: 0 });
  assert.equal(chooseOutputter("json", { output: "yaml" }), "yaml");
  // Salt keeps a return's own outputter when --out=highstate is asked (issue #29796)
  assert.equal(chooseOutputter("nested", { output: "highstate" }), "nested");
});

test("a plain return is printed whole with the default outputter and exits 0", () => {
  assert.deepEqual(runnerOutput(["a", "b"]), { data: ["a", "b"], retcode: 0 });
  assert.deepEqual(runnerOutput({ m1: true }), { data: { m1: true }, out: undefined, retcode: 0 });
});
