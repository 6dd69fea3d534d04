// A node:test reporter that sums each test file's top-level tests (and suites) into milliseconds, and writes
// {"test/<path>.test.ts": ms} as JSON at the end: what scripts/run-tests.mjs --record merges into
// test/durations.json, which orders the next runs (longest files first).
import { relative } from "node:path";

export default async function* durations(source) {
  const perFile = {};
  for await (const e of source) {
    if ((e.type !== "test:pass" && e.type !== "test:fail") || e.data.nesting !== 0 || !e.data.file) continue;
    const key = relative(process.cwd(), e.data.file).replace(/^dist[\\/]/, "").replace(/\.js$/, ".ts").split("\\").join("/");
    perFile[key] = (perFile[key] ?? 0) + (e.data.details?.duration_ms ?? 0);
  }
  yield JSON.stringify(perFile);
}
