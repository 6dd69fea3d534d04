#!/usr/bin/env node
// Runs every compiled test file under dist/test with node:test, one file more at a time than the machine has
// cores (3 on CI's 2: the cluster and syndic tests spend much of their time waiting on timers and sockets, which
// a third file fills); BRINE_TEST_CONCURRENCY sets it.
// Node 20's --test takes no globs, so the files are listed here, longest first: test/durations.json holds each
// file's last recorded duration (ms), files it does not name run first (in name order), so that the run does not
// end on one long cluster test alone. `--record` merges this run's durations into test/durations.json.
//   node scripts/run-tests.mjs [--record] [substring of a test path ...]  (a file runs when its path has any of them)
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

const DURATIONS = "test/durations.json";
const concurrency = process.env.BRINE_TEST_CONCURRENCY ? Number(process.env.BRINE_TEST_CONCURRENCY) : availableParallelism() + 1;
if (!Number.isInteger(concurrency) || concurrency < 1) {
  console.error(`BRINE_TEST_CONCURRENCY must be a whole number of test files at a time, 1 or more: ${process.env.BRINE_TEST_CONCURRENCY}`);
  process.exit(2);
}

function collect(dir, out) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) collect(p, out);
    else if (name.endsWith(".test.js")) out.push(p);
  }
  return out;
}

const args = process.argv.slice(2);
const record = args.includes("--record");
const filters = args.filter((a) => a !== "--record");
/** test/x.test.ts for dist/test/x.test.js */
const sourceOf = (f) => f.replace(/^dist[\\/]/, "").replace(/\.js$/, ".ts").split("\\").join("/");
// a compiled test whose source was deleted or renamed stays in dist/ until it is cleaned: run only those
// with a source, so a stale copy can neither fail nor skip the run
const known = existsSync(DURATIONS) ? JSON.parse(readFileSync(DURATIONS, "utf8")) : {};
const files = collect("dist/test", [])
  .filter((f) => existsSync(sourceOf(f)) && (filters.length === 0 || filters.some((x) => f.includes(x))))
  .sort()
  .sort((a, b) => {
    const [da, db] = [known[sourceOf(a)] ?? Infinity, known[sourceOf(b)] ?? Infinity];
    return da === db ? 0 : db > da ? 1 : -1;
  });
if (files.length === 0) {
  console.error(`no test files found under dist/test${filters.length ? ` matching ${filters.join(", ")}` : ""}`);
  process.exit(1);
}
const tmp = mkdtempSync(join(tmpdir(), "brine-test-durations-"));
const measured = join(tmp, "durations.json");
const res = spawnSync(
  process.execPath,
  [
    "--test",
    `--test-concurrency=${concurrency}`,
    "--test-timeout=300000",
    "--test-reporter=spec",
    "--test-reporter-destination=stdout",
    "--test-reporter=./scripts/test-durations-reporter.mjs",
    `--test-reporter-destination=${measured}`,
    ...files,
  ],
  { stdio: "inherit" },
);
if (record && existsSync(measured)) {
  const merged = { ...known };
  for (const [file, ms] of Object.entries(JSON.parse(readFileSync(measured, "utf8")))) merged[file] = Math.round(ms);
  const sorted = Object.fromEntries(Object.keys(merged).filter((f) => existsSync(f)).sort().map((f) => [f, merged[f]]));
  writeFileSync(DURATIONS, JSON.stringify(sorted, null, 1) + "\n");
  console.log(`${DURATIONS}: ${Object.keys(JSON.parse(readFileSync(measured, "utf8"))).length} files recorded`);
}
rmSync(tmp, { recursive: true, force: true });
process.exit(res.status ?? 1);
