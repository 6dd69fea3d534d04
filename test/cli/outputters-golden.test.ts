/**
 * Every outputter prints the same text as Salt's for the same data: the golden files under
 * test/fixtures/cli-output/ were captured from Salt 3007's own outputters (scripts/capture-cli-output.py)
 * on the cases in cases.json.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { render } from "../../src/lib/output/outputters.js";
import { pformat } from "../../src/lib/output/pyrepr.js";
import type { OutOpts } from "../../src/lib/output/opts.js";
import { repoRoot } from "../helpers/paths.js";

const dir = path.join(repoRoot, "test", "fixtures", "cli-output");
const cases = JSON.parse(readFileSync(path.join(dir, "cases.json"), "utf8")) as { name: string; out: string; data: unknown; opts: Record<string, unknown>; _retcode?: number }[];

/** Salt's option names to ours: out.table.* settings gather under `table`. */
function outOpts(c: (typeof cases)[number]): OutOpts {
  const o: Record<string, unknown> = { color: false, table: {} };
  for (const [k, v] of Object.entries(c.opts)) {
    if (k.startsWith("out.table.")) (o.table as Record<string, unknown>)[k.slice("out.table.".length)] = v;
    else o[k] = v;
  }
  if (c._retcode !== undefined) o._retcode = c._retcode;
  return o as unknown as OutOpts;
}

for (const c of cases) {
  test(`outputter ${c.out}: ${c.name} matches Salt's text`, () => {
    const want = readFileSync(path.join(dir, `${c.name}.txt`), "utf8");
    assert.equal(render(c.out, structuredClone(c.data), outOpts(c)), want);
  });
}

const pformatCases = JSON.parse(readFileSync(path.join(dir, "pformat.json"), "utf8")) as { value: unknown; text: string }[];
test("pprint.pformat layouts (sorted dicts, one element per line, long strings cut at whitespace) match Python's", () => {
  for (const c of pformatCases) assert.equal(pformat(c.value), c.text);
});
