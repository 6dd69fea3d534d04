#!/usr/bin/env node
// Runs every compiled test file under dist/test with node:test, one file more at a time than the machine has
// cores (3 on CI's 2: the cluster and syndic tests spend much of their time waiting on timers and sockets, which
// a third file fills); BRINE_TEST_CONCURRENCY sets it.
// The files run longest first: test/durations.json holds each file's last recorded duration (ms), files it does
// not name run first (in name order), so that the run does not end on one long cluster test alone. They go to
// node:test's run(), which starts them in the order given; `node --test <files>` sorts its files by name (Node 20's
// createTestFileList), which ran them in name order whatever this script asked. `--record` merges this run's
// durations into test/durations.json.
//   node scripts/run-tests.mjs [--record] [substring of a test path ...]  (a file runs when its path has any of them)
import { existsSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { run } from "node:test";
import { spec } from "node:test/reporters";
import durations from "./test-durations-reporter.mjs";

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
/**
 * A test file's subprocess is ended past this, ms (the CLI's --test-timeout): a hang guard, as long as the longest
 * timeout a test declares (job-placement's 900 s). At 300 s a full run at load ~32 ended job-placement, whose one
 * test allows itself 900 s, while it was still placing its jobs.
 */
const fileTimeoutMs = 900_000;
let failed = false;
const events = run({ files, concurrency, timeout: fileTimeoutMs });
// as `node --test` does: a failed test that is not a todo fails the run
events.on("test:fail", (data) => {
  if (data.todo === undefined || data.todo === false) failed = true;
});
const [toSpec, toDurations] = [new PassThrough({ objectMode: true }), new PassThrough({ objectMode: true })];
events.pipe(toSpec);
events.pipe(toDurations);
const printed = new Promise((resolve, reject) => toSpec.compose(new spec()).on("error", reject).on("end", resolve).pipe(process.stdout, { end: false }));
let measured = "";
for await (const chunk of toDurations.compose(durations)) measured += chunk;
await printed;
if (record && measured) {
  const merged = { ...known };
  for (const [file, ms] of Object.entries(JSON.parse(measured))) merged[file] = Math.round(ms);
  const sorted = Object.fromEntries(Object.keys(merged).filter((f) => existsSync(f)).sort().map((f) => [f, merged[f]]));
  writeFileSync(DURATIONS, JSON.stringify(sorted, null, 1) + "\n");
  console.log(`${DURATIONS}: ${Object.keys(JSON.parse(measured)).length} files recorded`);
}
process.exit(failed ? 1 : 0);
