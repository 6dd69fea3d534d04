#!/usr/bin/env node
// Runs every compiled test file under dist/test with node:test.
// Node 20's --test takes no globs, so the files are listed here.
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

function collect(dir, out) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) collect(p, out);
    else if (name.endsWith(".test.js")) out.push(p);
  }
  return out;
}

const filter = process.argv[2];
// a compiled test whose source was deleted or renamed stays in dist/ until it is cleaned: run only those
// with a source, so a stale copy can neither fail nor skip the run
const hasSource = (f) => existsSync(f.replace(/^dist[\\/]/, "").replace(/\.js$/, ".ts"));
const files = collect("dist/test", []).filter((f) => hasSource(f) && (!filter || f.includes(filter))).sort();
if (files.length === 0) {
  console.error("no test files found under dist/test");
  process.exit(1);
}
const res = spawnSync(process.execPath, ["--test", "--test-concurrency=2", "--test-timeout=300000", "--test-reporter=spec", ...files], {
  stdio: "inherit",
});
process.exit(res.status ?? 1);
